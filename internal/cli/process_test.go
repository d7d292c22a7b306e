package cli

import (
	"bufio"
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/relock-go/relock/internal/layout"
	"github.com/relock-go/relock/internal/redistest"
)

// processDeadline bounds every wait of the process tests: a test that
// reaches it has failed.
const processDeadline = 30 * time.Second

// relockProcess is the relock binary running as a process of its own.
type relockProcess struct {
	cmd    *exec.Cmd
	stdout *bufio.Reader
	stderr stderrFile
	exited chan struct{}
	err    error // cmd.Wait's, once exited is closed
}

// stderrFile is where relock and its command write their stderr: a file,
// so that relock's exit does not wait for a command that outlives it to
// close a pipe.
type stderrFile string

func (f stderrFile) String() string {
	b, _ := os.ReadFile(string(f))
	return string(b)
}

// startRelock starts the relock binary with args, in a process group of
// its own: not the foreground group of any terminal the tests run in, so
// that the signals the tests send come "not from a terminal".
func startRelock(t *testing.T, args ...string) *relockProcess {
	t.Helper()
	cmd := exec.Command(relockBinary(t), args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Env = append(os.Environ(), envRedisURL+"=")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	errf, err := os.CreateTemp(t.TempDir(), "stderr")
	if err != nil {
		t.Fatal(err)
	}
	defer errf.Close()
	p := &relockProcess{cmd: cmd, stdout: bufio.NewReader(out), stderr: stderrFile(errf.Name()), exited: make(chan struct{})}
	cmd.Stderr = errf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	waited := make(chan struct{})
	go func() {
		defer close(waited)
		p.err = cmd.Wait()
		close(p.exited)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-waited
		t.Logf("relock %s: stderr:\n%s", strings.Join(args, " "), p.stderr)
	})
	return p
}

// line reads one line of relock's stdout (its command's), within the
// deadline.
func (p *relockProcess) line(t *testing.T) string {
	t.Helper()
	got := make(chan string, 1)
	go func() {
		s, _ := p.stdout.ReadString('\n')
		got <- strings.TrimSpace(s)
	}()
	select {
	case s := <-got:
		return s
	case <-time.After(processDeadline):
		t.Fatalf("no line on stdout within %v; stderr:\n%s", processDeadline, p.stderr)
		return ""
	}
}

// childPID reads the pid the command prints first.
func (p *relockProcess) childPID(t *testing.T) int {
	t.Helper()
	s := p.line(t)
	pid, err := strconv.Atoi(s)
	if err != nil {
		t.Fatalf("first line %q, want the command's pid; stderr:\n%s", s, p.stderr)
	}
	t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGKILL) })
	return pid
}

// exitCode waits for relock to exit and returns its exit code.
func (p *relockProcess) exitCode(t *testing.T) int {
	t.Helper()
	go func() { _, _ = io.Copy(io.Discard, p.stdout) }()
	select {
	case <-p.exited:
	case <-time.After(processDeadline):
		t.Fatalf("relock did not exit within %v; stderr:\n%s", processDeadline, p.stderr)
	}
	var ee *exec.ExitError
	if errors.As(p.err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return -int(ws.Signal())
		}
		return ee.ExitCode()
	}
	if p.err != nil {
		t.Fatal(p.err)
	}
	return 0
}

// signal sends sig to relock's process.
func (p *relockProcess) signal(t *testing.T, sig syscall.Signal) {
	t.Helper()
	if err := p.cmd.Process.Signal(sig); err != nil {
		t.Fatal(err)
	}
}

// processGone waits until pid has ended: no such process, or a zombie
// nobody reaped yet. It fails the test at the deadline.
func processGone(t *testing.T, pid int) {
	t.Helper()
	deadline := time.Now().Add(processDeadline)
	for !ended(pid) {
		if time.Now().After(deadline) {
			t.Fatalf("process %d still runs %v later", pid, processDeadline)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// holdingCommand is a command that prints its pid and runs until killed.
var holdingCommand = []string{"sh", "-c", "echo $$; exec sleep 600"}

// TestRunKilledTakesCommandAlong: relock run killed by SIGKILL does not
// leave its command running after it, while the lock it held expires and
// another relock run may start the same command.
func TestRunKilledTakesCommandAlong(t *testing.T) {
	needCommand(t, "sh")
	_, url := realServer(t)
	p := startRelock(t, append([]string{"run", "--redis", url, "job", "--"}, holdingCommand...)...)
	pid := p.childPID(t)
	p.signal(t, syscall.SIGKILL)
	if code := p.exitCode(t); code != -int(syscall.SIGKILL) {
		t.Fatalf("relock ended with %d, want killed by SIGKILL", code)
	}
	processGone(t, pid)
}

// TestRunSignals: a signal sent to relock's pid (not typed at a terminal)
// while it waits for the lock ends it with 128+N; while the command runs,
// it is passed on to the command, whose end relock waits for and reports
// as 128+N. SIGQUIT neither dumps relock's stacks nor leaves the command
// behind.
func TestRunSignals(t *testing.T) {
	needCommand(t, "sh")
	srv, url := realServer(t)
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP, syscall.SIGQUIT} {
		t.Run(sig.String()+" while waiting", func(t *testing.T) {
			name := "waiting:" + strconv.Itoa(int(sig))
			lock(t, realClient(t, srv), name)
			p := startRelock(t, "run", "--redis", url, name, "--", "echo", "ran")
			waitForQueued(t, srv, name)
			p.signal(t, sig)
			if code := p.exitCode(t); code != 128+int(sig) {
				t.Fatalf("exit %d, want %d", code, 128+int(sig))
			}
		})
		t.Run(sig.String()+" while running", func(t *testing.T) {
			p := startRelock(t, append([]string{"run", "--redis", url, "running:" + strconv.Itoa(int(sig)), "--"}, holdingCommand...)...)
			pid := p.childPID(t)
			p.signal(t, sig)
			if code := p.exitCode(t); code != 128+int(sig) {
				t.Fatalf("exit %d, want %d", code, 128+int(sig))
			}
			processGone(t, pid)
			if strings.Contains(p.stderr.String(), "goroutine ") {
				t.Errorf("relock dumped its stacks")
			}
		})
	}
}

// waitForQueued waits until a call waits for the Mutex name on srv, in
// the lock's queue and listening on a grant channel: relock is waiting
// for the lock.
func waitForQueued(t *testing.T, srv *redistest.Server, name string) {
	t.Helper()
	rdb := srv.Client()
	defer rdb.Close()
	ctx, cancel := context.WithTimeout(context.Background(), processDeadline)
	defer cancel()
	queue := layout.Companion(layout.LockQueue, name)
	for {
		n, err := rdb.ZCard(ctx, queue).Result()
		if err != nil {
			t.Fatalf("nobody queued in %s: %v", queue, err)
		}
		if n > 0 && len(rdb.PubSubChannels(ctx, layout.Pattern(layout.GrantChannel)).Val()) > 0 {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestRunStopsCommandOnForceUnlock: a force-unlock reaches a running relock
// run at once, not at the watchdog's next renewal (here minutes away): its
// command is stopped and relock exits 4.
func TestRunStopsCommandOnForceUnlock(t *testing.T) {
	needCommand(t, "sh")
	_, url := realServer(t)
	p := startRelock(t, append([]string{"run", "--redis", url, "--watchdog", "10m", "job", "--"}, holdingCommand...)...)
	pid := p.childPID(t)
	r := relockCmd(t, "unlock", "--force", "--redis", url, "job")
	if r.code != exitOK || !strings.Contains(r.stdout, "force-unlocked") {
		t.Fatalf("unlock --force: exit %d, stdout %q", r.code, r.stdout)
	}
	if code := p.exitCode(t); code != exitLost {
		t.Fatalf("exit %d, want %d", code, exitLost)
	}
	processGone(t, pid)
	if !strings.Contains(p.stderr.String(), "was lost") {
		t.Errorf("stderr does not say the lock was lost")
	}
}

// TestRunQuietWhenRedisIsDown: go-redis's own log lines do not reach
// relock's stderr, which its command shares, when Redis is unreachable at
// the start or goes away while the command runs.
func TestRunQuietWhenRedisIsDown(t *testing.T) {
	needCommand(t, "sh")
	srv, url := realServer(t)
	p := startRelock(t, append([]string{"run", "--redis", url, "--watchdog", "3s", "job", "--"}, holdingCommand...)...)
	pid := p.childPID(t)
	if err := srv.Kill(); err != nil {
		t.Fatal(err)
	}
	if code := p.exitCode(t); code != exitLost {
		t.Fatalf("exit %d, want %d", code, exitLost)
	}
	processGone(t, pid)

	down := startRelock(t, "run", "--redis", url, "job", "--", "true")
	if code := down.exitCode(t); code != exitFailure {
		t.Fatalf("with Redis down: exit %d, want %d", code, exitFailure)
	}
	for _, out := range []string{p.stderr.String(), down.stderr.String()} {
		if strings.Contains(out, "redis: ") || strings.Contains(out, "pool.go") {
			t.Errorf("go-redis's log lines reached stderr:\n%s", out)
		}
	}
	if !strings.Contains(down.stderr.String(), "cannot reach") {
		t.Errorf("stderr %q does not say Redis cannot be reached", down.stderr)
	}
}
