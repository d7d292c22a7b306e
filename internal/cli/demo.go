package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/history"
)

var demoCommand = &command{
	name:    "demo",
	summary: "workers on several clients contend for locks; every hold is checked",
	run:     runDemo,
}

const demoAbout = `
Starts several relock clients, each on its own Redis connection pool, and
workers spread over them that contend for a few locks. Every hold is
recorded with its fencing token and checked: no two holds of one lock may
overlap, tokens must grow, and a counter that the workers update without
any other synchronisation must come out exact. Then short scenes show,
and check, what else relock does: the watchdog keeping a hold four leases
long alive, a holder cut off from Redis told it lost the lock before
another client gets it, a store refusing that holder's stale fencing
token, and an elected leader that dies replaced by the next campaigner
with a greater term (--scenes=false skips them). The last line of the output is
the verdict; the exit code is 1 if mutual exclusion was violated or a
scene failed.

Without --redis or $` + envRedisURL + ` the demo runs on an embedded,
in-process Redis (miniredis). On a real server it uses the lock names
<prefix>:0, <prefix>:1, ... and leaves their fencing counters behind.`

// demoConfig is the demo's flags.
type demoConfig struct {
	clients      int
	workers      int
	locks        int
	acquisitions int
	duration     time.Duration
	hold         time.Duration
	prefix       string
	watchdog     time.Duration
	every        time.Duration // progress interval; 0 picks by terminal
	scenes       bool          // show the watchdog, the lost-lock signal, fencing and an election after the run
}

func runDemo(ctx context.Context, e *env, args []string) int {
	fs := newFlagSet(e, "demo", "[flags]", demoAbout)
	rf := addRedisFlags(fs)
	cfg := addDemoFlags(fs)
	if code, done := parse(fs, args); done {
		return code
	}
	if fs.NArg() > 0 {
		return usageError(e, fs, "unexpected argument %q", fs.Arg(0))
	}
	if msg := cfg.invalid(); msg != "" {
		return usageError(e, fs, "%s", msg)
	}
	if cfg.every <= 0 {
		cfg.every = time.Second
		if isTerminal(e.stderr) {
			cfg.every = 200 * time.Millisecond
		}
	}

	t, err := rf.resolve(e, "")
	if err != nil {
		return usageError(e, fs, "%v", err)
	}
	var mr *miniredis.Miniredis
	if t == nil {
		if t, mr, err = startEmbedded(e); err != nil {
			return fail(e, fs, err)
		}
		defer mr.Close()
	} else {
		fmt.Fprintf(e.stderr, "relock demo: running on %s\n", t)
	}

	d, err := newDemo(ctx, e, t, *cfg)
	if err != nil {
		return fail(e, fs, err)
	}
	d.target, d.mr = t, mr
	defer d.close()
	return d.run(ctx)
}

// addDemoFlags defines the demo's own flags on fs, which set the config
// it returns.
func addDemoFlags(fs *flag.FlagSet) *demoConfig {
	var cfg demoConfig
	fs.IntVar(&cfg.clients, "clients", 2, "relock clients, each with its own connection pool")
	fs.IntVar(&cfg.workers, "workers", 8, "workers, spread over the clients")
	fs.IntVar(&cfg.locks, "locks", 3, "lock names the workers contend for")
	fs.IntVar(&cfg.acquisitions, "acquisitions", 4000, "stop after this many acquisitions in all (0: no limit, needs --duration)")
	fs.DurationVar(&cfg.duration, "duration", 0, "stop after this long (0: no limit); with --acquisitions, whichever comes first")
	fs.DurationVar(&cfg.hold, "hold", 0, "time each worker sleeps inside the critical section")
	fs.StringVar(&cfg.prefix, "prefix", "relock-demo", "prefix of the lock names")
	fs.DurationVar(&cfg.watchdog, "watchdog", relock.DefaultWatchdogTimeout, "the clients' watchdog timeout")
	fs.DurationVar(&cfg.every, "progress", 0, "progress interval (default 200ms on a terminal, else 1s)")
	fs.BoolVar(&cfg.scenes, "scenes", true, "after the run, show the watchdog, the lost-lock signal, fencing tokens and a leader's failover at work (about 5s)")
	return &cfg
}

// invalid says what is wrong with the flags, or returns "".
func (cfg *demoConfig) invalid() string {
	switch {
	case cfg.clients < 1:
		return "--clients must be at least 1"
	case cfg.workers < 1:
		return "--workers must be at least 1"
	case cfg.locks < 1:
		return "--locks must be at least 1"
	case cfg.acquisitions < 0 || cfg.duration < 0 || cfg.hold < 0:
		return "--acquisitions, --duration and --hold cannot be negative"
	case cfg.acquisitions == 0 && cfg.duration == 0:
		return "give --acquisitions or --duration a limit"
	case cfg.prefix == "":
		return "--prefix cannot be empty"
	}
	return ""
}

// startEmbedded starts the in-process Redis the demo runs on when it is
// given none, says so on stderr, and returns it with its target. The
// caller closes it.
func startEmbedded(e *env) (*target, *miniredis.Miniredis, error) {
	mr, err := miniredis.Run()
	if err != nil {
		return nil, nil, fmt.Errorf("cannot start the embedded Redis: %w", err)
	}
	fmt.Fprintf(e.stderr, "relock demo: no --redis and no $%s: running on an embedded in-process Redis (miniredis) at %s\n", envRedisURL, mr.Addr())
	t, err := parseTarget("redis://"+mr.Addr(), false)
	if err != nil {
		mr.Close()
		return nil, nil, err
	}
	return t, mr, nil
}

// demo is one run of the demo.
type demo struct {
	e       *env
	cfg     demoConfig
	target  *target
	mr      *miniredis.Miniredis // the embedded Redis, or nil
	rdbs    []redis.UniversalClient
	clients []*relock.Client
	locks   []*demoLock
	rec     *history.Recorder

	claimed  atomic.Int64 // acquisitions claimed by workers, for the limit
	acquired atomic.Int64 // acquisitions made
	lost     atomic.Int64 // holds that were lost before their unlock

	errOnce sync.Once
	err     error // the first worker error
}

// demoLock is one contended lock and the state its holders share.
type demoLock struct {
	name     string
	mutexes  []*relock.Mutex // one per client
	acquired atomic.Int64
	inside   atomic.Int32 // workers inside the critical section
	crowded  atomic.Int64 // times a worker found another inside
	value    int64        // updated by holders with no synchronisation but the lock
}

func newDemo(ctx context.Context, e *env, t *target, cfg demoConfig) (*demo, error) {
	d := &demo{e: e, cfg: cfg, rec: history.New()}
	logger := slog.New(slog.NewTextHandler(e.stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	for range cfg.clients {
		rdb, err := t.connect(ctx)
		if err != nil {
			d.close()
			return nil, err
		}
		d.rdbs = append(d.rdbs, rdb)
		c, err := relock.New(rdb, relock.WithWatchdogTimeout(cfg.watchdog), relock.WithLogger(logger))
		if err != nil {
			d.close()
			return nil, err
		}
		d.clients = append(d.clients, c)
	}
	for i := range cfg.locks {
		l := &demoLock{name: fmt.Sprintf("%s:%d", cfg.prefix, i)}
		for _, c := range d.clients {
			l.mutexes = append(l.mutexes, c.Mutex(l.name))
		}
		d.locks = append(d.locks, l)
	}
	return d, nil
}

func (d *demo) close() {
	for _, c := range d.clients {
		c.Close()
	}
	for _, rdb := range d.rdbs {
		rdb.Close()
	}
}

func (d *demo) fail(err error) {
	d.errOnce.Do(func() { d.err = err })
}

func (d *demo) run(ctx context.Context) int {
	cfg := d.cfg
	names := make([]string, len(d.locks))
	for i, l := range d.locks {
		names[i] = l.name
	}
	limit := "no acquisition limit"
	if cfg.acquisitions > 0 {
		limit = fmt.Sprintf("%d acquisitions", cfg.acquisitions)
	}
	if cfg.duration > 0 {
		limit += fmt.Sprintf(", at most %v", cfg.duration)
	}
	fmt.Fprintf(d.e.stderr, "relock demo: %d clients, %d workers, %d locks (%s), %s\n",
		cfg.clients, cfg.workers, cfg.locks, strings.Join(names, " "), limit)

	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	if cfg.duration > 0 {
		var stop context.CancelFunc
		runCtx, stop = context.WithTimeout(runCtx, cfg.duration)
		defer stop()
	}
	start := time.Now()
	p := startProgress(d.e.stderr, isTerminal(d.e.stderr), cfg.every, d.snapshot)
	var wg sync.WaitGroup
	for w := range cfg.workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := d.work(runCtx, w); err != nil {
				d.fail(err)
				cancel()
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	p.stop()
	return d.report(ctx, elapsed)
}

// work is one worker's loop: lock a random lock, check and update its
// shared state, unlock.
func (d *demo) work(ctx context.Context, w int) error {
	who := fmt.Sprintf("worker %d (client %d)", w, w%len(d.clients))
	client := w % len(d.clients)
	for {
		if d.cfg.acquisitions > 0 && d.claimed.Add(1) > int64(d.cfg.acquisitions) {
			return nil
		}
		if ctx.Err() != nil {
			return nil
		}
		dl := d.locks[rand.IntN(len(d.locks))]
		lease, err := dl.mutexes[client].Lock(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("%s: %w", who, err)
		}
		h := d.rec.Begin(who, dl.name, lease.Token())
		dl.critical(d.cfg.hold)
		dl.acquired.Add(1)
		d.acquired.Add(1)
		if lease.Err() != nil {
			h.Lost()
			d.lost.Add(1)
		} else {
			h.End()
		}
		uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), connectTimeout)
		err = lease.Unlock(uctx)
		cancel()
		if err != nil && !errors.Is(err, relock.ErrNotHeld) {
			return fmt.Errorf("%s: %w", who, err)
		}
	}
}

// critical is the protected section: it reads the shared value, lets
// other goroutines run, and writes it back incremented. Without mutual
// exclusion, updates get lost; inside counts the workers in here at once.
func (l *demoLock) critical(hold time.Duration) {
	if l.inside.Add(1) != 1 {
		l.crowded.Add(1)
	}
	v := l.value
	runtime.Gosched()
	if hold > 0 {
		time.Sleep(hold)
	}
	l.value = v + 1
	l.inside.Add(-1)
}

func (d *demo) snapshot() progressSnapshot {
	s := progressSnapshot{total: d.acquired.Load(), limit: int64(d.cfg.acquisitions)}
	for _, l := range d.locks {
		s.perLock = append(s.perLock, l.acquired.Load())
	}
	return s
}

// demoOutcome is what the report found of a run.
type demoOutcome struct {
	acquired    int64 // acquisitions made
	mismatches  int64 // updates the shared counters lost
	crowded     int64 // times a worker found another inside the critical section
	violations  []history.Violation
	sceneFailed bool
	interrupted bool
}

// report prints the table, the scenes, what went wrong and the verdict,
// and returns the exit code.
func (d *demo) report(ctx context.Context, elapsed time.Duration) int {
	sum := d.rec.Summary()
	o := d.printTable(sum)
	d.printRate(o.acquired, elapsed)
	if d.cfg.scenes && ctx.Err() == nil && d.err == nil {
		o.sceneFailed = d.printScenes(ctx)
	}
	o.violations = d.rec.Check()
	d.printViolations(o)
	o.interrupted = ctx.Err() != nil
	if o.interrupted {
		fmt.Fprintf(d.e.stdout, "interrupted after %d acquisitions\n", o.acquired)
	}
	d.printError(o)
	return d.verdict(o, sum)
}

// printTable prints a line per lock: its acquisitions, the last fencing
// token handed out, and its shared counter, marked when it lost updates.
// It returns the totals over the locks.
func (d *demo) printTable(sum history.Summary) demoOutcome {
	out := d.e.stdout
	tokens := make(map[string]uint64, len(sum.Names))
	for _, ns := range sum.Names {
		tokens[ns.Name] = ns.LastToken
	}
	width := len("lock")
	for _, l := range d.locks {
		width = max(width, len(l.name))
	}
	var o demoOutcome
	fmt.Fprintf(out, "%-*s  %12s  %10s  %10s\n", width, "lock", "acquisitions", "last token", "counter")
	for _, l := range d.locks {
		n := l.acquired.Load()
		o.acquired += n
		o.crowded += l.crowded.Load()
		mark := ""
		if l.value != n {
			o.mismatches += n - l.value
			mark = "  (lost updates)"
		}
		fmt.Fprintf(out, "%-*s  %12d  %10d  %10d%s\n", width, l.name, n, tokens[l.name], l.value, mark)
	}
	return o
}

// printRate prints the acquisitions per second and how often lock calls
// waited and were woken, and warns of holds lost before their unlock.
func (d *demo) printRate(acquired int64, elapsed time.Duration) {
	var waits, wakeups uint64
	for _, c := range d.clients {
		st := c.Stats()
		waits += st.Waits
		wakeups += st.Wakeups
	}
	rate := float64(acquired) / max(elapsed.Seconds(), 1e-9)
	fmt.Fprintf(d.e.stdout, "\n%d clients, %d workers: %d acquisitions in %v (%.0f/s); %d lock calls waited, %d release messages woke a waiter\n",
		len(d.clients), d.cfg.workers, acquired, elapsed.Round(time.Millisecond), rate, waits, wakeups)
	if n := d.lost.Load(); n > 0 {
		fmt.Fprintf(d.e.stdout, "warning: %d holds were lost before their unlock\n", n)
	}
}

// printScenes runs the scenes, printing a line for each that failed, and
// reports whether one did.
func (d *demo) printScenes(ctx context.Context) (failed bool) {
	for _, f := range d.scenes(ctx, d.target, d.mr) {
		fmt.Fprintf(d.e.stdout, "scene failed: %s\n", f)
		failed = true
	}
	fmt.Fprintln(d.e.stdout)
	return failed
}

// printViolations prints the first violations the history shows, and
// the critical sections found crowded and the counter updates lost.
func (d *demo) printViolations(o demoOutcome) {
	out := d.e.stdout
	const show = 10
	for i, v := range o.violations {
		if i == show {
			fmt.Fprintf(out, "... and %d more violations\n", len(o.violations)-show)
			break
		}
		fmt.Fprintf(out, "violation: %v\n", v)
	}
	if o.crowded > 0 {
		fmt.Fprintf(out, "violation: a worker found another inside the critical section %d times\n", o.crowded)
	}
	if o.mismatches != 0 {
		fmt.Fprintf(out, "violation: the shared counters lost %d updates\n", o.mismatches)
	}
}

// printError prints, on stderr, the first worker error, or else, for a
// run that stopped by itself short of its --acquisitions, the shortfall,
// which it records as the run's error.
func (d *demo) printError(o demoOutcome) {
	if d.err != nil {
		fmt.Fprintf(d.e.stderr, "relock demo: %s\n", plain(d.err))
	} else if !o.interrupted && d.cfg.acquisitions > 0 && d.cfg.duration == 0 && o.acquired != int64(d.cfg.acquisitions) {
		d.fail(fmt.Errorf("made %d acquisitions, want %d", o.acquired, d.cfg.acquisitions))
		fmt.Fprintf(d.e.stderr, "relock demo: %s\n", plain(d.err))
	}
}

// verdict prints the last line, whether mutual exclusion held, with the
// handoff percentiles of sum, and returns the exit code.
func (d *demo) verdict(o demoOutcome, sum history.Summary) int {
	out := d.e.stdout
	handoff := fmt.Sprintf("handoff p50 %s p99 %s", fmtDuration(sum.P50), fmtDuration(sum.P99))
	if len(o.violations) == 0 && o.crowded == 0 && o.mismatches == 0 {
		fmt.Fprintf(out, "mutual exclusion held: %d acquisitions, 0 overlaps, %s\n", o.acquired, handoff)
		switch {
		case d.err != nil, o.sceneFailed:
			return exitFailure
		case o.interrupted:
			return exitInterrupted
		}
		return exitOK
	}
	var overlaps, backwards int
	for _, v := range o.violations {
		switch v.Kind {
		case history.KindOverlap:
			overlaps++
		case history.KindTokenBackwards:
			backwards++
		}
	}
	parts := []string{fmt.Sprintf("%d acquisitions", o.acquired), fmt.Sprintf("%d overlaps", overlaps)}
	if backwards > 0 {
		parts = append(parts, fmt.Sprintf("%d tokens out of order", backwards))
	}
	if o.crowded > 0 {
		parts = append(parts, fmt.Sprintf("%d crowded critical sections", o.crowded))
	}
	if o.mismatches != 0 {
		parts = append(parts, fmt.Sprintf("%d lost counter updates", o.mismatches))
	}
	fmt.Fprintf(out, "mutual exclusion VIOLATED: %s, %s\n", strings.Join(parts, ", "), handoff)
	return exitFailure
}

// fmtDuration rounds d to two or three significant digits: 120µs, 2.1ms,
// 35ms, 1.25s.
func fmtDuration(d time.Duration) string {
	switch {
	case d < time.Microsecond:
		return d.String()
	case d < time.Millisecond:
		return d.Round(time.Microsecond).String()
	case d < 10*time.Millisecond:
		return d.Round(100 * time.Microsecond).String()
	case d < time.Second:
		return d.Round(time.Millisecond).String()
	default:
		return d.Round(10 * time.Millisecond).String()
	}
}
