package history

import (
	"math"
	"sort"
	"time"
)

// Summary condenses a Recorder's history.
type Summary struct {
	Holds    int           // holds begun
	Shared   int           // of them, shared holds (BeginShared)
	Counted  int           // of them, counted holds (BeginCounted)
	Peak     int           // the most holds of one name in progress at once
	Open     int           // holds not yet ended
	Lost     int           // holds ended by a loss signal
	Handoffs int           // gaps measured between consecutive holds of a name
	P50, P99 time.Duration // handoff percentiles over all names
	Names    []NameSummary // one per lock name, sorted by name

	// Of the holds whose loss was signalled and that another hold of the
	// same name followed, which it may not overlap (a shared hold is
	// followed by the next exclusive one, a counted hold by the first that
	// needed its permit: that began while capacity-1 others were in
	// progress): how many were told before that next hold began, and how
	// many after (the lock or permit was granted again before its holder
	// knew).
	LossBeforeNext, LossAfterNext int
}

// NameSummary condenses the history of one lock name.
type NameSummary struct {
	Name      string
	Holds     int
	Shared    int
	Capacity  int // the permits of a counted name; 0 for a lock
	Peak      int // the most holds in progress at once
	Open      int
	Lost      int
	LastToken uint64 // the token of the last exclusive hold begun with one
	Handoffs  int
	P50, P99  time.Duration

	LossBeforeNext, LossAfterNext int // as in Summary
}

// Summary returns counts per name and handoff percentiles. A handoff is
// the gap from the end of one hold to the beginning of the next hold of
// the same name. With waiters queued on the lock, that is the time the
// lock took to pass from one holder to the next; without them it also
// includes idle time, so it approximates handoffs well under contention
// only. Pairs of holds that overlapped, or whose first is open, give no
// gap; nor do the holds of a counted name, which do not say which hold a
// permit passed to.
func (r *Recorder) Summary() Summary {
	r.mu.Lock()
	defer r.mu.Unlock()
	var s Summary
	var all []time.Duration
	for name, st := range r.names {
		ns := NameSummary{Name: name, Holds: len(st.holds), Capacity: st.capacity}
		if st.last != nil {
			ns.LastToken = st.last.info.Token
		}
		hs := byBegin(st.holds)
		crowd := crowds(hs)
		for _, n := range crowd {
			ns.Peak = max(ns.Peak, n+1)
		}
		next := func(i int) *Hold { return nextConflicting(hs, i) }
		if st.capacity > 0 {
			next = func(i int) *Hold { return nextNeeding(hs, crowd, i, st.capacity) }
		}
		var gaps []time.Duration
		for i, h := range hs {
			switch {
			case h.info.Open():
				ns.Open++
			case h.info.Lost:
				ns.Lost++
			}
			if h.info.Shared {
				ns.Shared++
			}
			if h.info.Signalled {
				if next := next(i); next != nil && h.info.SignalAt <= next.info.Begin {
					ns.LossBeforeNext++
				} else if next != nil {
					ns.LossAfterNext++
				}
			}
			if i == 0 || st.capacity > 0 {
				continue
			}
			if p := hs[i-1].info; !p.Open() && p.End <= h.info.Begin {
				gaps = append(gaps, h.info.Begin-p.End)
			}
		}
		ns.Handoffs = len(gaps)
		ns.P50, ns.P99 = percentiles(gaps)
		all = append(all, gaps...)
		s.Holds += ns.Holds
		s.Shared += ns.Shared
		if st.capacity > 0 {
			s.Counted += ns.Holds
		}
		s.Peak = max(s.Peak, ns.Peak)
		s.Open += ns.Open
		s.Lost += ns.Lost
		s.LossBeforeNext += ns.LossBeforeNext
		s.LossAfterNext += ns.LossAfterNext
		s.Names = append(s.Names, ns)
	}
	sort.Slice(s.Names, func(i, j int) bool { return s.Names[i].Name < s.Names[j].Name })
	s.Handoffs = len(all)
	s.P50, s.P99 = percentiles(all)
	return s
}

// nextConflicting returns the first hold after hs[i] that may not overlap
// it, or nil. hs is in Begin order.
func nextConflicting(hs []*Hold, i int) *Hold {
	for _, h := range hs[i+1:] {
		if conflict(hs[i].info, h.info) {
			return h
		}
	}
	return nil
}

// percentiles returns the 50th and 99th percentiles of ds by nearest
// rank, or zeros for none. It sorts ds.
func percentiles(ds []time.Duration) (p50, p99 time.Duration) {
	if len(ds) == 0 {
		return 0, 0
	}
	sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
	return Percentile(ds, 50), Percentile(ds, 99)
}

// Percentile returns the p-th percentile (0 < p <= 100) of sorted by
// nearest rank, or 0 when sorted is empty.
func Percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	rank := int(math.Ceil(p/100*float64(len(sorted)))) - 1
	rank = max(0, min(rank, len(sorted)-1))
	return sorted[rank]
}
