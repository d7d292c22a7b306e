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

// results indexes a run's results by workload and library.
type results map[string]map[string]Result

func (rs results) add(r Result) {
	if rs[r.Workload] == nil {
		rs[r.Workload] = make(map[string]Result)
	}
	rs[r.Workload][r.Library] = r
}

// get returns a result that has figures.
func (rs results) get(workload, lib string) (Result, bool) {
	r, ok := rs[workload][lib]
	return r, ok && r.Error == "" && r.Cycles > 0
}

// bestPeer returns the fastest library other than relock's on a workload.
func (rs results) bestPeer(workload string, libs []string) (Result, bool) {
	var best Result
	found := false
	for _, name := range libs {
		if r, ok := rs.get(workload, name); ok && isPeer(name) && (!found || r.PerSecond > best.PerSecond) {
			best, found = r, true
		}
	}
	return best, found
}

// printTable writes one workload's side-by-side table, in markdown.
func printTable(out io.Writer, rs results, w workload, libs []string) {
	ref := w.reference()
	fmt.Fprintf(out, "### %s\n\n", w.title)
	head := "| library | cycles/s | " + ref + " ÷ this | allocs/cycle | calls/cycle | server cmds/cycle |"
	rule := "| --- | ---: | ---: | ---: | ---: | ---: |"
	if w.shared {
		head += " wait p50 | wait p99 |"
		rule += " ---: | ---: |"
	}
	if w.reads > 0 {
		head += " write wait p99 |"
		rule += " ---: |"
	}
	if w.exclusive() {
		head += " handoff p50 | handoff p99 |"
		rule += " ---: | ---: |"
	}
	fmt.Fprintln(out, head)
	fmt.Fprintln(out, rule)
	mine, haveMine := rs.get(w.name, ref)
	for _, name := range libs {
		r, ok := rs[w.name][name]
		if !ok {
			continue
		}
		if r.Unsupported != "" {
			fmt.Fprintf(out, "| %s | n/a: %s |\n", name, r.Unsupported)
			continue
		}
		if r.Error != "" {
			fmt.Fprintf(out, "| %s | error: %s |\n", name, strings.ReplaceAll(r.Error, "|", "/"))
			continue
		}
		ratio := "—"
		if haveMine && r.PerSecond > 0 {
			ratio = fmt.Sprintf("%.2f×", mine.PerSecond/r.PerSecond)
		}
		fmt.Fprintf(out, "| %s | %.0f | %s | %.1f | %.2f | %.2f |", name, r.PerSecond, ratio,
			r.AllocsPerCycle, r.CallsPerCycle, r.ServerCmdsPerCycle)
		if w.shared {
			fmt.Fprintf(out, " %s | %s |", fmtMicros(r.WaitP50us), fmtMicros(r.WaitP99us))
		}
		if w.reads > 0 {
			fmt.Fprintf(out, " %s |", fmtMicros(r.WriteWaitP99us))
		}
		if w.exclusive() {
			fmt.Fprintf(out, " %s | %s |", fmtMicros(r.HandoffP50us), fmtMicros(r.HandoffP99us))
		}
		fmt.Fprintln(out)
	}
	fmt.Fprintln(out)
	if best, ok := rs.bestPeer(w.name, libs); ok && haveMine {
		fmt.Fprintf(out, "%s vs best peer (%s, %.0f/s): %.2f×\n", ref, best.Library, best.PerSecond, mine.PerSecond/best.PerSecond)
	}
	if fair, ok := rs.get(w.name, "relock-fair"); ok && w.exclusive() {
		if mutex, ok := rs.get(w.name, "relock"); ok {
			fmt.Fprintf(out, "relock-fair ÷ relock (FairMutex ÷ Mutex): %.2f× (target ≥ %.1f×)\n", fair.PerSecond/mutex.PerSecond, fairTarget)
		}
	}
	if w.think > 0 {
		var parts []string
		for _, name := range libs {
			if r, ok := rs.get(w.name, name); ok {
				parts = append(parts, fmt.Sprintf("%s %s", name, fmtMicros(r.ThinkMeanUs)))
			}
		}
		fmt.Fprintf(out, "think asked %s, slept on average: %s\n", w.think, strings.Join(parts, ", "))
	}
	if w.shared && !w.exclusive() {
		var parts []string
		for _, name := range libs {
			if r, ok := rs.get(w.name, name); ok {
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
		if r := rs[w.name][name]; r.Overlaps > 0 {
			fmt.Fprintf(out, "WARNING: %s: %d holds began while holds they exclude were inside\n", name, r.Overlaps)
		}
	}
	fmt.Fprintln(out)
}

// fairTarget is the least share of the Mutex's one-key throughput the
// FairMutex, which hands the lock over in FIFO order, should keep.
const fairTarget = 0.8

// judge checks relock against the targets of DESIGN.md section 7.
func judge(rs results, libs []string) []Target {
	var ts []Target
	ratioTarget := func(name, workload string, want float64, peer Result, havePeer bool) {
		t := Target{Name: name, Result: "n/a", Measured: "—"}
		if mine, ok := rs.get(workload, "relock"); ok && havePeer {
			got := mine.PerSecond / peer.PerSecond
			t.Measured = fmt.Sprintf("%.2f× %s (%.0f vs %.0f/s)", got, peer.Library, mine.PerSecond, peer.PerSecond)
			t.Result = verdict(got >= want)
		}
		ts = append(ts, t)
	}
	best, ok := rs.bestPeer("serial", libs)
	ratioTarget("serial: relock ≥ 0.95 × best peer", "serial", 0.95, best, ok)
	best, ok = rs.bestPeer("parallel", libs)
	ratioTarget("64 goroutines: relock ≥ 1.25 × best peer", "parallel", 1.25, best, ok)
	rueidis, ok := rs.get("onekey", "rueidislock")
	ratioTarget("one key: relock ≥ 1.2 × rueidislock", "onekey", 1.2, rueidis, ok)

	latency := func(name string, limitUs float64, pick func(Result) float64) {
		t := Target{Name: name, Result: "n/a", Measured: "—"}
		if mine, ok := rs.get("onekey", "relock"); ok {
			t.Measured = fmtMicros(pick(mine))
			t.Result = verdict(pick(mine) <= limitUs)
		}
		ts = append(ts, t)
	}
	latency("one key: relock handoff p50 ≤ 100µs", 100, func(r Result) float64 { return r.HandoffP50us })
	latency("one key: relock wait p99 ≤ 5ms", 5000, func(r Result) float64 { return r.WaitP99us })

	t := Target{Name: fmt.Sprintf("one key: relock-fair (FIFO) ≥ %.1f × relock Mutex", fairTarget), Result: "n/a", Measured: "—"}
	fair, okFair := rs.get("onekey", "relock-fair")
	mutex, okMutex := rs.get("onekey", "relock")
	if okFair && okMutex {
		got := fair.PerSecond / mutex.PerSecond
		t.Measured = fmt.Sprintf("%.2f× (%.0f vs %.0f/s)", got, fair.PerSecond, mutex.PerSecond)
		t.Result = verdict(got >= fairTarget)
	}
	ts = append(ts, t)

	w := semaphoreWorkload
	t = Target{Name: fmt.Sprintf("semaphore: relock never has more than %d holders inside", w.permits), Result: "n/a", Measured: "—"}
	if r, ok := rs.get(w.name, "relock"); ok {
		t.Measured = fmt.Sprintf("at most %d at once, %d holds against the rule", r.MaxInside, r.Overlaps)
		t.Result = verdict(r.MaxInside <= int64(w.permits) && r.Overlaps == 0)
	}
	ts = append(ts, t)

	t = Target{Name: "uncontended relock cycle: exactly 2 Redis calls", Result: "n/a", Measured: "—"}
	var seen []string
	pass := true
	for _, wl := range []string{"serial", "parallel"} {
		if mine, ok := rs.get(wl, "relock"); ok {
			seen = append(seen, fmt.Sprintf("%s %.3f", wl, mine.CallsPerCycle))
			pass = pass && math.Abs(mine.CallsPerCycle-2) < 0.005
		}
	}
	if len(seen) > 0 {
		t.Measured = strings.Join(seen, ", ") + " calls/cycle"
		t.Result = verdict(pass)
	}
	return append(ts, t)
}

// printTargets writes the targets as a markdown table.
func printTargets(out io.Writer, ts []Target) {
	fmt.Fprintln(out, "### Targets (DESIGN.md §7)")
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
