package gocronlock_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/go-co-op/gocron/v2"
	"github.com/google/uuid"
	"github.com/jonboulle/clockwork"
	"github.com/redis/go-redis/v9"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/gocronlock"
)

// The schedulers of these tests run one job, "tick", every tickEvery from a
// boundary of tickEvery, each with a clock of its own, off by up to
// lateBy. testSkew covers that spread with room for timers that fire late
// on a loaded machine, and stays well below tickEvery.
const (
	tickEvery = 500 * time.Millisecond
	testSkew  = 250 * time.Millisecond
	lateBy    = 60 * time.Millisecond
	// testTicks is how many ticks in a row must each run once.
	testTicks = 8
	// within bounds every wait of these tests, only so that they do not hang.
	within = 30 * time.Second
)

// offsets are the clock offsets of the three schedulers: one early, one
// on time, one late.
var offsets = []time.Duration{-20 * time.Millisecond, 0, lateBy}

// tickOf returns the tick a run at t (by its scheduler's clock) belongs
// to: the number of the nearest boundary of tickEvery since the epoch.
func tickOf(t time.Time) int64 {
	return (t.UnixMilli() + tickEvery.Milliseconds()/2) / tickEvery.Milliseconds()
}

// offsetClock is a real clock that reads offset late (early when offset
// is negative): a scheduler with it fires each tick offset late.
type offsetClock struct {
	clockwork.Clock
	offset time.Duration
}

func (c offsetClock) Now() time.Time                  { return c.Clock.Now().Add(-c.offset) }
func (c offsetClock) Since(t time.Time) time.Duration { return c.Now().Sub(t) }
func (c offsetClock) Until(t time.Time) time.Duration { return t.Sub(c.Now()) }

// run is one run of the job: by which scheduler, for which tick, and when
// (by the real clock).
type run struct {
	who  string
	tick int64
	at   time.Time
}

// tally records the runs and the skips of every scheduler of a test.
type tally struct {
	mu      sync.Mutex
	runs    []run
	skips   []run         // runs skipped for the Locker's ErrNotAcquired
	changed chan struct{} // closed and replaced at every run or skip
}

func newTally() *tally { return &tally{changed: make(chan struct{})} }

func (t *tally) add(r run)  { t.record(&t.runs, r) }
func (t *tally) skip(r run) { t.record(&t.skips, r) }

func (t *tally) record(to *[]run, r run) {
	t.mu.Lock()
	defer t.mu.Unlock()
	*to = append(*to, r)
	close(t.changed)
	t.changed = make(chan struct{})
}

// wait returns the runs once cond holds for the runs and the skips, and
// fails the test if it does not within the bound.
func (t *tally) wait(tb testing.TB, what string, cond func(runs, skips []run) bool) []run {
	tb.Helper()
	deadline := time.NewTimer(within)
	defer deadline.Stop()
	for {
		t.mu.Lock()
		runs, skips, changed := slices.Clone(t.runs), slices.Clone(t.skips), t.changed
		t.mu.Unlock()
		if cond(runs, skips) {
			return runs
		}
		select {
		case <-changed:
		case <-deadline.C:
			tb.Fatalf("%s: not within %v; runs: %v, skips: %v", what, within, runs, skips)
		}
	}
}

// waitFor returns the runs once cond holds for them (see wait).
func (t *tally) waitFor(tb testing.TB, what string, cond func([]run) bool) []run {
	tb.Helper()
	return t.wait(tb, what, func(runs, _ []run) bool { return cond(runs) })
}

// all returns every run so far.
func (t *tally) all() []run {
	t.mu.Lock()
	defer t.mu.Unlock()
	return slices.Clone(t.runs)
}

// ranTick reports whether the runs include one of a tick at or after tick.
func ranTick(tick int64) func([]run) bool {
	return func(runs []run) bool {
		return slices.ContainsFunc(runs, func(r run) bool { return r.tick >= tick })
	}
}

// counts returns, over the runs, the ticks run, the runs and the
// duplicates (runs of a tick run before).
func counts(runs []run) (ticks, runsN, dups int) {
	seen := map[int64]bool{}
	for _, r := range runs {
		if seen[r.tick] {
			dups++
		}
		seen[r.tick] = true
	}
	return len(seen), len(runs), dups
}

// checkOnce fails the test unless every tick from first to last ran
// exactly once in runs, and no tick ran twice at all.
func checkOnce(t *testing.T, runs []run, first, last int64) {
	t.Helper()
	byTick := map[int64][]string{}
	for _, r := range runs {
		byTick[r.tick] = append(byTick[r.tick], r.who)
	}
	for _, tick := range slices.Sorted(maps.Keys(byTick)) {
		if who := byTick[tick]; len(who) > 1 {
			t.Errorf("tick %d ran %d times: on %v", tick, len(who), who)
		}
	}
	for tick := first; tick <= last; tick++ {
		if len(byTick[tick]) == 0 {
			t.Errorf("tick %d did not run", tick)
		}
	}
}

// newClient returns a relock Client on its own connection to the test's
// server, closed when the test ends.
func newClient(t testing.TB, opts ...relock.Option) *relock.Client {
	t.Helper()
	return newClientAt(t, redisAddr, opts...)
}

// newClientAt is newClient on the server at addr.
func newClientAt(t testing.TB, addr string, opts ...relock.Option) *relock.Client {
	t.Helper()
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	c, err := relock.New(rdb, opts...)
	if err != nil {
		_ = rdb.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = c.Close()
		_ = rdb.Close()
	})
	return c
}

// startScheduler starts a scheduler with opt (its locker or elector) and a
// clock offset late, whose job "tick" records its runs as who in tl.
func startScheduler(t testing.TB, who string, offset time.Duration, opt gocron.SchedulerOption, tl *tally) gocron.Scheduler {
	t.Helper()
	clock := offsetClock{Clock: clockwork.NewRealClock(), offset: offset}
	s, err := gocron.NewScheduler(gocron.WithClock(clock), opt)
	if err != nil {
		t.Fatal(err)
	}
	record := func() { tl.add(run{who: who, tick: tickOf(clock.Now()), at: time.Now()}) }
	skipped := func(_ uuid.UUID, _ string, err error) {
		if errors.Is(err, relock.ErrNotAcquired) {
			tl.skip(run{who: who, tick: tickOf(clock.Now()), at: time.Now()})
		}
	}
	start := clock.Now().Truncate(tickEvery).Add(tickEvery)
	_, err = s.NewJob(gocron.DurationJob(tickEvery), gocron.NewTask(record),
		gocron.WithName("tick"), gocron.WithStartAt(gocron.WithStartDateTime(start)),
		gocron.WithEventListeners(gocron.AfterLockError(skipped)))
	if err != nil {
		t.Fatal(err)
	}
	s.Start()
	return s
}

// shutdown stops the schedulers, waiting for their runs to end.
func shutdown(t testing.TB, schedulers ...gocron.Scheduler) {
	t.Helper()
	for _, s := range schedulers {
		if err := s.Shutdown(); err != nil {
			t.Error(err)
		}
	}
}

// runTicks waits until testTicks ticks in a row from the first run have
// run, and one more after them, and returns the first and last of them.
func runTicks(t *testing.T, tl *tally) (first, last int64) {
	t.Helper()
	runs := tl.waitFor(t, "a first run", func(runs []run) bool { return len(runs) > 0 })
	first = runs[0].tick
	last = first + testTicks - 1
	tl.waitFor(t, fmt.Sprintf("tick %d", last+1), ranTick(last+1))
	return first, last
}

// TestLockerRunsEachTickOnce runs three schedulers with three Clients and a
// Locker each, their clocks a little apart, and checks that each tick's
// job runs exactly once.
func TestLockerRunsEachTickOnce(t *testing.T) {
	tl := newTally()
	var schedulers []gocron.Scheduler
	for i, off := range offsets {
		l, err := gocronlock.NewLocker(newClient(t), gocronlock.WithKeyPrefix(t.Name()+":"), gocronlock.WithSkew(testSkew))
		if err != nil {
			t.Fatal(err)
		}
		schedulers = append(schedulers, startScheduler(t, fmt.Sprint("s", i), off, gocron.WithDistributedLocker(l), tl))
	}
	first, last := runTicks(t, tl)
	shutdown(t, schedulers...)
	runs := tl.all()
	checkOnce(t, runs, first, last)
	ticks, n, dups := counts(runs)
	t.Logf("ticks %d, runs %d, duplicates %d", ticks, n, dups)
}

// TestElectorRunsEachTickOnce runs three schedulers with three Clients and
// an Elector each on one election, and checks that each tick's job runs
// exactly once, on the leader.
func TestElectorRunsEachTickOnce(t *testing.T) {
	tl := newTally()
	name := electionName(t)
	var schedulers []gocron.Scheduler
	var electors []*gocronlock.Elector
	for i, off := range offsets {
		who := fmt.Sprint("s", i)
		e, err := gocronlock.NewElector(newClient(t).Election(name), who)
		if err != nil {
			t.Fatal(err)
		}
		electors = append(electors, e)
		schedulers = append(schedulers, startScheduler(t, who, off, gocron.WithDistributedElector(e), tl))
	}
	first, last := runTicks(t, tl)
	shutdown(t, schedulers...)
	var leaders []string
	for i, e := range electors {
		if e.IsLeader(context.Background()) == nil {
			leaders = append(leaders, fmt.Sprint("s", i))
		}
	}
	// Closed after they were all asked: the leader's Close elects another.
	for _, e := range electors {
		if err := e.Close(); err != nil {
			t.Error(err)
		}
	}
	runs := tl.all()
	checkOnce(t, runs, first, last)
	if len(leaders) != 1 {
		t.Errorf("leaders: %v, want one", leaders)
	}
	for _, r := range runs {
		if len(leaders) == 1 && r.who != leaders[0] {
			t.Errorf("tick %d ran on %s, not on the leader %s", r.tick, r.who, leaders[0])
		}
	}
	ticks, n, dups := counts(runs)
	t.Logf("ticks %d, runs %d, duplicates %d", ticks, n, dups)
}
