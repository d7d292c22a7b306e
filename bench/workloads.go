package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"
	"runtime/pprof"
	"sync"
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
	clients bool          // a client (and pool) per worker instead of one in all
	procs   bool          // a worker process per worker (procs.go); implies clients
}

// oneKey is the contended workload: 8 workers on one key, each holding
// for 100µs and thinking for 500µs between holds.
var oneKey = workload{name: "onekey", title: "8 workers on one key, one client (100µs hold, 500µs think)", workers: 8,
	shared: true, hold: 100 * time.Microsecond, think: 500 * time.Microsecond}

// workloads lists the scenarios in report order.
var workloads = []workload{
	{name: "serial", title: "serial lock+unlock, 1 goroutine", workers: 1},
	{name: "parallel", title: "64 goroutines, own keys", workers: 64},
	oneKey,
	variant(oneKey, "onekey-clients", "8 workers on one key, a client each, one process (100µs hold, 500µs think)", false),
	variant(oneKey, "onekey-procs", "8 workers on one key, a client each, 8 processes (100µs hold, 500µs think)", true),
	readHeavy,
	semaphoreWorkload,
}

// variant returns w with a client per worker, in worker processes if procs.
func variant(w workload, name, title string, procs bool) workload {
	w.name, w.title, w.clients, w.procs = name, title, true, procs
	return w
}

// workloadNamed returns the workload called name.
func workloadNamed(name string) (workload, bool) {
	for _, w := range workloads {
		if w.name == name {
			return w, true
		}
	}
	return workload{}, false
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

// key returns the key of worker i of w, in a run whose keys start with base.
func (w workload) key(base string, i int) string {
	if w.shared {
		return base
	}
	return fmt.Sprintf("%s:%d", base, i)
}

// turn is one library's turn on one workload in one round.
type turn struct {
	lib    string
	open   opener
	w      workload
	base   string // the keys' prefix, the same in every round
	d      time.Duration
	warmup time.Duration
}

// window is what one measured window adds up to, before it is divided
// into figures per cycle.
type window struct {
	st      runStats
	elapsed time.Duration
	calls   int64         // commands the library's clients sent
	mallocs uint64        // heap allocations; 0 if not measured
	cpu     time.Duration // the clients' processes' CPU time
	used    usage         // what the server did, the first INFO included
	tl      *timeline     // holds of the shared key, or nil
}

// measure runs one turn: it connects the library, warms it up, then
// measures the workload for t.d.
func measure(ctx context.Context, s *server, t turn) Result {
	defer stallGuard(s, t).Stop()
	if err := s.reset(ctx); err != nil {
		return t.failed("flush", err)
	}
	if t.w.procs {
		return measureProcs(ctx, s, t)
	}
	return measureInProcess(ctx, s, t)
}

// stallGuard ends the run if a turn outlasts every bound: a lock call that
// ignores its context would otherwise hang it. It shows where.
func stallGuard(s *server, t turn) *time.Timer {
	return time.AfterFunc(t.warmup+t.d+2*lockGrace, func() {
		fmt.Fprintf(os.Stderr, "%s/%s made no progress; goroutines:\n", t.lib, t.w.name)
		_ = pprof.Lookup("goroutine").WriteTo(os.Stderr, 2)
		s.stop()
		os.Exit(3)
	})
}

// failed returns the turn's result for a measurement that failed.
func (t turn) failed(what string, err error) Result {
	return Result{Library: t.lib, Workload: t.w.name, Error: fmt.Sprintf("%s: %v", what, err)}
}

// measureInProcess runs a turn's workers as goroutines of this process.
func measureInProcess(ctx context.Context, s *server, t turn) (r Result) {
	w := t.w
	lib, err := openClients(ctx, s, t.open, w)
	if err != nil {
		return t.failed("connect", err)
	}
	defer func() {
		if err := lib.close(); err != nil && r.Error == "" {
			r.Error = fmt.Sprintf("close: %v", err)
		}
	}()
	lockers, err := newLockers(ctx, lib, w, t.base)
	if errors.Is(err, errNoSemaphore) {
		return Result{Library: t.lib, Workload: w.name, Unsupported: err.Error()}
	}
	if err != nil {
		return t.failed("set-up", err)
	}
	// Warm up: open the pool's connections, load scripts, subscribe.
	if _, err := runWorkers(ctx, w, lockers, time.Now().Add(t.warmup), nil); err != nil {
		return t.failed("warm-up", err)
	}

	var win window
	if w.shared {
		win.tl = newTimeline(time.Now(), int(t.d.Seconds()*20000)+1024)
	}
	used0, err := s.usage(ctx)
	if err != nil {
		return t.failed("INFO", err)
	}
	m := startMeter(lib)
	start := time.Now()
	st, runErr := runWorkers(ctx, w, lockers, start.Add(t.d), win.tl)
	win.elapsed = time.Since(start)
	win.st = st
	win.calls, win.mallocs, win.cpu = m.stop()
	used1, err := s.usage(ctx)
	if err != nil {
		return t.failed("INFO", err)
	}
	win.used = used1.sub(used0)
	return t.figures(win, runErr)
}

// meter counts a library's client calls and the process's heap
// allocations over a window.
type meter struct {
	lib   library
	calls int64
	mem   runtime.MemStats
	cpu   time.Duration
}

// startMeter collects garbage, so that the window starts on a clean heap,
// and takes the counts at the start of the window.
func startMeter(lib library) *meter {
	m := &meter{lib: lib}
	runtime.GC()
	runtime.ReadMemStats(&m.mem)
	m.calls = lib.calls()
	m.cpu = processCPU()
	return m
}

// stop returns the calls, allocations and CPU time since startMeter.
func (m *meter) stop() (calls int64, mallocs uint64, cpu time.Duration) {
	cpu = processCPU() - m.cpu
	var end runtime.MemStats
	runtime.ReadMemStats(&end)
	return m.lib.calls() - m.calls, end.Mallocs - m.mem.Mallocs, cpu
}

// figures turns a measured window into the turn's result.
func (t turn) figures(win window, runErr error) Result {
	w, st := t.w, win.st
	r := Result{Library: t.lib, Workload: w.name, Cycles: st.cycles, Overlaps: st.overlaps,
		MaxInside: st.maxInside, Seconds: win.elapsed.Seconds()}
	if runErr != nil {
		r.Error = fmt.Sprintf("run (after %.1fs): %v", r.Seconds, runErr)
		return r
	}
	if st.cycles == 0 {
		r.Error = "run: no cycle completed"
		return r
	}
	n := float64(st.cycles)
	r.PerSecond = n / r.Seconds
	r.AllocsPerCycle = float64(win.mallocs) / n
	r.CallsPerCycle = float64(win.calls) / n
	// The first INFO is counted in the second snapshot.
	r.ServerCmdsPerCycle = float64(win.used.cmds-1) / n
	r.ServerCPUPerCycleUs = micros(win.used.cpu) / n
	r.ProxyCPUPerCycleUs = micros(win.used.proxyCPU) / n
	r.ClientCPUPerCycleUs = micros(win.cpu) / n
	r.CycleP50us = micros(percentile(st.lat, 0.50))
	r.CycleP99us = micros(percentile(st.lat, 0.99))
	if w.think > 0 {
		r.ThinkMeanUs = micros(st.think) / n
	}
	if tl := win.tl; tl != nil {
		wait, writeWait, handoff, release := tl.figures(w.exclusive())
		r.WaitP50us = micros(percentile(wait, 0.50))
		r.WaitP99us = micros(percentile(wait, 0.99))
		if w.reads > 0 {
			r.WriteWaitP99us = micros(percentile(writeWait, 0.99))
		}
		if w.exclusive() {
			r.Handoffs = len(handoff)
			r.HandoffP50us = micros(percentile(handoff, 0.50))
			r.HandoffP99us = micros(percentile(handoff, 0.99))
			r.ReleaseHandoffP50us = micros(percentile(release, 0.50))
		}
	}
	return r
}

// newLockers returns one handle per worker of w, on keys named from base.
// It returns errNoSemaphore if the library lacks what w needs.
func newLockers(ctx context.Context, lib library, w workload, base string) ([]locker, error) {
	lockers := make([]locker, w.workers)
	for i := range lockers {
		key, own := w.key(base, i), forWorker(lib, i)
		if w.permits == 0 {
			lockers[i] = own.locker(key)
			continue
		}
		sl, ok := own.(semaphores)
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
	overlaps  int64           // holds that broke the workload's exclusion rule
	maxInside int64           // most holders of the shared key at once
	think     time.Duration   // total time spent thinking
	lat       []time.Duration // per cycle, lock call to unlock return
}

// runWorkers runs w's workers until end, each finishing the cycle it is
// in, and returns their totals and the first error. Holds of a shared key
// are recorded in tl if it is not nil.
func runWorkers(ctx context.Context, w workload, lockers []locker, end time.Time, tl *timeline) (st runStats, err error) {
	ctx, cancel := context.WithDeadline(ctx, end.Add(lockGrace))
	defer cancel()
	var (
		mu   sync.Mutex
		g    *guard
		once sync.Once
		wg   sync.WaitGroup
	)
	if w.shared {
		g = newGuard(w)
	}
	for i, lk := range lockers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ws, e := worker(ctx, w, i, lk, end, tl, g)
			mu.Lock()
			st.cycles += ws.cycles
			st.think += ws.think
			st.lat = append(st.lat, ws.lat...)
			mu.Unlock()
			if e != nil {
				once.Do(func() { err = e; cancel() })
			}
		}()
	}
	wg.Wait()
	if g != nil {
		st.overlaps, st.maxInside = g.overlaps.Load(), g.max.Load()
	}
	return st, err
}

// worker runs lock, hold, unlock, think cycles on one locker until end,
// and returns its cycles, think time and cycle latencies. Worker i of a
// read-heavy workload draws its reads from a generator seeded with i, so
// every library sees the same sequence of reads and writes.
func worker(ctx context.Context, w workload, i int, lk locker, end time.Time, tl *timeline, g *guard) (st runStats, err error) {
	mix := newMix(w, i)
	for time.Now().Before(end) {
		read := mix.read()
		called := time.Now()
		unlock, exclusive, err := take(ctx, w, lk, read)
		if err != nil {
			return st, fmt.Errorf("lock: %w", err)
		}
		hold := -1
		if w.shared {
			acquired := time.Now()
			if tl != nil {
				hold = tl.acquire(called, acquired, !read)
			}
			g.enter(exclusive)
			spin(w.hold)
			g.leave(exclusive)
		}
		left := time.Now()
		if err := unlock(ctx); err != nil {
			return st, fmt.Errorf("unlock: %w", err)
		}
		released := time.Now()
		if hold >= 0 {
			tl.release(hold, left, released)
		}
		st.lat = append(st.lat, released.Sub(called))
		st.cycles++
		if w.think > 0 {
			time.Sleep(w.think)
			st.think += time.Since(released)
		}
	}
	return st, nil
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
