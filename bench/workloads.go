package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"
	"runtime/pprof"
	"sync"
	"sync/atomic"
	"time"
)

// lockGrace is how long after the end of a window a lock call may still
// wait before it counts as failed.
const lockGrace = 30 * time.Second

// workload is one of the scenarios of DESIGN.md section 7, or one that
// compares relock's other primitives.
type workload struct {
	name    string // flag and JSON name
	title   string // table heading
	workers int
	shared  bool          // all workers on one key; otherwise one key each
	hold    time.Duration // time in the critical section, spent spinning
	think   time.Duration // time asleep between unlock and the next lock
	reads   float64       // share of cycles that are reads (readheavy.go)
	permits int           // > 0: a semaphore of this many permits (semaphore.go)
	ref     string        // the library the ratio column is of; relock if empty
}

// workloads lists the scenarios in report order.
var workloads = []workload{
	{name: "serial", title: "serial lock+unlock, 1 goroutine", workers: 1},
	{name: "parallel", title: "64 goroutines, own keys", workers: 64},
	{name: "onekey", title: "8 workers on one key (100µs hold, 500µs think)", workers: 8,
		shared: true, hold: 100 * time.Microsecond, think: 500 * time.Microsecond},
	readHeavy,
	semaphoreWorkload,
}

// exclusive reports whether every hold of w excludes every other: the
// holds of its key follow one another, so handoffs can be measured.
func (w workload) exclusive() bool { return w.shared && w.reads == 0 && w.permits == 0 }

// reference returns the library whose figures the others are divided into.
func (w workload) reference() string {
	if w.ref != "" {
		return w.ref
	}
	return "relock"
}

// measure connects a library, warms it up on w, then measures w for d.
func measure(ctx context.Context, s *server, name string, open opener, w workload, run string, d, warmup time.Duration) (r Result) {
	r = Result{Library: name, Workload: w.name}
	fail := func(what string, err error) Result {
		r.Error = fmt.Sprintf("%s: %v", what, err)
		return r
	}
	// A lock call that ignores its context would hang the run: show where.
	stuck := time.AfterFunc(warmup+d+2*lockGrace, func() {
		fmt.Fprintf(os.Stderr, "%s/%s made no progress; goroutines:\n", name, w.name)
		_ = pprof.Lookup("goroutine").WriteTo(os.Stderr, 2)
		s.stop()
		os.Exit(3)
	})
	defer stuck.Stop()

	if err := s.reset(ctx); err != nil {
		return fail("flush", err)
	}
	lib, err := open(ctx, s, w)
	if err != nil {
		return fail("connect", err)
	}
	defer func() {
		if err := lib.close(); err != nil && r.Error == "" {
			r.Error = fmt.Sprintf("close: %v", err)
		}
	}()
	lockers, err := newLockers(ctx, lib, w, fmt.Sprintf("bench:%s:%s:%s", run, name, w.name))
	if errors.Is(err, errNoSemaphore) {
		r.Unsupported = err.Error()
		return r
	}
	if err != nil {
		return fail("set-up", err)
	}
	// Warm up: open the pool's connections, load scripts, subscribe.
	if _, err := runWorkers(ctx, w, lockers, warmup, nil); err != nil {
		return fail("warm-up", err)
	}

	var tl *timeline
	if w.shared {
		tl = newTimeline(int(d.Seconds()*20000) + 1024)
	}
	cmds0, err := s.commands(ctx)
	if err != nil {
		return fail("INFO", err)
	}
	calls0 := lib.calls()
	var m0, m1 runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&m0)
	start := time.Now()
	st, runErr := runWorkers(ctx, w, lockers, d, tl)
	elapsed := time.Since(start)
	runtime.ReadMemStats(&m1)
	calls1 := lib.calls()
	cmds1, err := s.commands(ctx)
	if err != nil {
		return fail("INFO", err)
	}

	r.Cycles, r.Overlaps, r.MaxInside, r.Seconds = st.cycles, st.overlaps, st.maxInside, elapsed.Seconds()
	if runErr != nil {
		return fail(fmt.Sprintf("run (after %.1fs)", elapsed.Seconds()), runErr)
	}
	if st.cycles == 0 {
		return fail("run", fmt.Errorf("no cycle completed"))
	}
	n := float64(st.cycles)
	r.PerSecond = n / elapsed.Seconds()
	r.AllocsPerCycle = float64(m1.Mallocs-m0.Mallocs) / n
	r.CallsPerCycle = float64(calls1-calls0) / n
	// The first INFO is counted in the second snapshot.
	r.ServerCmdsPerCycle = float64(cmds1-cmds0-1) / n
	if w.think > 0 {
		r.ThinkMeanUs = micros(st.think) / n
	}
	if tl != nil {
		wait, writeWait, handoff := tl.figures(w.exclusive())
		r.WaitP50us = micros(percentile(wait, 0.50))
		r.WaitP99us = micros(percentile(wait, 0.99))
		if w.reads > 0 {
			r.WriteWaitP99us = micros(percentile(writeWait, 0.99))
		}
		if w.exclusive() {
			r.Handoffs = len(handoff)
			r.HandoffP50us = micros(percentile(handoff, 0.50))
			r.HandoffP99us = micros(percentile(handoff, 0.99))
		}
	}
	return r
}

// newLockers returns one handle per worker of w, on keys named from base.
// It returns errNoSemaphore if the library lacks what w needs.
func newLockers(ctx context.Context, lib library, w workload, base string) ([]locker, error) {
	lockers := make([]locker, w.workers)
	for i := range lockers {
		key := fmt.Sprintf("%s:%d", base, i)
		if w.shared {
			key = base
		}
		if w.permits == 0 {
			lockers[i] = lib.locker(key)
			continue
		}
		sl, ok := lib.(semaphores)
		if !ok {
			return nil, errNoSemaphore
		}
		var err error
		if lockers[i], err = sl.semaphore(ctx, key, w.permits); err != nil {
			return nil, err
		}
	}
	return lockers, nil
}

// runStats is what one run of a workload's workers adds up to.
type runStats struct {
	cycles    int64
	overlaps  int64         // holds that broke the workload's exclusion rule
	maxInside int64         // most holders of the shared key at once
	think     time.Duration // total time spent thinking
}

// runWorkers runs w's workers until d has passed, each finishing the
// cycle it is in, and returns their totals and the first error. Holds of
// a shared key are recorded in tl if it is not nil.
func runWorkers(ctx context.Context, w workload, lockers []locker, d time.Duration, tl *timeline) (st runStats, err error) {
	end := time.Now().Add(d)
	ctx, cancel := context.WithDeadline(ctx, end.Add(lockGrace))
	defer cancel()
	var (
		total   atomic.Int64
		thought atomic.Int64 // ns spent in think
		g       *guard
		once    sync.Once
		wg      sync.WaitGroup
	)
	if w.shared {
		g = newGuard(w)
	}
	for i, lk := range lockers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			n, e := worker(ctx, w, i, lk, end, tl, g, &thought)
			total.Add(n)
			if e != nil {
				once.Do(func() { err = e; cancel() })
			}
		}()
	}
	wg.Wait()
	st = runStats{cycles: total.Load(), think: time.Duration(thought.Load())}
	if g != nil {
		st.overlaps, st.maxInside = g.overlaps.Load(), g.max.Load()
	}
	return st, err
}

// worker runs lock, hold, unlock, think cycles on one locker until end.
// Worker i of a read-heavy workload draws its reads from a generator seeded
// with i, so every library sees the same sequence of reads and writes.
func worker(ctx context.Context, w workload, i int, lk locker, end time.Time, tl *timeline, g *guard, thought *atomic.Int64) (int64, error) {
	var n int64
	mix := newMix(w, i)
	for time.Now().Before(end) {
		read := mix.read()
		called := time.Now()
		unlock, exclusive, err := take(ctx, w, lk, read)
		if err != nil {
			return n, fmt.Errorf("lock: %w", err)
		}
		hold := -1
		if g != nil {
			acquired := time.Now()
			g.enter(exclusive)
			if tl != nil {
				hold = tl.acquire(called, acquired, !read)
			}
			spin(w.hold)
			g.leave(exclusive)
		}
		if err := unlock(ctx); err != nil {
			return n, fmt.Errorf("unlock: %w", err)
		}
		if hold >= 0 {
			tl.release(hold, time.Now())
		}
		n++
		if w.think > 0 {
			t := time.Now()
			time.Sleep(w.think)
			thought.Add(int64(time.Since(t)))
		}
	}
	return n, nil
}

// spin keeps the goroutine busy for d, yielding to others. A hold is spun
// rather than slept because time.Sleep below a millisecond oversleeps to
// about 1ms on Linux when the process is otherwise idle, which would make
// the hold, not the lock, the bottleneck.
func spin(d time.Duration) {
	for end := time.Now().Add(d); time.Now().Before(end); {
		runtime.Gosched()
	}
}
