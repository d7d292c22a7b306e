package main

import (
	"fmt"
	"io"
	"math"
	"strings"
)

// Target is one performance target of DESIGN.md section 7 and how relock
// did against it in this run.
type Target struct {
	// Name says what is required.
	Name string `json:"name"`
	// Measured is the figure it was judged on.
	Measured string `json:"measured"`
	// Result is PASS, MISS, or n/a when a figure it needs is missing.
	Result string `json:"result"`
}

// printTable writes one workload's side-by-side table, in markdown, from
// the medians over its rounds, and the notes below it.
func printTable(out io.Writer, rs runResults, w workload, libs []string) {
	ref := w.reference()
	fmt.Fprintf(out, "### %s\n\n", heading(w.title))
	head := "| library | cycles/s | " + ref + " ÷ this | cycle p50 | allocs/cycle | calls/cycle | server cmds/cycle | server CPU/cycle | client CPU/cycle |"
	rule := "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
	if w.shared {
		head += " wait p50 | wait p99 |"
		rule += " ---: | ---: |"
	}
	if w.reads > 0 {
		head += " write wait p99 |"
		rule += " ---: |"
	}
	if w.exclusive() {
		head += " handoff p50 | handoff p99 | from unlock call p50 |"
		rule += " ---: | ---: | ---: |"
	}
	fmt.Fprintln(out, head)
	fmt.Fprintln(out, rule)
	for _, name := range libs {
		r, ok := rs.summary(w.name, name)
		switch {
		case !ok && r.Unsupported != "":
			fmt.Fprintf(out, "| %s | n/a: %s |\n", name, r.Unsupported)
			continue
		case !ok && r.Error != "":
			fmt.Fprintf(out, "| %s | error: %s |\n", name, strings.ReplaceAll(r.Error, "|", "/"))
			continue
		case !ok:
			continue
		}
		ratio := "—"
		if q, ok := rs.ratio(w.name, ref, name, "cycles/s", throughput); ok && name != ref {
			ratio = q.String()
		}
		fmt.Fprintf(out, "| %s | %.0f | %s | %s | %.1f | %.2f | %.2f | %.1fµs | %.1fµs |", name, r.PerSecond, ratio,
			fmtRTT(r.CycleP50us, r.CycleP50RTT), r.AllocsPerCycle, r.CallsPerCycle, r.ServerCmdsPerCycle, r.ServerCPUPerCycleUs,
			r.ClientCPUPerCycleUs)
		if w.shared {
			fmt.Fprintf(out, " %s | %s |", fmtRTT(r.WaitP50us, r.WaitP50RTT), fmtMicros(r.WaitP99us))
		}
		if w.reads > 0 {
			fmt.Fprintf(out, " %s |", fmtMicros(r.WriteWaitP99us))
		}
		if w.exclusive() {
			fmt.Fprintf(out, " %s | %s | %s |", fmtRTT(r.HandoffP50us, r.HandoffP50RTT), fmtMicros(r.HandoffP99us),
				fmtRTT(r.ReleaseHandoffP50us, r.ReleaseHandoffP50RTT))
		}
		fmt.Fprintln(out)
	}
	fmt.Fprintln(out)
	printNotes(out, rs, w, libs)
	fmt.Fprintln(out)
}

// printNotes writes the lines below a workload's table: the round trips,
// the ratio to the best peer, relock's locks against each other, the
// think actually slept, the most holders inside, and what went wrong.
func printNotes(out io.Writer, rs runResults, w workload, libs []string) {
	ref := w.reference()
	fmt.Fprintln(out, rs.rttNotes(w.name))
	if best, ok := rs.bestPeer(w.name, libs); ok {
		if q, ok := rs.ratio(w.name, ref, best.Library, "cycles/s", throughput); ok {
			fmt.Fprintf(out, "%s ÷ best peer (%s, median %.0f/s), median of per-round ratios (min–max): %s\n",
				ref, best.Library, best.PerSecond, q)
		}
	}
	for _, p := range sameClient(w, libs) {
		if q, ok := rs.ratio(w.name, p[0], p[1], "cycles/s", throughput); ok {
			fmt.Fprintf(out, "%s ÷ %s (both on %s), median of per-round ratios (min–max): %s\n", p[0], p[1], clientOf(p[0]), q)
		}
	}
	if q, ok := rs.ratio(w.name, "relock-fair", "relock", "cycles/s", throughput); ok && w.exclusive() {
		fmt.Fprintf(out, "relock-fair ÷ relock (FairMutex ÷ Mutex): %s (target ≥ %.1f×)\n", q, fairTarget)
	}
	if addedRTT > 0 {
		var parts []string
		for _, name := range libs {
			if r, ok := rs.summary(w.name, name); ok {
				parts = append(parts, fmt.Sprintf("%s %.1fµs", name, r.ProxyCPUPerCycleUs))
			}
		}
		fmt.Fprintf(out, "the delaying proxy's CPU per cycle (median): %s\n", strings.Join(parts, ", "))
	}
	if w.think > 0 {
		var parts []string
		for _, name := range libs {
			if r, ok := rs.summary(w.name, name); ok {
				parts = append(parts, fmt.Sprintf("%s %s", name, fmtMicros(r.ThinkMeanUs)))
			}
		}
		fmt.Fprintf(out, "think asked %s, slept on average (median): %s\n", w.think, strings.Join(parts, ", "))
	}
	if w.shared && !w.exclusive() {
		var parts []string
		for _, name := range libs {
			if r, ok := rs.summary(w.name, name); ok {
				parts = append(parts, fmt.Sprintf("%s %d", name, r.MaxInside))
			}
		}
		allowed := "readers share, a writer is alone"
		if w.permits > 0 {
			allowed = fmt.Sprintf("at most %d allowed", w.permits)
		}
		fmt.Fprintf(out, "most holders inside at once (%s): %s\n", allowed, strings.Join(parts, ", "))
	}
	for _, name := range libs {
		if r, _ := rs.summary(w.name, name); r.Overlaps > 0 {
			fmt.Fprintf(out, "WARNING: %s: %d holds began while holds they exclude were inside\n", name, r.Overlaps)
		}
		for _, r := range rs[w.name][name] {
			if r.Error != "" {
				fmt.Fprintf(out, "round %d: %s failed: %s\n", r.Round, name, r.Error)
			}
		}
	}
}

// sameClient pairs each relock in libs that runs on another client
// library than w's reference (the ratio column's) with each peer in libs
// on the same client library: relock on valkey-go against valkeylock, as
// the column sets relock on go-redis against all.
func sameClient(w workload, libs []string) [][2]string {
	var pairs [][2]string
	for _, mine := range libs {
		if isPeer(mine) || clientOf(mine) == clientOf(w.reference()) {
			continue
		}
		for _, peer := range libs {
			if isPeer(peer) && clientOf(peer) == clientOf(mine) {
				pairs = append(pairs, [2]string{mine, peer})
			}
		}
	}
	return pairs
}

// fairTarget is the least share of the Mutex's one-key throughput the
// FairMutex, which hands the lock over in FIFO order, should keep.
const fairTarget = 0.8

// allocTarget is the most allocations an uncontended Mutex cycle should
// make (issue 10, item 3).
const allocTarget = 25

// judge checks relock against the targets of DESIGN.md section 7, on the
// medians of per-round ratios and the medians of figures over the rounds.
func judge(rs runResults, libs []string) []Target {
	var ts []Target
	add := func(name string, measured string, ok, have bool) {
		t := Target{Name: name, Measured: "—", Result: "n/a"}
		if have {
			t.Measured, t.Result = measured, verdict(ok)
		}
		ts = append(ts, t)
	}
	speed := func(workload string, want float64) {
		name := fmt.Sprintf("%s: relock ≥ %.1f × best peer", workload, want)
		best, ok := rs.bestPeer(workload, libs)
		q, have := rs.ratio(workload, "relock", best.Library, "cycles/s", throughput)
		add(name, fmt.Sprintf("%s %s", q, best.Library), q.Median >= want, ok && have)
	}
	mine := func(workload string) (Result, bool) { return rs.summary(workload, "relock") }

	speed("serial", 1.1)
	slowest, have := Ratio{}, false
	for _, name := range libs {
		q, ok := rs.ratio("serial", "relock", name, "cycle p50", func(r Result) float64 { return r.CycleP50us })
		if ok && isPeer(name) && (!have || q.Median > slowest.Median) {
			slowest, have = q, true
		}
	}
	add("serial: relock cycle p50 ≤ every peer's", fmt.Sprintf("%s of %s's", slowest, slowest.To), slowest.Median <= 1, have)
	r, ok := mine("serial")
	add(fmt.Sprintf("serial: relock ≤ %d allocations per cycle", allocTarget), fmt.Sprintf("%.1f", r.AllocsPerCycle),
		r.AllocsPerCycle <= allocTarget, ok)
	var seen []string
	pass := true
	for _, wl := range []string{"serial", "parallel"} {
		if r, ok := mine(wl); ok {
			seen = append(seen, fmt.Sprintf("%s %.3f", wl, r.CallsPerCycle))
			pass = pass && math.Abs(r.CallsPerCycle-2) < 0.005
		}
	}
	add("uncontended relock cycle: exactly 2 Redis calls", strings.Join(seen, ", ")+" calls/cycle", pass, len(seen) > 0)

	speed("parallel", 1.5)
	speed("onekey", 1.3)
	r, ok = mine("onekey")
	add("onekey: relock wait p99 ≤ 5ms", fmtMicros(r.WaitP99us), r.WaitP99us <= 5000, ok)
	speed("onekey-procs", 1.5)
	r, ok = mine("onekey-procs")
	add("onekey-procs: relock handoff p50 ≤ 1.5 round trips",
		fmt.Sprintf("%s; from the unlock call %s", fmtRTT(r.HandoffP50us, r.HandoffP50RTT), fmtRTT(r.ReleaseHandoffP50us, r.ReleaseHandoffP50RTT)),
		r.HandoffP50RTT <= 1.5, ok)
	add("onekey-procs: relock holds never overlap across processes", fmt.Sprintf("%d overlapping holds", r.Overlaps), r.Overlaps == 0, ok)

	q, ok := rs.ratio("onekey", "relock-fair", "relock", "cycles/s", throughput)
	add(fmt.Sprintf("onekey: relock-fair (FIFO) ≥ %.1f × relock Mutex", fairTarget), q.String(), q.Median >= fairTarget, ok)
	w := semaphoreWorkload
	r, ok = mine(w.name)
	add(fmt.Sprintf("semaphore: relock never has more than %d holders inside", w.permits),
		fmt.Sprintf("at most %d at once, %d holds against the rule", r.MaxInside, r.Overlaps),
		r.MaxInside <= int64(w.permits) && r.Overlaps == 0, ok)
	return ts
}

// printTargets writes the targets as a markdown table.
func printTargets(out io.Writer, ts []Target) {
	title := "Targets (DESIGN.md §7), on medians over the rounds"
	if addedRTT > 0 {
		title += "; set for loopback, judged here through the proxy"
	}
	fmt.Fprintf(out, "### %s\n", title)
	fmt.Fprintln(out)
	fmt.Fprintln(out, "| target | measured | result |")
	fmt.Fprintln(out, "| --- | --- | --- |")
	for _, t := range ts {
		fmt.Fprintf(out, "| %s | %s | %s |\n", t.Name, t.Measured, t.Result)
	}
	fmt.Fprintln(out)
}

func verdict(ok bool) string {
	if ok {
		return "PASS"
	}
	return "MISS"
}

// fmtMicros renders microseconds as µs below 1ms and as ms above.
func fmtMicros(us float64) string {
	if us < 1000 {
		return fmt.Sprintf("%.0fµs", us)
	}
	return fmt.Sprintf("%.2fms", us/1000)
}

// fmtRTT renders a latency and the same in round trips: "143µs (2.4 RTT)".
func fmtRTT(us, rtts float64) string {
	return fmt.Sprintf("%s (%.1f RTT)", fmtMicros(us), rtts)
}
