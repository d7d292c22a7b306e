package main

import (
	"context"
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

// workload is one of the scenarios of DESIGN.md section 7.
type workload struct {
	name    string // flag and JSON name
	title   string // table heading
	workers int
	shared  bool          // all workers on one key; otherwise one key each
	hold    time.Duration // time in the critical section, spent spinning
	think   time.Duration // time asleep between unlock and the next lock
}

// workloads lists the scenarios in report order.
var workloads = []workload{
	{name: "serial", title: "serial lock+unlock, 1 goroutine", workers: 1},
	{name: "parallel", title: "64 goroutines, own keys", workers: 64},
	{name: "onekey", title: "8 workers on one key (100µs hold, 500µs think)", workers: 8,
		shared: true, hold: 100 * time.Microsecond, think: 500 * time.Microsecond},
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
	lockers := make([]locker, w.workers)
	for i := range lockers {
		key := fmt.Sprintf("bench:%s:%s:%s:%d", run, name, w.name, i)
		if w.shared {
			key = fmt.Sprintf("bench:%s:%s:%s", run, name, w.name)
		}
		lockers[i] = lib.locker(key)
	}
	// Warm up: open the pool's connections, load scripts, subscribe.
	if _, _, _, err := runWorkers(ctx, w, lockers, warmup, nil); err != nil {
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
	cycles, overlaps, think, runErr := runWorkers(ctx, w, lockers, d, tl)
	elapsed := time.Since(start)
	runtime.ReadMemStats(&m1)
	calls1 := lib.calls()
	cmds1, err := s.commands(ctx)
	if err != nil {
		return fail("INFO", err)
	}

	r.Cycles, r.Overlaps, r.Seconds = cycles, overlaps, elapsed.Seconds()
	if runErr != nil {
		return fail(fmt.Sprintf("run (after %.1fs)", elapsed.Seconds()), runErr)
	}
	if cycles == 0 {
		return fail("run", fmt.Errorf("no cycle completed"))
	}
	n := float64(cycles)
	r.PerSecond = n / elapsed.Seconds()
	r.AllocsPerCycle = float64(m1.Mallocs-m0.Mallocs) / n
	r.CallsPerCycle = float64(calls1-calls0) / n
	// The first INFO is counted in the second snapshot.
	r.ServerCmdsPerCycle = float64(cmds1-cmds0-1) / n
	if w.think > 0 {
		r.ThinkMeanUs = micros(think) / n
	}
	if tl != nil {
		wait, handoff := tl.figures()
		r.Handoffs = len(handoff)
		r.WaitP50us = micros(percentile(wait, 0.50))
		r.WaitP99us = micros(percentile(wait, 0.99))
		r.HandoffP50us = micros(percentile(handoff, 0.50))
		r.HandoffP99us = micros(percentile(handoff, 0.99))
	}
	return r
}

// runWorkers runs w's workers until d has passed, each finishing the
// cycle it is in, and returns the cycles completed, the overlapping holds
// seen, the total time spent thinking, and the first error. Holds are recorded in tl if it is not nil.
func runWorkers(ctx context.Context, w workload, lockers []locker, d time.Duration, tl *timeline) (cycles, overlaps int64, think time.Duration, err error) {
	end := time.Now().Add(d)
	ctx, cancel := context.WithDeadline(ctx, end.Add(lockGrace))
	defer cancel()
	var (
		total, overlap atomic.Int64
		thought        atomic.Int64 // ns spent in think
		inside         atomic.Int32 // workers holding the shared key
		once           sync.Once
		wg             sync.WaitGroup
	)
	for _, lk := range lockers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			n, e := worker(ctx, w, lk, end, tl, &inside, &overlap, &thought)
			total.Add(n)
			if e != nil {
				once.Do(func() { err = e; cancel() })
			}
		}()
	}
	wg.Wait()
	return total.Load(), overlap.Load(), time.Duration(thought.Load()), err
}

// worker runs lock, hold, unlock, think cycles on one locker until end.
func worker(ctx context.Context, w workload, lk locker, end time.Time, tl *timeline, inside *atomic.Int32, overlap, thought *atomic.Int64) (int64, error) {
	var n int64
	for time.Now().Before(end) {
		called := time.Now()
		unlock, err := lk.Lock(ctx)
		if err != nil {
			return n, fmt.Errorf("lock: %w", err)
		}
		hold := -1
		if w.shared {
			acquired := time.Now()
			if inside.Add(1) != 1 {
				overlap.Add(1)
			}
			if tl != nil {
				hold = tl.acquire(called, acquired)
			}
			spin(w.hold)
			inside.Add(-1)
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
