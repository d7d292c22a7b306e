package cli

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// metricKinds are the kinds /metrics always reports, so that every series
// exists whether or not an object of the kind is held now.
var metricKinds = []string{kindLock, kindFair, kindRead, kindWrite, kindPermits, kindSem, kindLatch, kindElection}

// metric is one gauge family of /metrics: per kind, from the rows of a
// snapshot.
type metric struct {
	name, help string
	value      func(r lockRow) float64
}

// metrics are /metrics's families; docs/cli.md lists them.
var metrics = []metric{
	{"relock_objects", "Locks and synchronizers found, by kind (ls's kinds).", func(lockRow) float64 { return 1 }},
	{"relock_holders", "Holders of the locks (distinct owner ids), by kind.", func(r lockRow) float64 { return float64(len(r.Holders)) }},
	{"relock_holds", "Holds, re-entries included; a permit semaphore's held permits.", func(r lockRow) float64 { return float64(r.Holds) }},
	{"relock_waiting", "Waiting clients, counted as ls counts them, by kind.", func(r lockRow) float64 { return float64(r.Waiting) }},
}

// metrics serves the Prometheus text format (version 0.0.4): gauges by
// kind over every object, the shortest TTL of a held lock, and whether
// Redis could be read.
func (v *webView) metrics(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), 10*time.Second)
	defer cancel()
	start := time.Now()
	locks, err := scanLocks(ctx, v.rdb, "*")
	var rs []lockRow
	if err == nil {
		rs, err = rows(ctx, v.rdb, locks)
	}
	v.s.annotateRows(rs)
	w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	writeMetrics(w, rs, err == nil, time.Since(start))
}

func writeMetrics(w io.Writer, rs []lockRow, up bool, took time.Duration) {
	var b strings.Builder
	gauge := func(name, help string) {
		fmt.Fprintf(&b, "# HELP %s %s\n# TYPE %s gauge\n", name, help, name)
	}
	for _, m := range metrics {
		sums := make(map[string]float64, len(metricKinds))
		for _, r := range rs {
			sums[r.Kind] += m.value(r)
		}
		gauge(m.name, m.help)
		for _, k := range metricKinds {
			fmt.Fprintf(&b, "%s{kind=%q} %s\n", m.name, k, strconv.FormatFloat(sums[k], 'g', -1, 64))
		}
	}
	gauge("relock_lock_min_ttl_seconds", "The shortest TTL among held locks with one, by kind; absent when none is held.")
	for _, k := range metricKinds[:4] {
		least := -1.0
		for _, r := range rs {
			if r.Kind == k && r.TTLms >= 0 && (least < 0 || float64(r.TTLms)/1000 < least) {
				least = float64(r.TTLms) / 1000
			}
		}
		if least >= 0 {
			fmt.Fprintf(&b, "relock_lock_min_ttl_seconds{kind=%q} %s\n", k, strconv.FormatFloat(least, 'g', -1, 64))
		}
	}
	gauge("relock_oldest_hold_age_seconds", "The age of the oldest hold of the kind the web view has seen (holds it found at its start count from then), by kind.")
	ages := oldest(rs)
	for _, k := range metricKinds {
		fmt.Fprintf(&b, "relock_oldest_hold_age_seconds{kind=%q} %s\n", k, strconv.FormatFloat(ages[k], 'g', -1, 64))
	}
	gauge("relock_up", "1 when the last scrape read Redis, 0 when it could not.")
	if up {
		b.WriteString("relock_up 1\n")
	} else {
		b.WriteString("relock_up 0\n")
	}
	gauge("relock_scrape_duration_seconds", "How long the scrape took.")
	fmt.Fprintf(&b, "relock_scrape_duration_seconds %s\n", strconv.FormatFloat(took.Seconds(), 'g', -1, 64))
	_, _ = io.WriteString(w, b.String())
}
