package cli

import (
	"strings"
	"testing"

	"github.com/relock-go/relock"
)

// TestRefusals pins what demo, run and elect print, and the code they exit
// with, when they refuse their arguments, cannot reach Redis, cannot start
// the command, or find a semaphore of another size.
func TestRefusals(t *testing.T) {
	mr, url := server(t)
	mr.Set("pool", "2") // a semaphore of 2 permits
	const down = "redis://127.0.0.1:1"
	tests := []struct {
		args   []string
		code   int
		stderr string
	}{
		{[]string{"demo", "extra"}, exitUsage, `relock demo: unexpected argument "extra"
Run 'relock help demo' for usage.
`},
		{[]string{"demo", "--clients", "0"}, exitUsage, `relock demo: --clients must be at least 1
Run 'relock help demo' for usage.
`},
		{[]string{"demo", "--workers", "0"}, exitUsage, `relock demo: --workers must be at least 1
Run 'relock help demo' for usage.
`},
		{[]string{"demo", "--locks", "0"}, exitUsage, `relock demo: --locks must be at least 1
Run 'relock help demo' for usage.
`},
		{[]string{"demo", "--hold", "-1s"}, exitUsage, `relock demo: --acquisitions, --duration and --hold cannot be negative
Run 'relock help demo' for usage.
`},
		{[]string{"demo", "--acquisitions", "0"}, exitUsage, `relock demo: give --acquisitions or --duration a limit
Run 'relock help demo' for usage.
`},
		{[]string{"demo", "--prefix", ""}, exitUsage, `relock demo: --prefix cannot be empty
Run 'relock help demo' for usage.
`},
		{[]string{"demo", "--redis", "nonsense"}, exitUsage, `relock demo: invalid Redis URL "nonsense": want redis://host:port
Run 'relock help demo' for usage.
`},
		{[]string{"demo", "--redis", down}, exitFailure, `relock demo: running on redis://127.0.0.1:1
relock demo: cannot reach redis://127.0.0.1:1: dial tcp 127.0.0.1:1: connect: connection refused
`},

		{[]string{"run", "-n", "-1", "job", "--", "true"}, exitUsage, `relock run: -n must be positive
Run 'relock help run' for usage.
`},
		{[]string{"run", "--lease", "0s", "job", "--", "true"}, exitUsage, `relock run: --lease must be positive
Run 'relock help run' for usage.
`},
		{[]string{"run", "--grace", "-1s", "job", "--", "true"}, exitUsage, `relock run: --grace cannot be negative
Run 'relock help run' for usage.
`},
		{[]string{"run", "--", "true"}, exitUsage, `relock run: missing lock NAME before the command (relock run [flags] NAME [--] command)
Run 'relock help run' for usage.
`},
		{[]string{"run", "job"}, exitUsage, `relock run: missing the command to run
Run 'relock help run' for usage.
`},
		{[]string{"run", "--redis", url, "job", "--", "relock-no-such-command"}, 127, `relock run: exec: "relock-no-such-command": executable file not found in $PATH
`},
		{[]string{"run", "--redis", down, "job", "--", "true"}, exitFailure, `relock run: cannot reach redis://127.0.0.1:1: dial tcp 127.0.0.1:1: connect: connection refused
`},
		{[]string{"run", "--redis", url, "-n", "3", "pool", "--", "true"}, exitFailure, `relock run: semaphore "pool" exists with 2 permits, not 3: -n does not change an existing semaphore's count
`},

		{[]string{"elect", "jobs"}, exitUsage, `relock elect: missing the command to run
Run 'relock help elect' for usage.
`},
		{[]string{"elect", "--observe"}, exitUsage, `relock elect: --observe takes one election NAME and no command
Run 'relock help elect' for usage.
`},
		{[]string{"elect", "--observe", "jobs", "extra"}, exitUsage, `relock elect: --observe takes one election NAME and no command
Run 'relock help elect' for usage.
`},
		{[]string{"elect", "--json", "jobs", "--", "true"}, exitUsage, `relock elect: --json goes with --observe
Run 'relock help elect' for usage.
`},
		{[]string{"elect", "--wait", "0s", "jobs", "--", "true"}, exitUsage, `relock elect: --wait must be positive: a campaign is not one attempt
Run 'relock help elect' for usage.
`},
		{[]string{"elect", "--grace", "-1s", "jobs", "--", "true"}, exitUsage, `relock elect: --grace cannot be negative
Run 'relock help elect' for usage.
`},
		{[]string{"elect", "--value", strings.Repeat("v", relock.MaxValueLen+1), "jobs", "--", "true"}, exitUsage, `relock elect: --value is 65537 bytes; the limit is 65536
Run 'relock help elect' for usage.
`},
		{[]string{"elect", "--redis", url, "jobs", "--", "relock-no-such-command"}, 127, `relock elect: exec: "relock-no-such-command": executable file not found in $PATH
`},
		{[]string{"elect", "--redis", down, "jobs", "--", "true"}, exitFailure, `relock elect: cannot reach redis://127.0.0.1:1: dial tcp 127.0.0.1:1: connect: connection refused
`},
	}
	for _, tt := range tests {
		name := strings.ReplaceAll(strings.Join(tt.args, " "), url, "URL")
		t.Run(name, func(t *testing.T) {
			r := relockCmd(t, tt.args...)
			stderr := strings.ReplaceAll(r.stderr, url, "URL")
			if r.code != tt.code || r.stdout != "" || stderr != tt.stderr {
				t.Errorf("exit %d, stdout %q, stderr\n%s\nwant exit %d, no stdout, stderr\n%s", r.code, r.stdout, stderr, tt.code, tt.stderr)
			}
		})
	}
}
