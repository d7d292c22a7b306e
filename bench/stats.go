package main

import (
	"math"
	"slices"
	"sync"
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
	// Wait and Handoff percentiles in microseconds, for the one-key
	// workload only (see README.md).
	WaitP50us    float64 `json:"wait_p50_us,omitempty"`
	WaitP99us    float64 `json:"wait_p99_us,omitempty"`
	HandoffP50us float64 `json:"handoff_p50_us,omitempty"`
	HandoffP99us float64 `json:"handoff_p99_us,omitempty"`
	// ThinkMeanUs is the mean time a worker actually slept between cycles,
	// in microseconds: time.Sleep overshoots short sleeps.
	ThinkMeanUs float64 `json:"think_mean_us,omitempty"`
	// Handoffs is how many cycles began while another worker held the lock.
	Handoffs int `json:"handoffs,omitempty"`
	// Overlaps counts holds that began while another worker's hold on the
	// same key had not ended: violations of mutual exclusion.
	Overlaps int64 `json:"overlaps"`
	// Error is why the measurement failed, if it did.
	Error string `json:"error,omitempty"`
}

// timeline records the holds of one shared key in the order they were
// acquired, for the wait and handoff figures.
type timeline struct {
	base time.Time
	mu   sync.Mutex
	// Per hold, in ns since base: lock called, lock returned, unlock
	// returned.
	called, acquired, released []int64
}

func newTimeline(capacity int) *timeline {
	return &timeline{
		base:     time.Now(),
		called:   make([]int64, 0, capacity),
		acquired: make([]int64, 0, capacity),
		released: make([]int64, 0, capacity),
	}
}

// since returns t as ns since the timeline's base.
func (tl *timeline) since(t time.Time) int64 { return int64(t.Sub(tl.base)) }

// acquire records a hold and returns its index. Holds of one key are
// mutually exclusive, so the order of these calls is the order of the
// holds.
func (tl *timeline) acquire(called, acquired time.Time) int {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	tl.called = append(tl.called, tl.since(called))
	tl.acquired = append(tl.acquired, tl.since(acquired))
	tl.released = append(tl.released, -1)
	return len(tl.acquired) - 1
}

// release records when hold i's unlock returned.
func (tl *timeline) release(i int, released time.Time) {
	tl.mu.Lock()
	tl.released[i] = tl.since(released)
	tl.mu.Unlock()
}

// figures returns the wait and handoff samples. Wait is lock returned
// minus lock called, for every hold. Handoff is lock returned minus the
// previous hold's unlock returned, for the holds whose lock call began
// before that unlock returned (a waiter was waiting); it is 0 when the new
// holder's lock returned first.
func (tl *timeline) figures() (wait, handoff []time.Duration) {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	for i := range tl.acquired {
		wait = append(wait, time.Duration(tl.acquired[i]-tl.called[i]))
		if i == 0 || tl.released[i-1] < 0 || tl.called[i] >= tl.released[i-1] {
			continue
		}
		handoff = append(handoff, time.Duration(max(0, tl.acquired[i]-tl.released[i-1])))
	}
	return wait, handoff
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
