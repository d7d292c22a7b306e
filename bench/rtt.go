package main

import (
	"context"
	"fmt"
	"slices"
	"time"
)

// A round trip is measured by rttPings PINGs, after rttWarm unmeasured.
// Through the delaying proxy (-rtt), where a PING takes milliseconds,
// fewer: the warm-up stops after rttWarmFor and the measurement after
// rttFor, with at least rttMinPings measured. On loopback all of them fit.
const (
	rttPings    = 1000
	rttWarm     = 100
	rttMinPings = 50
	rttWarmFor  = 30 * time.Millisecond
	rttFor      = 300 * time.Millisecond
)

// measureRTT returns the round trip to the server now, through the
// delaying proxy if there is one: the p50 of the PINGs (rttPings) sent
// one after another by a go-redis client set up as the libraries' are
// (pool of poolSize, default options).
func measureRTT(ctx context.Context, addr string) (time.Duration, error) {
	rdb := newGoRedis(addr, nil)
	defer rdb.Close()
	lat := make([]time.Duration, 0, rttPings)
	start := time.Now()
	for i := 0; i < rttWarm && (i == 0 || time.Since(start) < rttWarmFor); i++ {
		if err := rdb.Ping(ctx).Err(); err != nil {
			return 0, err
		}
	}
	start = time.Now()
	for len(lat) < rttPings && (len(lat) < rttMinPings || time.Since(start) < rttFor) {
		t := time.Now()
		if err := rdb.Ping(ctx).Err(); err != nil {
			return 0, err
		}
		lat = append(lat, time.Since(t))
	}
	return percentile(lat, 0.50), nil
}

// turnBetweenRTTs runs a turn of the given round between two round-trip
// measurements and records them in its result (inRoundTrips).
func turnBetweenRTTs(ctx context.Context, addr string, round int, turn func() Result) (Result, error) {
	before, err := measureRTT(ctx, addr)
	if err != nil {
		return Result{}, fmt.Errorf("round trip: %w", err)
	}
	r := turn()
	after, err := measureRTT(ctx, addr)
	if err != nil {
		return Result{}, fmt.Errorf("round trip: %w", err)
	}
	r.inRoundTrips(round, before, after)
	return r, nil
}

// rttLine says what the round trips measured around the turns were:
// their median and range; rtts are in µs.
func rttLine(rtts []float64) string {
	v := slices.Sorted(slices.Values(rtts))
	if len(v) == 0 {
		return "no round trip measured"
	}
	via := ""
	if addedRTT > 0 {
		via = fmt.Sprintf(", through the proxy adding %s", addedRTT)
	}
	return fmt.Sprintf("round trip (PING p50%s) just before and after each turn: median %s (%s–%s)",
		via, fmtMicros(medianSorted(v)), fmtMicros(v[0]), fmtMicros(v[len(v)-1]))
}

// heading returns a table's title, which says the round trip the proxy
// adds when there is one.
func heading(title string) string {
	if addedRTT > 0 {
		return fmt.Sprintf("%s, through a proxy adding %s of round trip", title, addedRTT)
	}
	return title
}
