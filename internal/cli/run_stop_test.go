package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/relock-go/relock"
)

// stubbornCommand is a shell that prints its pid, then a line for each
// SIGTERM and SIGINT it gets (on stdout, and on stderr where relock's own
// lines go too), and runs on until its third; then it exits with 7.
const stubbornCommand = `n=0
got() { n=$((n+1)); echo "got $1 $n"; echo "command got $1" >&2; [ $n -lt 3 ] || exit 7; }
trap 'got TERM' TERM
trap 'got INT' INT
echo $$
while :; do sleep 1 & wait $!; done`

// TestRunPassesOnEverySignal: every signal relock run receives while its
// command runs reaches the command, the second and third as the first;
// relock keeps the lock while the command ignores them, and exits with
// the command's code once it ends.
func TestRunPassesOnEverySignal(t *testing.T) {
	needCommand(t, "sh")
	srv, url := realServer(t)
	p := startRelock(t, "run", "--redis", url, "job", "--", "sh", "-c", stubbornCommand)
	p.childPID(t)
	for i, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGTERM} {
		p.signal(t, sig)
		if got, want := p.line(t), fmt.Sprintf("got TERM %d", i+1); got != want {
			t.Fatalf("the command printed %q, want %q", got, want)
		}
	}
	_, err := realClient(t, srv).Mutex("job").TryLock(context.Background())
	if !errors.Is(err, relock.ErrNotAcquired) {
		t.Fatalf("TryLock while the command runs on after two signals: %v, want ErrNotAcquired", err)
	}
	p.signal(t, syscall.SIGINT)
	if got := p.line(t); got != "got INT 3" {
		t.Fatalf("the command printed %q, want %q", got, "got INT 3")
	}
	if code := p.exitCode(t); code != 7 {
		t.Fatalf("exit %d, want the command's 7", code)
	}
}

// TestRunStopsCommandBeforeLockCanPass: a command that ignores SIGTERM,
// run under a lock whose renewals stop (the server is paused), is sent
// SIGTERM before the hold's local deadline and killed at it: it is dead
// before another Client can acquire the lock, not a grace period later.
func TestRunStopsCommandBeforeLockCanPass(t *testing.T) {
	needCommand(t, "sh")
	srv, url := realServer(t)
	p := startRelock(t, "run", "--redis", url, "--watchdog", "3s", "--grace", "20s", "job", "--", "sh", "-c", stubbornCommand)
	pid := p.childPID(t)
	if err := srv.Pause(); err != nil {
		t.Fatal(err)
	}
	waitForStderr(t, p, "was lost")
	if err := srv.Resume(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), processDeadline)
	defer cancel()
	l, err := realClient(t, srv).Mutex("job").Lock(ctx)
	if err != nil {
		t.Fatalf("another Client's Lock: %v", err)
	}
	defer l.Unlock(context.Background())
	if !ended(pid) {
		t.Errorf("the command still runs when another Client holds the lock")
	}
	out := p.stderr.String()
	term, lost := strings.Index(out, "command got TERM"), strings.Index(out, "was lost")
	if term < 0 || term > lost {
		t.Errorf("the command was not sent SIGTERM before the hold was lost:\n%s", out)
	}
	if code := p.exitCode(t); code != exitLost {
		t.Fatalf("exit %d, want %d", code, exitLost)
	}
}

// waitForStderr waits until relock's stderr holds want, and fails the
// test at the deadline.
func waitForStderr(t *testing.T, p *relockProcess, want string) {
	t.Helper()
	deadline := time.Now().Add(processDeadline)
	for !strings.Contains(p.stderr.String(), want) {
		if time.Now().After(deadline) {
			t.Fatalf("stderr lacks %q after %v:\n%s", want, processDeadline, p.stderr)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// ended reports whether pid has ended: no such process, or a zombie
// nobody reaped yet.
func ended(pid int) bool {
	if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
		return true
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	i := strings.LastIndexByte(string(stat), ')')
	return i > 0 && strings.HasPrefix(string(stat[i+1:]), " Z")
}
