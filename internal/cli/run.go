package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/layout"
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
that time. The command is stopped before the lock can pass to another
holder: if no renewal is confirmed by --grace before the hold's local
deadline (the moment it is lost unless a renewal comes; --grace is at most
a third of the lease), the command is sent SIGTERM; when the lock is lost
(at that deadline, or earlier if it was force-unlocked or Redis no longer
has it) the command is killed (SIGKILL) at once, and relock exits with
code 4.

With -n N, relock holds one of N permits of the semaphore NAME instead of
the lock (a PermitSemaphore, so at most N commands run at once across all
machines). The semaphore is created with N permits if it does not exist;
an existing one keeps its count. A permit is kept alive and lost the same
way as a lock.

The command sees RELOCK_LOCK (the name) and RELOCK_TOKEN (the hold's
fencing token), or with -n RELOCK_PERMIT (the permit's id), in its
environment. relock exits with the command's exit code, 128+N if a signal
N ended it, 3 if the lock or a permit was not acquired within --wait, 127
if the command cannot be started.

Flags may also follow NAME; "--" ends them, and what follows is the
command. SIGTERM, SIGHUP, SIGINT and SIGQUIT sent to relock end a wait for
the lock (exit 128+N) and are passed on to a running command, every one
of them, however many come; relock keeps the lock and waits for the
command however long it runs on: to end it, signal the command, or kill
relock (SIGKILL), which on Linux kills the command too. SIGINT and SIGQUIT
typed at a terminal, which reach the command directly, are not passed on
a second time. On Linux the command is killed (SIGKILL) if relock dies,
even by SIGKILL, so that it never runs on without the lock; the commands
it started itself are not. On other systems a relock killed by SIGKILL
leaves its command running until it ends.

A lock that is force-unlocked (relock unlock --force) passes to the next
holder at once: relock listens to the lock's release messages, asks Redis
whether its hold is still there, and kills the command: the next
holder's command may start before this one is killed, by about the time
a message and a round trip to Redis take.`

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
	grace := fs.Duration("grace", 10*time.Second, "send the command SIGTERM this long before the lock would be lost, at most a third of the lease; it is killed (SIGKILL) when the lock is lost")
	watchdog := fs.Duration("watchdog", relock.DefaultWatchdogTimeout, "watchdog timeout: how long the lock outlives relock if it dies")
	permits := fs.Int("n", 0, "hold one of `N` permits of the semaphore NAME instead of the lock")
	name, argv, code, done := parseRun(e, fs, args)
	if done {
		return code
	}
	if given(fs, "n") && *permits <= 0 { // a semaphore of no permits never admits
		return usageError(e, fs, "-n must be positive")
	}
	if lease.set && lease.d <= 0 {
		return usageError(e, fs, "--lease must be positive")
	}
	if *grace < 0 {
		return usageError(e, fs, "--grace cannot be negative")
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	if cmd.Err != nil {
		return cannotStart(e, fs, cmd.Err)
	}

	rdb, c, code := rf.openClient(ctx, e, fs, *watchdog)
	if c == nil {
		return code
	}
	defer rdb.Close()
	defer c.Close()

	var src source = lockSource{c.Mutex(name)}
	if *permits > 0 {
		if src, code = semaphoreSource(ctx, e, fs, c, rdb, name, *permits); src == nil {
			return code
		}
	}
	h, code := acquire(ctx, e, fs, src, name, lease, wait)
	if h == nil {
		return code
	}
	held := *watchdog
	if lease.set {
		held = lease.d
	}
	r := &runner{e: e, fs: fs, hold: h, grace: graceWithin(*grace, held)}
	if l, ok := h.(heldLease); ok {
		r.unwatch = watchRelease(ctx, rdb, l.Lease)
		defer r.unwatch()
	}
	return r.run(cmd)
}

// openClient connects to the Redis the flags name and makes a relock
// Client on it with the watchdog timeout, whose warnings go to stderr as
// the subcommand's own lines (see commandLogger). On
// failure it reports the error and returns the exit code, with nil
// clients. The caller closes the Client, then rdb.
func (f *redisFlags) openClient(ctx context.Context, e *env, fs *flag.FlagSet, watchdog time.Duration) (redis.UniversalClient, *relock.Client, int) {
	rdb, code := f.open(ctx, e, fs)
	if rdb == nil {
		return nil, nil, code
	}
	c, err := relock.New(rdb, relock.WithWatchdogTimeout(watchdog), relock.WithLogger(commandLogger(e.stderr, fs.Name())))
	if err != nil {
		rdb.Close()
		return nil, nil, fail(e, fs, err)
	}
	return rdb, c, exitOK
}

// cannotStart reports that the command cannot be started, and returns
// exitCannotStart.
func cannotStart(e *env, fs *flag.FlagSet, err error) int {
	fmt.Fprintf(e.stderr, "%s: %v\n", fs.Name(), err)
	return exitCannotStart
}

// semaphoreSource returns the source of the permits of the semaphore name
// for -n n: it creates the semaphore with n permits, or checks that the
// one that exists has n in all. On failure it reports the error and
// returns nil and the exit code.
func semaphoreSource(ctx context.Context, e *env, fs *flag.FlagSet, c *relock.Client, rdb redis.UniversalClient, name string, n int) (source, int) {
	ps := c.PermitSemaphore(name)
	set, err := ps.TrySetPermits(ctx, n)
	if err != nil {
		if errors.Is(err, relock.ErrInvalidName) {
			return nil, usageError(e, fs, "%v", err)
		}
		return nil, fail(e, fs, err)
	}
	if !set {
		total, err := permitTotal(ctx, rdb, name)
		if err != nil {
			return nil, fail(e, fs, err)
		}
		if total != int64(n) {
			fmt.Fprintf(e.stderr, "%s: semaphore %q exists with %d permits, not %d: -n does not change an existing semaphore's count\n",
				fs.Name(), name, total, n)
			return nil, exitFailure
		}
	}
	return permitSource{ps}, exitOK
}

// parseRun parses relock run's arguments: flags, NAME, more flags, an
// optional "--", and the command. It returns done=true with the exit code
// when the caller should return at once.
func parseRun(e *env, fs *flag.FlagSet, args []string) (name string, argv []string, code int, done bool) {
	if code, done := parse(e, fs, args); done {
		return "", nil, code, true
	}
	rest := fs.Args()
	if endedByDashes(args, rest) || len(rest) == 0 {
		// "relock run -- echo hi": what follows "--" is the command.
		return "", nil, usageError(e, fs, "missing lock NAME before the command (relock run [flags] NAME [--] command)"), true
	}
	name = rest[0]
	if code, done := parse(e, fs, rest[1:]); done {
		return "", nil, code, true
	}
	if argv = fs.Args(); len(argv) == 0 {
		return "", nil, usageError(e, fs, "missing the command to run"), true
	}
	return name, argv, exitOK, false
}

// endedByDashes reports whether flag parsing of args, which left rest,
// stopped at a "--" (which the flag package drops).
func endedByDashes(args, rest []string) bool {
	i := len(args) - len(rest) - 1
	return i >= 0 && args[i] == "--"
}

// permitTotal returns how many permits the semaphore name has in all:
// free plus held, read in one transaction.
func permitTotal(ctx context.Context, rdb redis.UniversalClient, name string) (int64, error) {
	var free *redis.StringCmd
	var held *redis.IntCmd
	_, err := rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		free = p.Get(ctx, name)
		held = p.ZCard(ctx, layout.PermitTimeouts(name))
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return 0, err
	}
	n, _ := strconv.ParseInt(free.Val(), 10, 64)
	return n + held.Val(), nil
}

// hold is what a command runs under: a lock's Lease or a semaphore's
// Permit.
type hold interface {
	Done() <-chan struct{}
	Err() error
	release(ctx context.Context) error
	env() []string
	String() string // for messages: `lock "job" (token 3)`
	// Deadline is the hold's local deadline: it is lost then unless a
	// renewal is confirmed before.
	Deadline() time.Time
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
		fmt.Fprintf(e.stderr, "%s: %s %q is not free: %s\n", fs.Name(), src.what(), name, plain(err))
		return nil, exitNotAcquired
	case ctx.Err() != nil:
		fmt.Fprintf(e.stderr, "%s: gave up waiting for %s %q: %v\n", fs.Name(), src.what(), name, context.Cause(ctx))
		if s, ok := signalOf(ctx); ok {
			return nil, signalExit(s)
		}
		return nil, exitInterrupted
	case errors.Is(err, relock.ErrInvalidName):
		return nil, usageError(e, fs, "%v", err)
	default:
		return nil, fail(e, fs, err)
	}
}

// runner runs one command under a hold.
type runner struct {
	e    *env
	fs   *flag.FlagSet
	hold hold
	// grace is how long before the hold's local deadline the command is
	// sent SIGTERM; see graceWithin.
	grace time.Duration
	// unwatch stops watchRelease, if it runs: before the release, whose
	// own message must not be taken for a force-unlock.
	unwatch func()
}

// graceWithin returns the grace period to use with a hold renewed to (or
// fixed at) lease: grace, but at most a third of the lease. A watchdog
// renews a hold every third of its lease, so a longer grace would have a
// healthy hold's command sent SIGTERM between two renewals.
func graceWithin(grace, lease time.Duration) time.Duration {
	return min(grace, lease/3)
}

// run runs cmd under the hold and returns relock's exit code. Every
// signal relock receives is passed on to the command, which keeps the
// hold for as long as it runs. When the hold nears its local deadline
// with no renewal confirmed, the command is sent SIGTERM, grace before
// the deadline; when the hold is lost, at its deadline or before (a
// force-unlock), the command is killed at once: from then on the lock
// may pass to another holder.
func (r *runner) run(cmd *exec.Cmd) int {
	cmd.Stdin = r.e.stdin
	cmd.Stdout = r.e.stdout
	cmd.Stderr = r.e.stderr
	cmd.Env = append(os.Environ(), r.hold.env()...)
	cmd.SysProcAttr = childAttr()
	exited, err := start(cmd)
	if err != nil {
		r.unlock(true)
		return cannotStart(r.e, r.fs, err)
	}

	due := time.NewTimer(time.Until(r.hold.Deadline()) - r.grace)
	defer due.Stop()
	termed := false
	for {
		select {
		case err := <-exited:
			if lerr := r.hold.Err(); errors.Is(lerr, relock.ErrLockLost) {
				fmt.Fprintf(r.e.stderr, "%s: %v was lost as the command ended: %s\n", r.fs.Name(), r.hold, lossCause(r.hold))
				r.unlock(false)
				return exitLost
			}
			r.unlock(true)
			if termed { // stopped for the lock: its own code would hide why
				how := "exit status 0"
				if err != nil {
					how = err.Error()
				}
				fmt.Fprintf(r.e.stderr, "%s: %v was about to be lost; the command ended after SIGTERM (%s)\n", r.fs.Name(), r.hold, how)
				return exitLost
			}
			return exitCode(err)
		case <-r.hold.Done():
			_ = cmd.Process.Kill()
			<-exited
			fmt.Fprintf(r.e.stderr, "%s: %v was lost: %s; killed the command\n", r.fs.Name(), r.hold, lossCause(r.hold))
			r.unlock(false) // frees a hold that outlived its local deadline; owner-checked
			return exitLost
		case s := <-r.e.signals:
			if !(fromTerminal(s) && terminalReachesChild()) {
				_ = cmd.Process.Signal(s)
			}
		case <-due.C:
			if r.hold.Err() != nil {
				continue // ended: Done is closed
			}
			left := time.Until(r.hold.Deadline())
			if left > r.grace { // renewed since the timer was set
				due.Reset(left - r.grace)
				continue
			}
			if !termed {
				termed = true
				fmt.Fprintf(r.e.stderr, "%s: %v: %v left before its local deadline and no renewal confirmed; sending the command SIGTERM\n",
					r.fs.Name(), r.hold, left.Round(time.Millisecond))
				_ = cmd.Process.Signal(syscall.SIGTERM)
			}
			due.Reset(left) // Err judges the deadline when it comes
		}
	}
}

// lossCause says why the lost hold h was lost, for relock's message: the
// library logs its cause, which relock's own logger leaves out (see
// commandLogger), and the hold's deadline tells the two apart.
func lossCause(h hold) string {
	if !time.Now().Before(h.Deadline()) {
		return "no renewal was confirmed before its local deadline"
	}
	return "Redis no longer has it (deleted, force-unlocked or expired)"
}

// start starts cmd and returns the channel its Wait's result comes on.
// The goroutine that starts the command keeps its OS thread until the
// command ends: on Linux the parent-death signal (see childAttr) follows
// the thread that forked, not the process, and Go may end a thread that a
// goroutine left locked.
func start(cmd *exec.Cmd) (<-chan error, error) {
	started := make(chan error, 1)
	exited := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		exited <- cmd.Wait()
	}()
	if err := <-started; err != nil {
		return nil, err
	}
	return exited, nil
}

// fromTerminal reports whether a terminal's keys send sig to its
// foreground process group: SIGINT (^C) and SIGQUIT (^\).
func fromTerminal(sig os.Signal) bool {
	return sig == os.Interrupt || sig == syscall.SIGQUIT
}

// unlock releases the hold, even if the command was interrupted. A hold
// already gone is reported only if reportGone.
func (r *runner) unlock(reportGone bool) {
	if r.unwatch != nil {
		r.unwatch()
	}
	ctx, cancel := context.WithTimeout(context.Background(), connectTimeout)
	defer cancel()
	err := r.hold.release(ctx)
	if err != nil && (reportGone || !errors.Is(err, relock.ErrNotHeld)) {
		fmt.Fprintf(r.e.stderr, "%s: release %v: %s\n", r.fs.Name(), r.hold, plain(err))
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
