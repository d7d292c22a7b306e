package cli

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/relock-go/relock/internal/history"
)

// What the demo prints when its workers have stopped: a table of the
// locks, the rate, the scenes, every violation of mutual exclusion it
// found, and on its last line the verdict.

// demoOutcome is what the report found of a run.
type demoOutcome struct {
	acquired    int64 // acquisitions made
	mismatches  int64 // updates the shared counters lost
	crowded     int64 // times a worker found another inside the critical section
	violations  []history.Violation
	sceneFailed bool
	interrupted bool
}

// report prints the table, the scenes, what went wrong and the verdict,
// and returns the exit code.
func (d *demo) report(ctx context.Context, elapsed time.Duration) int {
	sum := d.rec.Summary()
	o := d.printTable(sum)
	d.printRate(o.acquired, elapsed)
	if d.cfg.scenes && ctx.Err() == nil && d.err == nil {
		o.sceneFailed = d.printScenes(ctx)
	}
	o.violations = d.rec.Check()
	d.printViolations(o)
	o.interrupted = ctx.Err() != nil
	if o.interrupted {
		fmt.Fprintf(d.e.stdout, "interrupted after %d acquisitions\n", o.acquired)
	}
	d.printError(o)
	return d.verdict(o, sum)
}

// printTable prints a line per lock: its acquisitions, the last fencing
// token handed out, and its shared counter, marked when it lost updates.
// It returns the totals over the locks.
func (d *demo) printTable(sum history.Summary) demoOutcome {
	out := d.e.stdout
	tokens := make(map[string]uint64, len(sum.Names))
	for _, ns := range sum.Names {
		tokens[ns.Name] = ns.LastToken
	}
	width := len("lock")
	for _, l := range d.locks {
		width = max(width, len(l.name))
	}
	var o demoOutcome
	fmt.Fprintf(out, "%-*s  %12s  %10s  %10s\n", width, "lock", "acquisitions", "last token", "counter")
	for _, l := range d.locks {
		n := l.acquired.Load()
		o.acquired += n
		o.crowded += l.crowded.Load()
		mark := ""
		if l.value != n {
			o.mismatches += n - l.value
			mark = "  (lost updates)"
		}
		fmt.Fprintf(out, "%-*s  %12d  %10d  %10d%s\n", width, l.name, n, tokens[l.name], l.value, mark)
	}
	return o
}

// printRate prints the acquisitions per second and how often lock calls
// waited and were woken, and warns of holds lost before their unlock.
func (d *demo) printRate(acquired int64, elapsed time.Duration) {
	var waits, wakeups uint64
	for _, c := range d.clients {
		st := c.Stats()
		waits += st.Waits
		wakeups += st.Wakeups
	}
	rate := float64(acquired) / max(elapsed.Seconds(), 1e-9)
	fmt.Fprintf(d.e.stdout, "\n%d clients, %d workers: %d acquisitions in %v (%.0f/s); %d lock calls waited, %d release messages woke a waiter\n",
		len(d.clients), d.cfg.workers, acquired, elapsed.Round(time.Millisecond), rate, waits, wakeups)
	if n := d.lost.Load(); n > 0 {
		fmt.Fprintf(d.e.stdout, "warning: %d holds were lost before their unlock\n", n)
	}
}

// printScenes runs the scenes, printing a line for each that failed, and
// reports whether one did.
func (d *demo) printScenes(ctx context.Context) (failed bool) {
	for _, f := range d.scenes(ctx, d.target, d.mr) {
		fmt.Fprintf(d.e.stdout, "scene failed: %s\n", f)
		failed = true
	}
	fmt.Fprintln(d.e.stdout)
	return failed
}

// printViolations prints the first violations the history shows, and
// the critical sections found crowded and the counter updates lost.
func (d *demo) printViolations(o demoOutcome) {
	out := d.e.stdout
	const show = 10
	for i, v := range o.violations {
		if i == show {
			fmt.Fprintf(out, "... and %d more violations\n", len(o.violations)-show)
			break
		}
		fmt.Fprintf(out, "violation: %v\n", v)
	}
	if o.crowded > 0 {
		fmt.Fprintf(out, "violation: a worker found another inside the critical section %d times\n", o.crowded)
	}
	if o.mismatches != 0 {
		fmt.Fprintf(out, "violation: the shared counters lost %d updates\n", o.mismatches)
	}
}

// printError prints, on stderr, the first worker error, or else, for a
// run that stopped by itself short of its --acquisitions, the shortfall,
// which it records as the run's error.
func (d *demo) printError(o demoOutcome) {
	if d.err != nil {
		fmt.Fprintf(d.e.stderr, "relock demo: %s\n", plain(d.err))
	} else if !o.interrupted && d.cfg.acquisitions > 0 && d.cfg.duration == 0 && o.acquired != int64(d.cfg.acquisitions) {
		d.fail(fmt.Errorf("made %d acquisitions, want %d", o.acquired, d.cfg.acquisitions))
		fmt.Fprintf(d.e.stderr, "relock demo: %s\n", plain(d.err))
	}
}

// verdict prints the last line, whether mutual exclusion held, with the
// handoff percentiles of sum, and returns the exit code.
func (d *demo) verdict(o demoOutcome, sum history.Summary) int {
	out := d.e.stdout
	handoff := fmt.Sprintf("handoff p50 %s p99 %s", fmtDuration(sum.P50), fmtDuration(sum.P99))
	if len(o.violations) == 0 && o.crowded == 0 && o.mismatches == 0 {
		fmt.Fprintf(out, "mutual exclusion held: %d acquisitions, 0 overlaps, %s\n", o.acquired, handoff)
		switch {
		case d.err != nil, o.sceneFailed:
			return exitFailure
		case o.interrupted:
			return exitInterrupted
		}
		return exitOK
	}
	var overlaps, backwards int
	for _, v := range o.violations {
		switch v.Kind {
		case history.KindOverlap:
			overlaps++
		case history.KindTokenBackwards:
			backwards++
		}
	}
	parts := []string{fmt.Sprintf("%d acquisitions", o.acquired), fmt.Sprintf("%d overlaps", overlaps)}
	if backwards > 0 {
		parts = append(parts, fmt.Sprintf("%d tokens out of order", backwards))
	}
	if o.crowded > 0 {
		parts = append(parts, fmt.Sprintf("%d crowded critical sections", o.crowded))
	}
	if o.mismatches != 0 {
		parts = append(parts, fmt.Sprintf("%d lost counter updates", o.mismatches))
	}
	fmt.Fprintf(out, "mutual exclusion VIOLATED: %s, %s\n", strings.Join(parts, ", "), handoff)
	return exitFailure
}

// fmtDuration rounds d to two or three significant digits: 120µs, 2.1ms,
// 35ms, 1.25s.
func fmtDuration(d time.Duration) string {
	switch {
	case d < time.Microsecond:
		return d.String()
	case d < time.Millisecond:
		return d.Round(time.Microsecond).String()
	case d < 10*time.Millisecond:
		return d.Round(100 * time.Microsecond).String()
	case d < time.Second:
		return d.Round(time.Millisecond).String()
	default:
		return d.Round(10 * time.Millisecond).String()
	}
}
