package main

// The serial floor experiment (issue 10): a cycle of two go-redis GETs,
// one after the other, on one connection's worth of load, issued in three
// ways. Issued directly by the measuring goroutine; by a long-lived helper
// goroutine while the caller waits on a channel; and by a new goroutine
// per call, as redsync does. If the Go scheduler picks a reply up sooner
// when the caller is parked on a channel, the second and third show a
// lower p50 than the first, on the same server in the same rounds.

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/redis/go-redis/v9"
)

// floorKey is the key the experiment GETs.
const floorKey = "bench:floor"

// floorMode is one way of issuing a GET. start returns the function that
// issues one and the function that ends the mode's goroutines.
type floorMode struct {
	name  string
	start func(ctx context.Context, rdb *redis.Client) (get func() error, stop func())
}

// floorModes lists the ways of issuing a GET, the first being the one the
// others are compared with.
var floorModes = []floorMode{
	{"direct", func(ctx context.Context, rdb *redis.Client) (func() error, func()) {
		return func() error { return rdb.Get(ctx, floorKey).Err() }, func() {}
	}},
	{"helper goroutine", func(ctx context.Context, rdb *redis.Client) (func() error, func()) {
		req, resp := make(chan struct{}), make(chan error)
		go func() {
			for range req {
				resp <- rdb.Get(ctx, floorKey).Err()
			}
		}()
		get := func() error { req <- struct{}{}; return <-resp }
		return get, func() { close(req) }
	}},
	{"goroutine per call", func(ctx context.Context, rdb *redis.Client) (func() error, func()) {
		get := func() error {
			done := make(chan error, 1)
			go func() { done <- rdb.Get(ctx, floorKey).Err() }()
			return <-done
		}
		return get, func() {}
	}},
}

// runFloor runs the experiment for rep.Rounds rounds, each mode for d per
// round after warmup, prints its table and adds its results to rep (a
// mode in place of a library, workload "floor"). It reports whether a mode
// failed; the error is for a run that could not go on.
func runFloor(ctx context.Context, out io.Writer, s *server, rep *Report, d, warmup time.Duration) (failed bool, err error) {
	rdb := newGoRedis(s.addr, nil)
	defer rdb.Close()
	if err := rdb.Set(ctx, floorKey, "x", 0).Err(); err != nil {
		return false, err
	}
	rs := runResults{}
	names := make([]string, len(floorModes))
	for i, m := range floorModes {
		names[i] = m.name
	}
	for round := range rep.Rounds {
		for _, i := range rotated(indexes(len(floorModes)), round) {
			m := floorModes[i]
			r, err := takeTurn(ctx, s.addr, rep, rs, round, "floor / "+m.name, func() Result { return floorTurn(ctx, rdb, m, d, warmup) })
			if err != nil {
				return failed, err
			}
			failed = failed || r.Error != ""
		}
	}
	printFloor(out, rs, names)
	for _, name := range names {
		if r, ok := rs.summary("floor", name); ok {
			rep.Summaries = append(rep.Summaries, r)
		}
	}
	return failed, nil
}

// floorTurn measures one mode: cycles of two GETs for d after warmup.
func floorTurn(ctx context.Context, rdb *redis.Client, m floorMode, d, warmup time.Duration) Result {
	r := Result{Library: m.name, Workload: "floor"}
	get, stop := m.start(ctx, rdb)
	defer stop()
	cycle := func() error {
		if err := get(); err != nil {
			return err
		}
		return get()
	}
	for end := time.Now().Add(warmup); time.Now().Before(end); {
		if err := cycle(); err != nil {
			r.Error = err.Error()
			return r
		}
	}
	var (
		lat []time.Duration
		err error
	)
	start := time.Now()
	for end := start.Add(d); time.Now().Before(end) && err == nil; {
		t := time.Now()
		if err = cycle(); err == nil {
			lat = append(lat, time.Since(t))
		}
	}
	r.Seconds = time.Since(start).Seconds()
	if err != nil {
		r.Error = err.Error()
		return r
	}
	r.Cycles = int64(len(lat))
	r.PerSecond = float64(r.Cycles) / r.Seconds
	r.CycleP50us = micros(percentile(lat, 0.50))
	r.CycleP99us = micros(percentile(lat, 0.99))
	return r
}

// printFloor writes the experiment's table: medians over the rounds, and
// each mode's per-round ratios to issuing directly.
func printFloor(out io.Writer, rs runResults, names []string) {
	fmt.Fprintf(out, "### %s\n", heading("serial floor: a cycle of two go-redis GETs, one after the other"))
	fmt.Fprintln(out)
	fmt.Fprintln(out, "| issued by | cycles/s | this ÷ direct | cycle p50 | cycle p99 | p50: direct ÷ this |")
	fmt.Fprintln(out, "| --- | ---: | ---: | ---: | ---: | ---: |")
	p50 := func(r Result) float64 { return r.CycleP50us }
	for _, name := range names {
		r, ok := rs.summary("floor", name)
		if !ok {
			fmt.Fprintf(out, "| %s | error: %s |\n", name, r.Error)
			continue
		}
		speed, lat := "—", "—"
		if q, ok := rs.ratio("floor", name, names[0], "cycles/s", throughput); ok && name != names[0] {
			speed = q.String()
		}
		if q, ok := rs.ratio("floor", names[0], name, "cycle p50", p50); ok && name != names[0] {
			lat = q.String()
		}
		fmt.Fprintf(out, "| %s | %.0f | %s | %s | %s | %s |\n", name, r.PerSecond, speed,
			fmtRTT(r.CycleP50us, r.CycleP50RTT), fmtMicros(r.CycleP99us), lat)
	}
	fmt.Fprintln(out)
	fmt.Fprintf(out, "%s\nratios are medians of per-round ratios (min–max)\n\n", rs.rttNotes("floor"))
}

// indexes returns 0, 1, ..., n-1.
func indexes(n int) []int {
	v := make([]int, n)
	for i := range v {
		v[i] = i
	}
	return v
}
