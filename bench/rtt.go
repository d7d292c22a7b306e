package main

import (
	"context"
	"fmt"
	"strings"
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

// rttLine says how many rounds there were and the round trip of each; rtts
// are in µs.
func rttLine(rtts []float64) string {
	parts := make([]string, len(rtts))
	for i, v := range rtts {
		parts[i] = fmt.Sprintf("%.0f", v)
	}
	return fmt.Sprintf("%d rounds; round trip (PING p50) per round: %sµs", len(rtts), strings.Join(parts, ", "))
}
