package cli

import (
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/relock-go/relock"
)

func needCommand(t *testing.T, name string) {
	t.Helper()
	if _, err := exec.LookPath(name); err != nil {
		t.Fatalf("this test runs %q, which is not installed: %v", name, err)
	}
}

func TestRunPropagatesExitCode(t *testing.T) {
	needCommand(t, "true")
	needCommand(t, "false")
	needCommand(t, "sh")
	_, url := server(t)
	tests := []struct {
		name string
		argv []string
		code int
	}{
		{"true", []string{"true"}, 0},
		{"false", []string{"false"}, 1},
		{"exit 7", []string{"sh", "-c", "exit 7"}, 7},
		{"killed by a signal", []string{"sh", "-c", "kill -9 $$"}, 128 + 9},
		{"not found", []string{"relock-no-such-command"}, 127},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args := append([]string{"run", "--redis", url, "job", "--"}, tt.argv...)
			r := relockCmd(t, args...)
			if r.code != tt.code {
				t.Fatalf("exit %d, want %d", r.code, tt.code)
			}
		})
	}
}

func TestRunHoldsTheLock(t *testing.T) {
	needCommand(t, "sh")
	mr, url := server(t)
	r := relockCmd(t, "run", "--redis", url, "job", "sh", "-c", `echo "$RELOCK_LOCK $RELOCK_TOKEN"`)
	if r.code != exitOK || strings.TrimSpace(r.stdout) != "job 1" {
		t.Fatalf("exit %d, stdout %q; want 0 and %q", r.code, r.stdout, "job 1")
	}
	if mr.Exists("job") {
		t.Errorf("the lock is still held after the command ended")
	}
}

func TestRunNotAcquired(t *testing.T) {
	mr, url := server(t)
	lock(t, lockClient(t, mr), "job")
	tests := []struct {
		name string
		wait string
	}{
		{"one attempt", "0"},
		{"bounded wait", "100ms"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := relockCmd(t, "run", "--redis", url, "--wait", tt.wait, "job", "--", "true")
			if r.code != exitNotAcquired {
				t.Fatalf("exit %d, want %d", r.code, exitNotAcquired)
			}
		})
	}
}

func TestRunWaitsForTheLock(t *testing.T) {
	mr, url := server(t)
	l := lock(t, lockClient(t, mr), "job")
	go func() {
		time.Sleep(100 * time.Millisecond)
		l.Unlock(context.Background())
	}()
	r := relockCmd(t, "run", "--redis", url, "--wait", "10s", "job", "--", "true")
	if r.code != exitOK {
		t.Fatalf("exit %d, want 0", r.code)
	}
}

func TestRunStopsCommandWhenLockLost(t *testing.T) {
	needCommand(t, "sleep")
	_, url := server(t)
	start := time.Now()
	r := relockCmd(t, "run", "--redis", url, "--lease", "200ms", "--grace", "2s", "job", "--", "sleep", "30")
	if r.code != exitLost {
		t.Fatalf("exit %d, want %d", r.code, exitLost)
	}
	if !strings.Contains(r.stderr, "lost") {
		t.Errorf("stderr does not say the lock was lost")
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("took %v: the command was not stopped promptly", d)
	}
}

func TestRunUsage(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"negative permits", []string{"-n", "-1", "job", "--", "true"}, "-n must be positive"},
		{"no name", nil, "missing lock NAME"},
		{"no command", []string{"job", "--"}, "missing the command"},
		{"bad wait", []string{"--wait", "soon", "job", "true"}, "invalid value"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := relockCmd(t, append([]string{"run"}, tt.args...)...)
			if r.code != exitUsage {
				t.Fatalf("exit %d, want %d", r.code, exitUsage)
			}
			if !strings.Contains(r.stderr, tt.want) {
				t.Errorf("stderr lacks %q", tt.want)
			}
		})
	}
}

func TestRunSemaphoreHoldsAPermit(t *testing.T) {
	needCommand(t, "sh")
	mr, url := server(t)
	r := relockCmd(t, "run", "--redis", url, "-n", "2", "jobs", "--", "sh", "-c", `echo "$RELOCK_LOCK $RELOCK_PERMIT"`)
	if r.code != exitOK {
		t.Fatalf("exit %d, want 0; stderr %q", r.code, r.stderr)
	}
	fields := strings.Fields(r.stdout)
	if len(fields) != 2 || fields[0] != "jobs" || fields[1] == "" {
		t.Fatalf("stdout %q, want the semaphore's name and a permit id", r.stdout)
	}
	ps := lockClient(t, mr).PermitSemaphore("jobs")
	n, err := ps.Available(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if n != 2 {
		t.Fatalf("%d permits free after the command ended, want 2", n)
	}
}

func TestRunSemaphoreLimitsConcurrency(t *testing.T) {
	mr, url := server(t)
	ctx := context.Background()
	ps := lockClient(t, mr).PermitSemaphore("jobs")
	if _, err := ps.TrySetPermits(ctx, 2); err != nil {
		t.Fatal(err)
	}
	var held []*relock.Permit
	for range 2 {
		p, err := ps.TryAcquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, p)
	}
	// Both permits are taken: -n 2 finds none free.
	r := relockCmd(t, "run", "--redis", url, "-n", "2", "--wait", "0", "jobs", "--", "true")
	if r.code != exitNotAcquired {
		t.Fatalf("-n 2 with every permit taken: exit %d, want %d", r.code, exitNotAcquired)
	}
	if err := held[0].Release(ctx); err != nil {
		t.Fatal(err)
	}
	r = relockCmd(t, "run", "--redis", url, "-n", "2", "--wait", "0", "jobs", "--", "true")
	if r.code != exitOK {
		t.Fatalf("with a permit free: exit %d, want 0; stderr %q", r.code, r.stderr)
	}
}

// TestRunSemaphoreCountMismatch: -n 3 on an existing semaphore of 2
// permits (one of them held) fails and says so, rather than running under
// a count other than the one asked for.
func TestRunSemaphoreCountMismatch(t *testing.T) {
	mr, url := server(t)
	ctx := context.Background()
	ps := lockClient(t, mr).PermitSemaphore("jobs")
	if _, err := ps.TrySetPermits(ctx, 2); err != nil {
		t.Fatal(err)
	}
	p, err := ps.TryAcquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Release(ctx)
	r := relockCmd(t, "run", "--redis", url, "-n", "3", "jobs", "--", "echo", "ran")
	if r.code != exitFailure || strings.Contains(r.stdout, "ran") {
		t.Fatalf("exit %d, stdout %q; want %d and the command not run", r.code, r.stdout, exitFailure)
	}
	if !strings.Contains(r.stderr, "exists with 2 permits, not 3") {
		t.Errorf("stderr %q does not say the semaphore has 2 permits", r.stderr)
	}
	r = relockCmd(t, "run", "--redis", url, "-n", "2", "jobs", "--", "echo", "ran")
	if r.code != exitOK || strings.TrimSpace(r.stdout) != "ran" {
		t.Fatalf("-n 2: exit %d, stdout %q; want 0 and the command run", r.code, r.stdout)
	}
}

func TestRunSemaphoreStopsCommandWhenPermitLost(t *testing.T) {
	needCommand(t, "sleep")
	_, url := server(t)
	r := relockCmd(t, "run", "--redis", url, "-n", "1", "--lease", "200ms", "--grace", "2s", "jobs", "--", "sleep", "30")
	if r.code != exitLost {
		t.Fatalf("exit %d, want %d; stderr %q", r.code, exitLost, r.stderr)
	}
	if !strings.Contains(r.stderr, "permit") || !strings.Contains(r.stderr, "lost") {
		t.Errorf("stderr %q does not say the permit was lost", r.stderr)
	}
}

// TestRunArguments: flags may follow NAME; "--" ends them; without a NAME
// before "--", relock run says so instead of taking the command for it.
func TestRunArguments(t *testing.T) {
	needCommand(t, "sh")
	_, url := realServer(t)
	tests := []struct {
		name   string
		args   []string
		code   int
		stdout string
		stderr string
	}{
		{"flags after the name", []string{"job", "--wait", "1s", "--lease", "1m", "--", "sh", "-c", `echo "$RELOCK_LOCK"`}, exitOK, "job", ""},
		{"flags after the name, no dashes", []string{"job", "--wait", "1s", "sh", "-c", `echo "$RELOCK_LOCK"`}, exitOK, "job", ""},
		{"command flags stay the command's", []string{"job", "--", "sh", "-c", `echo "$1"`, "sh", "--wait"}, exitOK, "--wait", ""},
		{"no name before dashes", []string{"--", "echo", "hi"}, exitUsage, "", "missing lock NAME"},
		{"no name", []string{"--wait", "1s"}, exitUsage, "", "missing lock NAME"},
		{"no command", []string{"job", "--wait", "1s"}, exitUsage, "", "missing the command"},
		{"bad flag after the name", []string{"job", "--nonsense", "--", "true"}, exitUsage, "", "nonsense"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := relockCmd(t, append([]string{"run", "--redis", url}, tt.args...)...)
			if r.code != tt.code || strings.TrimSpace(r.stdout) != tt.stdout || !strings.Contains(r.stderr, tt.stderr) {
				t.Fatalf("exit %d, stdout %q, stderr %q; want %d, %q, stderr with %q", r.code, r.stdout, r.stderr, tt.code, tt.stdout, tt.stderr)
			}
		})
	}
}

// TestMessagesSayRelockOnce: an error from the library, whose messages
// nest "relock: " prefixes, is printed with the subcommand's name alone.
func TestMessagesSayRelockOnce(t *testing.T) {
	srv, url := realServer(t)
	if _, err := srv.Do(context.Background(), "SET", "str", "v"); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"run", "--redis", url, "str", "--", "true"},
		{"run", "--redis", url, "a{b", "--", "true"},
		{"unlock", "--force", "--redis", url, "str"},
	} {
		r := relockCmd(t, args...)
		if r.code == exitOK {
			t.Fatalf("relock %v succeeded", args)
		}
		if n := strings.Count(r.stderr, "relock"); n != 1+strings.Count(r.stderr, "relock help") {
			t.Errorf("relock %v: %q says relock %d times", args, r.stderr, n)
		}
	}
}
