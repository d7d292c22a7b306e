package main

import (
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// Result is one library's figures for one workload.
type Result struct {
	// Library and Workload name what was measured.
	Library  string `json:"library"`
	Workload string `json:"workload"`
	// Cycles is the number of completed lock+unlock cycles (sections).
	Cycles int64 `json:"cycles"`
	// Seconds is the length of the measured window.
	Seconds float64 `json:"seconds"`
	// PerSecond is Cycles / Seconds.
	PerSecond float64 `json:"per_second"`
	// AllocsPerCycle is the process's heap allocations in the window per
	// cycle, adapters and workload loop included.
	AllocsPerCycle float64 `json:"allocs_per_cycle"`
	// CallsPerCycle is the commands the library's client sent per cycle.
	CallsPerCycle float64 `json:"calls_per_cycle"`
	// ServerCmdsPerCycle is the INFO commandstats delta per cycle: every
	// command the server ran, those run by Lua scripts included.
	ServerCmdsPerCycle float64 `json:"server_cmds_per_cycle"`
	// Wait percentiles in microseconds, for the workloads on one key or
	// semaphore; WriteWaitP99us counts the writes of a read-heavy
	// workload only. Handoff percentiles, for the one-key workload only
	// (see README.md).
	WaitP50us      float64 `json:"wait_p50_us,omitempty"`
	WaitP99us      float64 `json:"wait_p99_us,omitempty"`
	WriteWaitP99us float64 `json:"write_wait_p99_us,omitempty"`
	HandoffP50us   float64 `json:"handoff_p50_us,omitempty"`
	HandoffP99us   float64 `json:"handoff_p99_us,omitempty"`
	// ThinkMeanUs is the mean time a worker actually slept between cycles,
	// in microseconds: time.Sleep overshoots short sleeps.
	ThinkMeanUs float64 `json:"think_mean_us,omitempty"`
	// Handoffs is how many cycles began while another worker held the lock.
	Handoffs int `json:"handoffs,omitempty"`
	// Overlaps counts holds that began while holds they should exclude
	// had not ended: a writer not alone, or more holders than permits.
	Overlaps int64 `json:"overlaps"`
	// MaxInside is the most holders of the shared key or semaphore at
	// once.
	MaxInside int64 `json:"max_inside,omitempty"`
	// Unsupported says why the library did not run the workload.
	Unsupported string `json:"unsupported,omitempty"`
	// Error is why the measurement failed, if it did.
	Error string `json:"error,omitempty"`
}

// timeline records the holds of one shared key in the order they were
// acquired, for the wait and handoff figures.
type timeline struct {
	base time.Time
	mu   sync.Mutex
	// Per hold, in ns since base: lock called, lock returned, unlock
	// returned; and whether it was a write.
	called, acquired, released []int64
	write                      []bool
}

func newTimeline(capacity int) *timeline {
	return &timeline{
		base:     time.Now(),
		called:   make([]int64, 0, capacity),
		acquired: make([]int64, 0, capacity),
		released: make([]int64, 0, capacity),
		write:    make([]bool, 0, capacity),
	}
}

// since returns t as ns since the timeline's base.
func (tl *timeline) since(t time.Time) int64 { return int64(t.Sub(tl.base)) }

// acquire records a hold and returns its index. When the holds of the key
// are mutually exclusive, the order of these calls is the order of the
// holds.
func (tl *timeline) acquire(called, acquired time.Time, write bool) int {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	tl.called = append(tl.called, tl.since(called))
	tl.acquired = append(tl.acquired, tl.since(acquired))
	tl.write = append(tl.write, write)
	tl.released = append(tl.released, -1)
	return len(tl.acquired) - 1
}

// release records when hold i's unlock returned.
func (tl *timeline) release(i int, released time.Time) {
	tl.mu.Lock()
	tl.released[i] = tl.since(released)
	tl.mu.Unlock()
}

// figures returns the wait, write wait and handoff samples. Wait is lock
// returned minus lock called, for every hold, and write wait the same for
// the writes. Handoff, only for exclusive holds, is lock returned minus
// the previous hold's unlock returned, for the holds whose lock call began
// before that unlock returned (a waiter was waiting); it is 0 when the new
// holder's lock returned first.
func (tl *timeline) figures(exclusive bool) (wait, writeWait, handoff []time.Duration) {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	for i := range tl.acquired {
		wait = append(wait, time.Duration(tl.acquired[i]-tl.called[i]))
		if tl.write[i] {
			writeWait = append(writeWait, wait[i])
		}
		if !exclusive || i == 0 || tl.released[i-1] < 0 || tl.called[i] >= tl.released[i-1] {
			continue
		}
		handoff = append(handoff, time.Duration(max(0, tl.acquired[i]-tl.released[i-1])))
	}
	return wait, writeWait, handoff
}

// writerUnit is one exclusive holder in a guard's state; shared holders
// count in the bits below it.
const writerUnit = 1 << 32

// guard watches the holds of one shared key or semaphore: how many are
// inside at once, and whether a hold broke the workload's rule, which is
// that an exclusive holder is alone and shared holders are at most limit.
type guard struct {
	limit    int64
	state    atomic.Int64 // exclusive holders × writerUnit + shared holders
	max      atomic.Int64 // most holders inside at once
	overlaps atomic.Int64 // holds that began against the rule
}

// newGuard returns the guard of w's shared key: shared holders are bounded
// by the permits of a semaphore, and by nothing but the workers otherwise.
func newGuard(w workload) *guard {
	g := &guard{limit: int64(w.workers)}
	if w.permits > 0 {
		g.limit = int64(w.permits)
	}
	return g
}

// enter records a hold starting.
func (g *guard) enter(exclusive bool) {
	add := int64(1)
	if exclusive {
		add = writerUnit
	}
	v := g.state.Add(add)
	writers, shared := v/writerUnit, v%writerUnit
	if writers > 1 || writers == 1 && shared > 0 || shared > g.limit {
		g.overlaps.Add(1)
	}
	for n, m := writers+shared, g.max.Load(); n > m && !g.max.CompareAndSwap(m, n); m = g.max.Load() {
	}
}

// leave records a hold ending.
func (g *guard) leave(exclusive bool) {
	if exclusive {
		g.state.Add(-writerUnit)
	} else {
		g.state.Add(-1)
	}
}

// percentile returns the nearest-rank p-quantile (0 < p <= 1) of samples,
// which it sorts; 0 if there are none.
func percentile(samples []time.Duration, p float64) time.Duration {
	if len(samples) == 0 {
		return 0
	}
	slices.Sort(samples)
	i := int(math.Ceil(float64(len(samples))*p)) - 1
	return samples[min(max(i, 0), len(samples)-1)]
}

// micros converts a duration to fractional microseconds.
func micros(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }
