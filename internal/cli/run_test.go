package cli

import (
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"
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
		{"semaphore mode", []string{"-n", "3", "job", "--", "true"}, "not yet supported"},
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
