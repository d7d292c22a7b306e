package cli

import (
	"bytes"
	"strings"
	"testing"
)

// TestHelpGoesToStdout: help asked for in any form, of relock or of any
// subcommand, is printed to stdout with exit 0; a bad flag's usage goes to
// stderr with exit 2.
func TestHelpGoesToStdout(t *testing.T) {
	type ask struct {
		args []string
		want string
	}
	asks := []ask{
		{[]string{"--help"}, "Commands:"},
		{[]string{"-h"}, "Commands:"},
		{[]string{"help"}, "Commands:"},
	}
	for _, c := range commands {
		want := "Usage: relock " + c.name
		asks = append(asks,
			ask{[]string{c.name, "--help"}, want},
			ask{[]string{c.name, "-h"}, want},
			ask{[]string{"help", c.name}, want},
		)
	}
	asks = append(asks, ask{[]string{"run", "job", "--help"}, "Usage: relock run"})
	for _, a := range asks {
		t.Run(strings.Join(a.args, " "), func(t *testing.T) {
			r := relockCmd(t, a.args...)
			if r.code != exitOK || !strings.Contains(r.stdout, a.want) || r.stderr != "" {
				t.Errorf("exit %d, %q on stdout: %v, %d bytes on stderr; want 0, on stdout, none", r.code, a.want, strings.Contains(r.stdout, a.want), len(r.stderr))
			}
		})
	}
	for _, c := range commands {
		t.Run(c.name+" --bogus", func(t *testing.T) {
			r := relockCmd(t, c.name, "--bogus")
			if r.code != exitUsage || r.stdout != "" || !strings.Contains(r.stderr, "Usage: relock "+c.name) {
				t.Errorf("exit %d, stdout %q, stderr %q; want 2, nothing, the usage", r.code, r.stdout, r.stderr)
			}
		})
	}
}

// TestRunRefusesNoPermits: -n 0 is refused as -n -1 is: a semaphore of no
// permits would never admit the command.
func TestRunRefusesNoPermits(t *testing.T) {
	for _, n := range []string{"0", "-1"} {
		r := relockCmd(t, "run", "-n", n, "jobs", "--", "true")
		if r.code != exitUsage || !strings.Contains(r.stderr, "-n must be positive") {
			t.Errorf("-n %s: exit %d, stderr %q; want %d and -n must be positive", n, r.code, r.stderr, exitUsage)
		}
	}
}

// TestRunLossIsOneLine: a lost lock is reported in one line of relock
// run's own, not beside a log record of the library's.
func TestRunLossIsOneLine(t *testing.T) {
	needCommand(t, "sh")
	_, url := realServer(t)
	r := relockCmd(t, "run", "--redis", url, "--lease", "300ms", "job", "--", "sh", "-c", stubbornCommand)
	if r.code != exitLost {
		t.Fatalf("exit %d, want %d", r.code, exitLost)
	}
	var lost []string
	for _, line := range strings.Split(r.stderr, "\n") {
		if strings.Contains(line, "lost") && !strings.Contains(line, "SIGTERM") {
			lost = append(lost, line)
		}
	}
	if len(lost) != 1 || !strings.HasPrefix(lost[0], "relock run: ") || strings.Contains(r.stderr, "level=") {
		t.Errorf("stderr reports the loss in %d lines, want one of relock run's own:\n%s", len(lost), r.stderr)
	}
}

// TestCommandLogger: the Client's warnings come out as the subcommand's
// own lines; the loss of a hold, which the subcommand reports, does not.
func TestCommandLogger(t *testing.T) {
	var b bytes.Buffer
	log := commandLogger(&b, "relock run")
	log.Warn("relock: renewal failed", "locks", 2, "err", "EOF")
	log.Info("relock: ignored below warn")
	log.Warn("relock: lock lost", "name", "job")
	log.With("name", "job").Error("relock: permit lost")
	log.With("name", "job").Warn("relock: cannot leave the queue")
	want := "relock run: renewal failed (locks=2, err=EOF)\nrelock run: cannot leave the queue (name=job)\n"
	if b.String() != want {
		t.Errorf("logged %q, want %q", b.String(), want)
	}
}
