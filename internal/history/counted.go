package history

import (
	"fmt"
	"sort"
	"strings"
)

// BeginCounted records that who starts holding one of the capacity
// permits of name, a semaphore's: the hold may overlap up to capacity-1
// other holds of name. A hold that begins while capacity holds of name
// are in progress, none of them told of its loss (Signal), is an
// over-grant, reported by Check as KindOverCapacity; each of those holds
// that was told of its loss by then, and went on, is reported as
// KindOutlived. Counted holds have no fencing token.
//
// All the holds of a name are counted, with one capacity, or none are:
// BeginCounted panics when capacity is below 1 or differs from the
// capacity of the name's earlier holds, or when the name has holds of a
// lock (Begin, BeginShared).
func (r *Recorder) BeginCounted(who, name string, capacity int) *Hold {
	if capacity < 1 {
		panic(fmt.Sprintf("history: a counted hold of %q with %d permits", name, capacity))
	}
	return r.begin(who, name, 0, false, capacity)
}

// crowd checks the counted hold b against others, the holds of its name
// in progress when it began: an over-grant if b.Capacity of them, or
// more, had not been told of their loss by then, and an outlived loss for
// each one that had, if they were b.Capacity or more in all. Each is
// reported once. r.mu is held.
func (r *Recorder) crowd(b HoldInfo, others []HoldInfo, how string) {
	if len(others) < b.Capacity {
		return
	}
	sort.Slice(others, func(i, j int) bool { return others[i].Seq < others[j].Seq })
	var told, untold []HoldInfo
	for _, a := range others {
		if a.Signalled && a.SignalAt <= b.Begin {
			told = append(told, a)
		} else {
			untold = append(untold, a)
		}
	}
	if len(untold) >= b.Capacity && !r.overGrants[b.Seq] {
		r.overGrants[b.Seq] = true
		held := make([]string, len(untold))
		for i, a := range untold {
			held[i] = fmt.Sprintf("#%d (%s)", a.Seq, a.Who)
		}
		r.violations = append(r.violations, Violation{
			Kind: KindOverCapacity,
			Name: b.Name,
			A:    untold[0],
			B:    b,
			With: untold,
			Detail: fmt.Sprintf("hold #%d (%s) %s: %d holds of %d permits were in progress, none told of a loss: %s",
				b.Seq, b.Who, how, len(untold), b.Capacity, strings.Join(held, ", ")),
		})
	}
	for _, a := range told {
		pair := [2]int{a.Seq, b.Seq}
		if r.reported[pair] {
			continue
		}
		r.reported[pair] = true
		r.violations = append(r.violations, outlived(a, b))
	}
}

// crowds returns, for each hold of hs (in Begin order), how many holds
// before it were in progress when it began.
func crowds(hs []*Hold) []int {
	n := make([]int, len(hs))
	var active []*Hold
	for i, h := range hs {
		active = inProgress(active, h.info.Begin)
		n[i] = len(active)
		active = append(active, h)
	}
	return n
}

// nextNeeding returns the first counted hold after hs[i] that could begin
// only once hs[i] had given its permit back, or nil: one that began while
// capacity-1 holds other than hs[i] were in progress. hs is in Begin
// order, and crowd is crowds(hs).
func nextNeeding(hs []*Hold, crowd []int, i, capacity int) *Hold {
	h := hs[i].info
	for j := i + 1; j < len(hs); j++ {
		others := crowd[j]
		if b := hs[j].info; h.Open() || h.End > b.Begin {
			others-- // hs[i] was among them
		}
		if others >= capacity-1 {
			return hs[j]
		}
	}
	return nil
}
