package main

import (
	"context"
	"fmt"
	"slices"
	"time"
)

// rttPings is how many PINGs measure a round trip, after rttWarm unmeasured.
const (
	rttPings = 1000
	rttWarm  = 100
)

// measureRTT returns the loopback round trip to the server now: the p50 of
// rttPings PINGs sent one after another by a go-redis client set up as the
// libraries' are (pool of poolSize, default options).
func measureRTT(ctx context.Context, addr string) (time.Duration, error) {
	rdb := newGoRedis(addr, nil)
	defer rdb.Close()
	lat := make([]time.Duration, 0, rttPings)
	for i := range rttWarm + rttPings {
		t := time.Now()
		if err := rdb.Ping(ctx).Err(); err != nil {
			return 0, err
		}
		if i >= rttWarm {
			lat = append(lat, time.Since(t))
		}
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
	return fmt.Sprintf("round trip (PING p50) just before and after each turn: median %.0fµs (%.0f–%.0fµs)",
		medianSorted(v), v[0], v[len(v)-1])
}
