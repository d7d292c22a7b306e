package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
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
	if code, done := parse(e, fs, args); done {
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
	logger := warnLogger(e.stderr)
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
