package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"time"

	"github.com/relock-go/relock"
)

var runCommand = &command{
	name:    "run",
	summary: "hold a lock while a command runs; stop the command if the lock is lost",
	run:     runRun,
}

const runAbout = `
Acquires the lock NAME, runs the command while holding it, and releases it
when the command exits. Without --lease the lock is kept alive by the
watchdog for as long as the command runs; with --lease it expires after
that time. If the lock is lost (it expired, was force-unlocked, or Redis
stopped confirming renewals in time), the command is sent SIGTERM, then
SIGKILL after --grace, and relock exits with code 4.

With -n N, relock holds one of N permits of the semaphore NAME instead of
the lock (a PermitSemaphore, so at most N commands run at once across all
machines). The semaphore is created with N permits if it does not exist;
an existing one keeps its count. A permit is kept alive and lost the same
way as a lock.

The command sees RELOCK_LOCK (the name) and RELOCK_TOKEN (the hold's
fencing token), or with -n RELOCK_PERMIT (the permit's id), in its
environment. relock exits with the command's exit code, 128+N if a signal
N ended it, 3 if the lock or a permit was not acquired within --wait, 127
if the command cannot be started. SIGTERM and SIGHUP sent to relock are
passed on to the command; SIGINT from a terminal already reaches it
directly.`

// optDuration is a duration flag that knows whether it was given.
type optDuration struct {
	d   time.Duration
	set bool
}

func (o *optDuration) String() string {
	if o == nil || !o.set {
		return ""
	}
	return o.d.String()
}

func (o *optDuration) Set(s string) error {
	d, err := time.ParseDuration(s)
	if err != nil {
		return err
	}
	if d < 0 {
		return errors.New("negative duration")
	}
	o.d, o.set = d, true
	return nil
}

func runRun(ctx context.Context, e *env, args []string) int {
	fs := newFlagSet(e, "run", "[flags] NAME [--] command [args...]", runAbout)
	rf := addRedisFlags(fs)
	var lease, wait optDuration
	fs.Var(&lease, "lease", "fixed lease: the lock expires after this `duration` even if the command still runs (default: kept alive by the watchdog)")
	fs.Var(&wait, "wait", "give up if the lock is not acquired within this `duration`; 0 makes one attempt (default: wait indefinitely)")
	grace := fs.Duration("grace", 10*time.Second, "time between SIGTERM and SIGKILL when the lock is lost")
	watchdog := fs.Duration("watchdog", relock.DefaultWatchdogTimeout, "watchdog timeout: how long the lock outlives relock if it dies")
	permits := fs.Int("n", 0, "hold one of `N` permits of the semaphore NAME instead of the lock")
	if code, done := parse(fs, args); done {
		return code
	}
	if *permits < 0 {
		return usageError(e, fs, "-n must be positive")
	}
	rest := fs.Args()
	if len(rest) == 0 {
		return usageError(e, fs, "missing lock NAME")
	}
	name, argv := rest[0], rest[1:]
	if len(argv) > 0 && argv[0] == "--" {
		argv = argv[1:]
	}
	if len(argv) == 0 {
		return usageError(e, fs, "missing the command to run")
	}
	if lease.set && lease.d <= 0 {
		return usageError(e, fs, "--lease must be positive")
	}
	if *grace < 0 {
		return usageError(e, fs, "--grace cannot be negative")
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	if cmd.Err != nil {
		fmt.Fprintf(e.stderr, "%s: %v\n", fs.Name(), cmd.Err)
		return 127
	}

	rdb, code := rf.open(ctx, e, fs)
	if rdb == nil {
		return code
	}
	defer rdb.Close()
	logger := slog.New(slog.NewTextHandler(e.stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	c, err := relock.New(rdb, relock.WithWatchdogTimeout(*watchdog), relock.WithLogger(logger))
	if err != nil {
		return fail(e, fs, err)
	}
	defer c.Close()

	var src source = lockSource{c.Mutex(name)}
	if *permits > 0 {
		ps := c.PermitSemaphore(name)
		if _, err := ps.TrySetPermits(ctx, *permits); err != nil {
			if errors.Is(err, relock.ErrInvalidName) {
				return usageError(e, fs, "%v", err)
			}
			return fail(e, fs, err)
		}
		src = permitSource{ps}
	}
	h, code := acquire(ctx, e, fs, src, name, lease, wait)
	if h == nil {
		return code
	}
	r := &runner{e: e, fs: fs, hold: h, grace: *grace}
	return r.run(ctx, cmd)
}

// hold is what a command runs under: a lock's Lease or a semaphore's
// Permit.
type hold interface {
	Done() <-chan struct{}
	Err() error
	release(ctx context.Context) error
	env() []string
	String() string // for messages: `lock "job" (token 3)`
}

// source takes a hold.
type source interface {
	try(ctx context.Context, opts []relock.LockOption) (hold, error)
	wait(ctx context.Context, opts []relock.LockOption) (hold, error)
	what() string // for messages: "lock", "a permit of"
}

type lockSource struct{ m *relock.Mutex }

func (s lockSource) try(ctx context.Context, opts []relock.LockOption) (hold, error) {
	return leaseHold(s.m.TryLock(ctx, opts...))
}

func (s lockSource) wait(ctx context.Context, opts []relock.LockOption) (hold, error) {
	return leaseHold(s.m.Lock(ctx, opts...))
}

func (lockSource) what() string { return "the lock" }

func leaseHold(l *relock.Lease, err error) (hold, error) {
	if err != nil {
		return nil, err
	}
	return heldLease{l}, nil
}

type heldLease struct{ *relock.Lease }

func (h heldLease) release(ctx context.Context) error { return h.Unlock(ctx) }

func (h heldLease) env() []string {
	return []string{"RELOCK_LOCK=" + h.Name(), "RELOCK_TOKEN=" + strconv.FormatUint(h.Token(), 10)}
}

func (h heldLease) String() string { return fmt.Sprintf("lock %q (token %d)", h.Name(), h.Token()) }

type permitSource struct{ ps *relock.PermitSemaphore }

func (s permitSource) try(ctx context.Context, opts []relock.LockOption) (hold, error) {
	return permitHold(s.ps.TryAcquire(ctx, opts...))
}

func (s permitSource) wait(ctx context.Context, opts []relock.LockOption) (hold, error) {
	return permitHold(s.ps.Acquire(ctx, opts...))
}

func (permitSource) what() string { return "a permit of semaphore" }

func permitHold(p *relock.Permit, err error) (hold, error) {
	if err != nil {
		return nil, err
	}
	return heldPermit{p}, nil
}

type heldPermit struct{ *relock.Permit }

func (h heldPermit) release(ctx context.Context) error { return h.Release(ctx) }

func (h heldPermit) env() []string {
	return []string{"RELOCK_LOCK=" + h.Name(), "RELOCK_PERMIT=" + h.ID()}
}

func (h heldPermit) String() string {
	return fmt.Sprintf("permit %s of semaphore %q", h.ID(), h.Name())
}

// acquire takes a hold from src as --lease and --wait say. It returns the
// hold, or nil and an exit code.
func acquire(ctx context.Context, e *env, fs *flag.FlagSet, src source, name string, lease, wait optDuration) (hold, int) {
	var opts []relock.LockOption
	if lease.set {
		opts = append(opts, relock.WithLease(lease.d))
	}
	var (
		h   hold
		err error
	)
	switch {
	case wait.set && wait.d == 0:
		h, err = src.try(ctx, opts)
	case wait.set:
		wctx, cancel := context.WithTimeout(ctx, wait.d)
		h, err = src.wait(wctx, opts)
		cancel()
		if err != nil && ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded) {
			err = fmt.Errorf("%w within %v", relock.ErrNotAcquired, wait.d)
		}
	default:
		h, err = src.wait(ctx, opts)
	}
	switch {
	case err == nil:
		return h, exitOK
	case errors.Is(err, relock.ErrNotAcquired):
		fmt.Fprintf(e.stderr, "%s: %s %q is not free: %v\n", fs.Name(), src.what(), name, err)
		return nil, exitNotAcquired
	case ctx.Err() != nil:
		fmt.Fprintf(e.stderr, "%s: gave up waiting for %s %q: %v\n", fs.Name(), src.what(), name, context.Cause(ctx))
		return nil, exitInterrupted
	case errors.Is(err, relock.ErrInvalidName):
		return nil, usageError(e, fs, "%v", err)
	default:
		return nil, fail(e, fs, err)
	}
}

// runner runs one command under a hold.
type runner struct {
	e     *env
	fs    *flag.FlagSet
	hold  hold
	grace time.Duration
}

func (r *runner) run(ctx context.Context, cmd *exec.Cmd) int {
	cmd.Stdin = r.e.stdin
	cmd.Stdout = r.e.stdout
	cmd.Stderr = r.e.stderr
	cmd.Env = append(os.Environ(), r.hold.env()...)
	if err := cmd.Start(); err != nil {
		r.unlock(true)
		fmt.Fprintf(r.e.stderr, "%s: %v\n", r.fs.Name(), err)
		return 127
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()

	signals := ctx.Done()
	for {
		select {
		case err := <-exited:
			if lerr := r.hold.Err(); errors.Is(lerr, relock.ErrLockLost) {
				fmt.Fprintf(r.e.stderr, "%s: %v was lost as the command ended: %v\n", r.fs.Name(), r.hold, lerr)
				r.unlock(false)
				return exitLost
			}
			r.unlock(true)
			return exitCode(err)
		case <-r.hold.Done():
			fmt.Fprintf(r.e.stderr, "%s: %v was lost: %v; stopping the command\n", r.fs.Name(), r.hold, r.hold.Err())
			r.stop(cmd, exited)
			r.unlock(false) // frees a hold that outlived its local deadline; owner-checked
			return exitLost
		case <-signals:
			signals = nil
			if s, ok := signalOf(ctx); ok && s != os.Interrupt {
				_ = cmd.Process.Signal(s)
			}
		}
	}
}

// stop ends the command: SIGTERM, then SIGKILL after the grace period.
func (r *runner) stop(cmd *exec.Cmd, exited <-chan error) {
	_ = cmd.Process.Signal(syscall.SIGTERM)
	t := time.NewTimer(r.grace)
	defer t.Stop()
	select {
	case <-exited:
		return
	case <-t.C:
	}
	fmt.Fprintf(r.e.stderr, "%s: the command outlived the %v grace period; killing it\n", r.fs.Name(), r.grace)
	_ = cmd.Process.Kill()
	<-exited
}

// unlock releases the hold, even if the command was interrupted. A hold
// already gone is reported only if reportGone.
func (r *runner) unlock(reportGone bool) {
	ctx, cancel := context.WithTimeout(context.Background(), connectTimeout)
	defer cancel()
	err := r.hold.release(ctx)
	if err != nil && (reportGone || !errors.Is(err, relock.ErrNotHeld)) {
		fmt.Fprintf(r.e.stderr, "%s: release %v: %v\n", r.fs.Name(), r.hold, err)
	}
}

// exitCode turns the outcome of cmd.Wait into relock's exit code.
func exitCode(err error) int {
	if err == nil {
		return exitOK
	}
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		return exitFailure
	}
	if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ee.ExitCode()
}
