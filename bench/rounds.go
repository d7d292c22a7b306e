package main

import (
	"context"
	"fmt"
	"os"
	"slices"
	"time"
)

// The run is made of rounds: in every round, each library takes its turn
// on a workload, in an order rotated by one library per round, so that no
// library always runs first or after the same one. Figures are medians over
// the rounds, and relock's ratio to another library is the median of the
// ratios of the same round: the machine's speed drifts between rounds, and
// a ratio within a round cancels most of that drift.

// rotated returns v rotated left by round.
func rotated[T any](v []T, round int) []T {
	if len(v) == 0 {
		return nil
	}
	k := round % len(v)
	return append(slices.Clone(v[k:]), v[:k]...)
}

// inRoundTrips records in r the round and the round trips measured just
// before and just after the turn, and r's latencies in round trips of the
// turn (the mean of the two).
func (r *Result) inRoundTrips(round int, before, after time.Duration) {
	r.Round, r.RTTBeforeUs, r.RTTAfterUs = round, micros(before), micros(after)
	r.RTTus = (r.RTTBeforeUs + r.RTTAfterUs) / 2
	if r.RTTus <= 0 {
		return
	}
	r.CycleP50RTT = r.CycleP50us / r.RTTus
	r.WaitP50RTT = r.WaitP50us / r.RTTus
	r.HandoffP50RTT = r.HandoffP50us / r.RTTus
	r.ReleaseHandoffP50RTT = r.ReleaseHandoffP50us / r.RTTus
}

// runResults holds every round's results, by workload and library, in
// round order.
type runResults map[string]map[string][]Result

func (rs runResults) add(r Result) {
	if rs[r.Workload] == nil {
		rs[r.Workload] = make(map[string][]Result)
	}
	rs[r.Workload][r.Library] = append(rs[r.Workload][r.Library], r)
}

// unsteadyRatio is how much the round trips before and after a turn may
// differ before the turn's figures in round trips are called uncertain.
const unsteadyRatio = 2

// rttNotes says what the round trips of a workload's turns were, and how
// many turns had the round trip change more than unsteadyRatio times from
// just before to just after: the machine changed state during them.
func (rs runResults) rttNotes(workload string) string {
	var v []float64
	unsteady := 0
	for _, lib := range rs[workload] {
		for _, r := range lib {
			if r.RTTBeforeUs <= 0 || r.RTTAfterUs <= 0 {
				continue
			}
			v = append(v, r.RTTBeforeUs, r.RTTAfterUs)
			if max(r.RTTBeforeUs, r.RTTAfterUs) > unsteadyRatio*min(r.RTTBeforeUs, r.RTTAfterUs) {
				unsteady++
			}
		}
	}
	return fmt.Sprintf("%s; %d of %d turns had it change over %d× from before to after (their figures in RTT are uncertain)",
		rttLine(v), unsteady, len(v)/2, unsteadyRatio)
}

// ok reports whether r has figures.
func (r Result) ok() bool { return r.Error == "" && r.Unsupported == "" && r.Cycles > 0 }

// measured returns lib's results on workload that have figures.
func (rs runResults) measured(workload, lib string) []Result {
	var ok []Result
	for _, r := range rs[workload][lib] {
		if r.ok() {
			ok = append(ok, r)
		}
	}
	return ok
}

// summary returns lib's figures on workload, each the median over the
// rounds that have figures, with Round the number of those rounds; cycles,
// seconds, handoffs and overlaps are summed and MaxInside is the largest.
// Without a round that has figures it returns the first round's result (an
// error or n/a) and false.
func (rs runResults) summary(workload, lib string) (Result, bool) {
	all := rs[workload][lib]
	ok := rs.measured(workload, lib)
	if len(ok) == 0 {
		if len(all) == 0 {
			return Result{}, false
		}
		return all[0], false
	}
	m := func(f func(Result) float64) float64 { return median(ok, f) }
	s := Result{Library: lib, Workload: workload, Round: len(ok),
		RTTus:                m(func(r Result) float64 { return r.RTTus }),
		RTTBeforeUs:          m(func(r Result) float64 { return r.RTTBeforeUs }),
		RTTAfterUs:           m(func(r Result) float64 { return r.RTTAfterUs }),
		PerSecond:            m(func(r Result) float64 { return r.PerSecond }),
		AllocsPerCycle:       m(func(r Result) float64 { return r.AllocsPerCycle }),
		CallsPerCycle:        m(func(r Result) float64 { return r.CallsPerCycle }),
		ServerCmdsPerCycle:   m(func(r Result) float64 { return r.ServerCmdsPerCycle }),
		ServerCPUPerCycleUs:  m(func(r Result) float64 { return r.ServerCPUPerCycleUs }),
		ProxyCPUPerCycleUs:   m(func(r Result) float64 { return r.ProxyCPUPerCycleUs }),
		ClientCPUPerCycleUs:  m(func(r Result) float64 { return r.ClientCPUPerCycleUs }),
		CycleP50us:           m(func(r Result) float64 { return r.CycleP50us }),
		CycleP99us:           m(func(r Result) float64 { return r.CycleP99us }),
		WaitP50us:            m(func(r Result) float64 { return r.WaitP50us }),
		WaitP99us:            m(func(r Result) float64 { return r.WaitP99us }),
		WriteWaitP99us:       m(func(r Result) float64 { return r.WriteWaitP99us }),
		HandoffP50us:         m(func(r Result) float64 { return r.HandoffP50us }),
		HandoffP99us:         m(func(r Result) float64 { return r.HandoffP99us }),
		CycleP50RTT:          m(func(r Result) float64 { return r.CycleP50RTT }),
		WaitP50RTT:           m(func(r Result) float64 { return r.WaitP50RTT }),
		HandoffP50RTT:        m(func(r Result) float64 { return r.HandoffP50RTT }),
		ReleaseHandoffP50us:  m(func(r Result) float64 { return r.ReleaseHandoffP50us }),
		ReleaseHandoffP50RTT: m(func(r Result) float64 { return r.ReleaseHandoffP50RTT }),
		ThinkMeanUs:          m(func(r Result) float64 { return r.ThinkMeanUs }),
	}
	for _, r := range ok {
		s.Cycles += r.Cycles
		s.Seconds += r.Seconds
		s.Handoffs += r.Handoffs
		s.Overlaps += r.Overlaps
		s.MaxInside = max(s.MaxInside, r.MaxInside)
	}
	return s, true
}

// Ratio is one library's figure divided by another's, round by round.
type Ratio struct {
	// Workload, Of and To name what was divided: Of's figure by To's.
	Workload string `json:"workload"`
	Of       string `json:"of"`
	To       string `json:"to"`
	// Figure names the figure divided.
	Figure string `json:"figure"`
	// Median, Min and Max are over the rounds both libraries have figures.
	Median float64 `json:"median"`
	Min    float64 `json:"min"`
	Max    float64 `json:"max"`
	// Rounds is the number of those rounds.
	Rounds int `json:"rounds"`
}

// String renders the ratio as "1.23× (1.10–1.30)".
func (q Ratio) String() string {
	return fmt.Sprintf("%.2f× (%.2f–%.2f)", q.Median, q.Min, q.Max)
}

// ratio divides f of library of by f of library to, in every round where
// both have figures and to's is not zero.
func (rs runResults) ratio(workload, of, to, figure string, f func(Result) float64) (Ratio, bool) {
	q := Ratio{Workload: workload, Of: of, To: to, Figure: figure}
	var per []float64
	for _, a := range rs.measured(workload, of) {
		for _, b := range rs.measured(workload, to) {
			if a.Round == b.Round && f(b) > 0 {
				per = append(per, f(a)/f(b))
			}
		}
	}
	if len(per) == 0 {
		return q, false
	}
	slices.Sort(per)
	q.Median, q.Min, q.Max, q.Rounds = medianSorted(per), per[0], per[len(per)-1], len(per)
	return q, true
}

// throughput is the figure ratios of speed are taken of.
func throughput(r Result) float64 { return r.PerSecond }

// bestPeer returns the library other than relock's with the highest
// median throughput on workload.
func (rs runResults) bestPeer(workload string, libs []string) (Result, bool) {
	var best Result
	found := false
	for _, name := range libs {
		if r, ok := rs.summary(workload, name); ok && isPeer(name) && (!found || r.PerSecond > best.PerSecond) {
			best, found = r, true
		}
	}
	return best, found
}

// median returns the median of f over rs.
func median(rs []Result, f func(Result) float64) float64 {
	v := make([]float64, len(rs))
	for i, r := range rs {
		v[i] = f(r)
	}
	slices.Sort(v)
	return medianSorted(v)
}

// medianSorted returns the median of sorted values: the mean of the two
// middle ones when there is an even number; 0 if there are none.
func medianSorted(v []float64) float64 {
	n := len(v)
	switch {
	case n == 0:
		return 0
	case n%2 == 1:
		return v[n/2]
	default:
		return (v[n/2-1] + v[n/2]) / 2
	}
}

// takeTurn takes one turn of a round: it says so on stderr as label, runs
// turn between two round-trip measurements (turnBetweenRTTs), and records
// the result in rs and rep. The error is for a run that cannot go on.
func takeTurn(ctx context.Context, addr string, rep *Report, rs runResults, round int, label string, turn func() Result) (Result, error) {
	fmt.Fprintf(os.Stderr, "round %d: %s ...\n", round, label)
	r, err := turnBetweenRTTs(ctx, addr, round, turn)
	if err != nil {
		return r, err
	}
	rs.add(r)
	rep.Results = append(rep.Results, r)
	return r, nil
}
