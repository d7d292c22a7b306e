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

The command sees RELOCK_LOCK (the name) and RELOCK_TOKEN (the hold's
fencing token) in its environment. relock exits with the command's exit
code, 128+N if a signal N ended it, 3 if the lock was not acquired within
--wait, 127 if the command cannot be started. SIGTERM and SIGHUP sent to
relock are passed on to the command; SIGINT from a terminal already
reaches it directly.`

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
	permits := fs.Int("n", 0, "hold one of `N` semaphore permits instead of a lock (not yet supported)")
	if code, done := parse(fs, args); done {
		return code
	}
	if *permits != 0 {
		return usageError(e, fs, "-n (semaphore mode) is not yet supported")
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

	l, code := acquire(ctx, e, fs, c.Mutex(name), lease, wait)
	if l == nil {
		return code
	}
	r := &runner{e: e, fs: fs, name: name, lease: l, grace: *grace}
	return r.run(ctx, cmd)
}

// acquire takes the lock as --lease and --wait say. It returns the lease,
// or nil and an exit code.
func acquire(ctx context.Context, e *env, fs *flag.FlagSet, m *relock.Mutex, lease, wait optDuration) (*relock.Lease, int) {
	var opts []relock.LockOption
	if lease.set {
		opts = append(opts, relock.WithLease(lease.d))
	}
	var (
		l   *relock.Lease
		err error
	)
	switch {
	case wait.set && wait.d == 0:
		l, err = m.TryLock(ctx, opts...)
	case wait.set:
		wctx, cancel := context.WithTimeout(ctx, wait.d)
		l, err = m.Lock(wctx, opts...)
		cancel()
		if err != nil && ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded) {
			err = fmt.Errorf("%w within %v", relock.ErrNotAcquired, wait.d)
		}
	default:
		l, err = m.Lock(ctx, opts...)
	}
	switch {
	case err == nil:
		return l, exitOK
	case errors.Is(err, relock.ErrNotAcquired):
		fmt.Fprintf(e.stderr, "%s: %q is held by another owner: %v\n", fs.Name(), m.Name(), err)
		return nil, exitNotAcquired
	case ctx.Err() != nil:
		fmt.Fprintf(e.stderr, "%s: gave up waiting for %q: %v\n", fs.Name(), m.Name(), context.Cause(ctx))
		return nil, exitInterrupted
	case errors.Is(err, relock.ErrInvalidName):
		return nil, usageError(e, fs, "%v", err)
	default:
		return nil, fail(e, fs, err)
	}
}

// runner runs one command under a held lock.
type runner struct {
	e     *env
	fs    *flag.FlagSet
	name  string
	lease *relock.Lease
	grace time.Duration
}

func (r *runner) run(ctx context.Context, cmd *exec.Cmd) int {
	cmd.Stdin = r.e.stdin
	cmd.Stdout = r.e.stdout
	cmd.Stderr = r.e.stderr
	cmd.Env = append(os.Environ(),
		"RELOCK_LOCK="+r.name,
		"RELOCK_TOKEN="+strconv.FormatUint(r.lease.Token(), 10))
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
			if lerr := r.lease.Err(); errors.Is(lerr, relock.ErrLockLost) {
				fmt.Fprintf(r.e.stderr, "%s: lock %q was lost (token %d) as the command ended: %v\n",
					r.fs.Name(), r.name, r.lease.Token(), lerr)
				r.unlock(false)
				return exitLost
			}
			r.unlock(true)
			return exitCode(err)
		case <-r.lease.Done():
			fmt.Fprintf(r.e.stderr, "%s: lock %q was lost (token %d): %v; stopping the command\n",
				r.fs.Name(), r.name, r.lease.Token(), r.lease.Err())
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

// unlock releases the lock, even if the command was interrupted. A hold
// already gone is reported only if reportGone.
func (r *runner) unlock(reportGone bool) {
	ctx, cancel := context.WithTimeout(context.Background(), connectTimeout)
	defer cancel()
	err := r.lease.Unlock(ctx)
	if err != nil && (reportGone || !errors.Is(err, relock.ErrNotHeld)) {
		fmt.Fprintf(r.e.stderr, "%s: unlock %q: %v\n", r.fs.Name(), r.name, err)
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
