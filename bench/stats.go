package main

import (
	"cmp"
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
	// Round is the round the figures are from, counted from 0; in a
	// summary, the number of rounds that have figures.
	Round int `json:"round"`
	// RTTBeforeUs and RTTAfterUs are the loopback round trip measured just
	// before and just after the turn, in microseconds (the p50 of PINGs,
	// rtt.go), and RTTus their mean, which latencies are divided by. In a
	// summary, their medians over the rounds.
	RTTus       float64 `json:"rtt_us"`
	RTTBeforeUs float64 `json:"rtt_before_us"`
	RTTAfterUs  float64 `json:"rtt_after_us"`
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
	// ServerCPUPerCycleUs is the server's CPU time (user and system) in
	// the window per cycle, in microseconds: what the server spends on a
	// cycle, which bounds the throughput of a server-bound workload.
	ServerCPUPerCycleUs float64 `json:"server_cpu_per_cycle_us"`
	// ProxyCPUPerCycleUs is the delaying proxy's CPU time (-rtt) in the
	// window per cycle, in microseconds: what forwarding a cycle's
	// traffic costs on the cores the clients and the server share.
	ProxyCPUPerCycleUs float64 `json:"proxy_cpu_per_cycle_us,omitempty"`
	// ClientCPUPerCycleUs is the CPU time (user and system) the clients'
	// processes used in the window per cycle, in microseconds: the bench
	// process, or the worker processes of a workload run across
	// processes. On a machine whose cores the clients share with the
	// server, it takes from the server's time.
	ClientCPUPerCycleUs float64 `json:"client_cpu_per_cycle_us"`
	// Cycle percentiles in microseconds: lock call to unlock return, every
	// cycle, the hold included.
	CycleP50us float64 `json:"cycle_p50_us"`
	CycleP99us float64 `json:"cycle_p99_us"`
	// Wait percentiles in microseconds, for the workloads on one key or
	// semaphore; WriteWaitP99us counts the writes of a read-heavy
	// workload only. Handoff percentiles, for the one-key workload only
	// (see README.md).
	WaitP50us      float64 `json:"wait_p50_us,omitempty"`
	WaitP99us      float64 `json:"wait_p99_us,omitempty"`
	WriteWaitP99us float64 `json:"write_wait_p99_us,omitempty"`
	HandoffP50us   float64 `json:"handoff_p50_us,omitempty"`
	HandoffP99us   float64 `json:"handoff_p99_us,omitempty"`
	// ReleaseHandoffP50us is the handoff p50 counted from the previous
	// holder's unlock call instead of its return (see README.md).
	ReleaseHandoffP50us float64 `json:"release_handoff_p50_us,omitempty"`
	// CycleP50RTT, WaitP50RTT, HandoffP50RTT and ReleaseHandoffP50RTT are
	// the figures of the same names in round trips of the turn (RTTus).
	CycleP50RTT          float64 `json:"cycle_p50_rtt"`
	WaitP50RTT           float64 `json:"wait_p50_rtt,omitempty"`
	HandoffP50RTT        float64 `json:"handoff_p50_rtt,omitempty"`
	ReleaseHandoffP50RTT float64 `json:"release_handoff_p50_rtt,omitempty"`
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

// Holds records the holds of one shared key, each in ns since a base
// time: when the lock was called and returned, when the holder left its
// critical section (before calling unlock) and when the unlock returned;
// and whether the hold was a write. A worker process sends its Holds to the
// parent, relative to the start of the window, which all processes share.
type Holds struct {
	Called   []int64 `json:"called"`
	Acquired []int64 `json:"acquired"`
	Left     []int64 `json:"left"`
	Released []int64 `json:"released"`
	Write    []bool  `json:"write"`
}

// timeline records the holds of one shared key in the order they were
// acquired, for the wait and handoff figures.
type timeline struct {
	base time.Time
	mu   sync.Mutex
	Holds
}

// newTimeline returns a timeline whose times count from base. A base
// without a monotonic reading (time.Unix) makes them wall-clock times,
// which processes on one machine share.
func newTimeline(base time.Time, capacity int) *timeline {
	return &timeline{base: base, Holds: Holds{
		Called:   make([]int64, 0, capacity),
		Acquired: make([]int64, 0, capacity),
		Left:     make([]int64, 0, capacity),
		Released: make([]int64, 0, capacity),
		Write:    make([]bool, 0, capacity),
	}}
}

// mergeHolds returns a timeline of the holds of every part, in the order
// they were acquired.
func mergeHolds(parts []Holds) *timeline {
	var all Holds
	for _, p := range parts {
		all.Called = append(all.Called, p.Called...)
		all.Acquired = append(all.Acquired, p.Acquired...)
		all.Left = append(all.Left, p.Left...)
		all.Released = append(all.Released, p.Released...)
		all.Write = append(all.Write, p.Write...)
	}
	order := make([]int, len(all.Acquired))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int { return cmp.Compare(all.Acquired[a], all.Acquired[b]) })
	tl := newTimeline(time.Time{}, len(order))
	for _, i := range order {
		tl.Called = append(tl.Called, all.Called[i])
		tl.Acquired = append(tl.Acquired, all.Acquired[i])
		tl.Left = append(tl.Left, all.Left[i])
		tl.Released = append(tl.Released, all.Released[i])
		tl.Write = append(tl.Write, all.Write[i])
	}
	return tl
}

// since returns t as ns since the timeline's base.
func (tl *timeline) since(t time.Time) int64 { return int64(t.Sub(tl.base)) }

// acquire records a hold and returns its index. When the holds of the key
// are mutually exclusive, the order of these calls is the order of the
// holds.
func (tl *timeline) acquire(called, acquired time.Time, write bool) int {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	tl.Called = append(tl.Called, tl.since(called))
	tl.Acquired = append(tl.Acquired, tl.since(acquired))
	tl.Write = append(tl.Write, write)
	tl.Left = append(tl.Left, -1)
	tl.Released = append(tl.Released, -1)
	return len(tl.Acquired) - 1
}

// release records when hold i's holder left its critical section and when
// its unlock returned.
func (tl *timeline) release(i int, left, released time.Time) {
	tl.mu.Lock()
	tl.Left[i] = tl.since(left)
	tl.Released[i] = tl.since(released)
	tl.mu.Unlock()
}

// overlaps counts the exclusive holds that began before an earlier one
// was left: the check for holds in several processes, where no guard sees
// them all. Only holds in acquisition order, as from mergeHolds.
func (tl *timeline) overlaps() int64 {
	var n, left int64
	for i := range tl.Acquired {
		if i > 0 && tl.Acquired[i] < left {
			n++
		}
		left = max(left, tl.Left[i])
	}
	return n
}

// figures returns the wait, write wait and handoff samples. Wait is lock
// returned minus lock called, for every hold, and write wait the same for
// the writes. Handoffs are only for exclusive holds whose lock call began
// before the previous holder left its critical section (a waiter was
// waiting for it): handoff is lock returned minus the previous hold's
// unlock returned, 0 when the new holder's lock returned first; release
// handoff is lock returned minus the previous holder's unlock call.
func (tl *timeline) figures(exclusive bool) (wait, writeWait, handoff, release []time.Duration) {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	for i := range tl.Acquired {
		wait = append(wait, time.Duration(tl.Acquired[i]-tl.Called[i]))
		if tl.Write[i] {
			writeWait = append(writeWait, wait[i])
		}
		if !exclusive || i == 0 || tl.Left[i-1] < 0 || tl.Called[i] >= tl.Left[i-1] {
			continue
		}
		handoff = append(handoff, time.Duration(max(0, tl.Acquired[i]-tl.Released[i-1])))
		release = append(release, time.Duration(max(0, tl.Acquired[i]-tl.Left[i-1])))
	}
	return wait, writeWait, handoff, release
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

// enter records a hold starting. A nil guard records nothing.
func (g *guard) enter(exclusive bool) {
	if g == nil {
		return
	}
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
	if g == nil {
		return
	}
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
