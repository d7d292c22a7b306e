package main

// The server cost experiment: what each library's uncontended lock+unlock
// cycle costs the Redis server, apart from the library's client. The
// bench first records the commands each library sends for one cycle on
// each of 16 keys (a go-redis hook, recorder below), then replays them
// with a plain go-redis client:
//
//   - pipelined: the 16 keys' lock commands in one pipeline, then their
//     unlock commands in another, as a client that batches its calls
//     sends them. The server's CPU time per cycle bounds how many cycles
//     a second any client can get from one server.
//   - serial: one key's commands one at a time, next to the library's
//     own Lock and unlock on that key in the same round. Library ÷
//     replayed is what the library's client code costs beyond its
//     commands' round trips.
//
// Two baselines run with them: two EVALSHAs of `return 1` per cycle with
// no keys or arguments (a script call's floor), and the same with the
// keys and arguments relock's two calls carry (what passing them costs
// the server before its scripts do anything). rueidislock is left out:
// its release is sent by its own goroutine after the unlock call returns,
// so no window holds exactly one cycle's commands.

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// serverKeys is how many keys a pipelined cycle locks and unlocks.
const serverKeys = 16

// serverLibs are the libraries the experiment records.
var serverLibs = []string{"relock", "redsync", "redislock"}

// The baselines' mode names.
const (
	modeReturn1    = "return 1"
	modeRelockArgs = "return 1, relock's arguments"
)

// recording is switched on around the calls whose commands the
// experiment records; every go-redis client the bench makes feeds it.
var recording recorder

// recorder collects the commands the bench's go-redis clients send while
// it is on.
type recorder struct {
	on   atomic.Bool
	mu   sync.Mutex
	cmds [][]any
}

// start begins a recording; stop ends it and returns the commands.
func (r *recorder) start() {
	r.mu.Lock()
	r.cmds = nil
	r.mu.Unlock()
	r.on.Store(true)
}

func (r *recorder) stop() [][]any {
	r.on.Store(false)
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.cmds
}

func (r *recorder) add(cmds ...redis.Cmder) {
	if !r.on.Load() {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, c := range cmds {
		switch c.Name() {
		case "hello", "client", "auth", "select":
			// A new connection's handshake, not the call's.
		default:
			r.cmds = append(r.cmds, slices.Clone(c.Args()))
		}
	}
}

// DialHook implements redis.Hook; dials are not recorded.
func (r *recorder) DialHook(next redis.DialHook) redis.DialHook { return next }

// ProcessHook implements redis.Hook, recording one command.
func (r *recorder) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		r.add(cmd)
		return next(ctx, cmd)
	}
}

// ProcessPipelineHook implements redis.Hook, recording every command of
// the pipeline.
func (r *recorder) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		r.add(cmds...)
		return next(ctx, cmds)
	}
}

// cycleCmds is one key's recorded cycle: the commands of the lock call,
// then those of the unlock call, and the name the library was given.
type cycleCmds struct {
	key          string
	lock, unlock [][]any
}

// serverMode is one thing the experiment measures: a library's recorded
// cycles, or a baseline.
type serverMode struct {
	name   string
	cycles []cycleCmds // one per key
	open   opener      // the library, for its serial turn; nil for a baseline
}

// recordCycles runs one lock+unlock cycle of library name on each of
// serverKeys keys, after one unrecorded cycle on each (which loads its
// scripts and sets up its pool), and returns the commands of the second.
func recordCycles(ctx context.Context, s *server, name, base string) ([]cycleCmds, error) {
	open, _ := libraryNamed(name)
	lib, err := open(ctx, s, workloads[0])
	if err != nil {
		return nil, err
	}
	defer lib.close()
	cycles := make([]cycleCmds, serverKeys)
	for i := range cycles {
		cycles[i].key = fmt.Sprintf("%s:%d", base, i)
		lk := lib.locker(cycles[i].key)
		for pass := range 2 {
			if pass == 1 {
				recording.start()
			}
			unlock, err := lk.Lock(ctx)
			if pass == 1 {
				cycles[i].lock = recording.stop()
				recording.start()
			}
			if err == nil {
				err = unlock(ctx)
			}
			if pass == 1 {
				cycles[i].unlock = recording.stop()
			}
			if err != nil {
				return nil, err
			}
		}
		if len(cycles[i].lock) == 0 || len(cycles[i].unlock) == 0 {
			return nil, fmt.Errorf("%s: no command recorded for a lock or an unlock", name)
		}
	}
	return cycles, nil
}

// baselines returns the two baseline modes: relock's recorded calls with
// the script replaced by `return 1`, and `return 1` with nothing.
func baselines(ctx context.Context, rdb *redis.Client, relock []cycleCmds) ([]serverMode, error) {
	sha, err := rdb.ScriptLoad(ctx, "return 1").Result()
	if err != nil {
		return nil, err
	}
	bare := []any{"evalsha", sha, 0}
	plain := make([]cycleCmds, serverKeys)
	args := make([]cycleCmds, serverKeys)
	swap := func(cmds [][]any) [][]any {
		out := make([][]any, len(cmds))
		for i, c := range cmds {
			c = slices.Clone(c)
			if n, _ := c[0].(string); strings.EqualFold(n, "evalsha") || strings.EqualFold(n, "eval") {
				c[0], c[1] = "evalsha", sha
			}
			out[i] = c
		}
		return out
	}
	for i := range plain {
		plain[i] = cycleCmds{lock: [][]any{bare}, unlock: [][]any{bare}}
		args[i] = cycleCmds{lock: swap(relock[i].lock), unlock: swap(relock[i].unlock)}
	}
	return []serverMode{{name: modeRelockArgs, cycles: args}, {name: modeReturn1, cycles: plain}}, nil
}

// serverTurn is one measurement of a round: its name in the tables, and
// the function that takes it.
type serverTurn struct {
	name string
	run  func() Result
}

// runServerCost runs the experiment for rep.Rounds rounds, each mode for
// d per round and part after warmup, prints its tables and adds its
// results to rep (workloads "server-pipelined" and "server-serial"). It
// reports whether a turn failed; the error is for a run that could not
// go on.
func runServerCost(ctx context.Context, out io.Writer, s *server, rep *Report, d, warmup time.Duration) (failed bool, err error) {
	rdb := newGoRedis(s.addr, nil)
	defer rdb.Close()
	base := "bench:" + randomID() + ":server"
	var modes []serverMode
	for _, name := range serverLibs {
		cycles, err := recordCycles(ctx, s, name, base+":"+name)
		if err != nil {
			return false, fmt.Errorf("recording %s: %w", name, err)
		}
		open, _ := libraryNamed(name)
		modes = append(modes, serverMode{name: name, cycles: cycles, open: open})
	}
	extra, err := baselines(ctx, rdb, modes[0].cycles)
	if err != nil {
		return false, err
	}
	modes = append(modes, extra...)

	rs := runResults{}
	for round := range rep.Rounds {
		for _, m := range rotated(modes, round) {
			turns := []serverTurn{{m.name, func() Result { return pipelinedTurn(ctx, s, rdb, m, d, warmup) }}}
			if m.open != nil {
				turns = append(turns,
					serverTurn{m.name + " replayed", func() Result { return serialTurn(ctx, s, rdb, m, nil, d, warmup) }},
					serverTurn{m.name + " library", func() Result { return serialTurn(ctx, s, rdb, m, m.open, d, warmup) }})
			}
			for _, t := range turns {
				r, err := takeTurn(ctx, s.addr, rep, rs, round, "server / "+t.name, t.run)
				if err != nil {
					return failed, err
				}
				failed = failed || r.Error != ""
			}
		}
	}
	printServerCost(out, rs, modes)
	for _, w := range []string{"server-pipelined", "server-serial"} {
		for _, m := range modes {
			for _, name := range []string{m.name, m.name + " replayed", m.name + " library"} {
				if r, ok := rs.summary(w, name); ok {
					rep.Summaries = append(rep.Summaries, r)
				}
			}
		}
	}
	return failed, nil
}

// pipelinedTurn replays m's cycles on all its keys, in a pipeline of
// lock commands and then a pipeline of unlock commands, for d after
// warmup.
func pipelinedTurn(ctx context.Context, s *server, rdb *redis.Client, m serverMode, d, warmup time.Duration) Result {
	r := Result{Library: m.name, Workload: "server-pipelined"}
	run := func(part func(cycleCmds) [][]any) error {
		pipe := rdb.Pipeline()
		for _, c := range m.cycles {
			for _, args := range part(c) {
				pipe.Do(ctx, args...)
			}
		}
		cmds, err := pipe.Exec(ctx)
		for _, c := range cmds {
			if c.Err() != nil && c.Err() != redis.Nil {
				return fmt.Errorf("%s: %w", c.Name(), c.Err())
			}
		}
		if err == redis.Nil {
			err = nil
		}
		return err
	}
	cycle := func() error {
		if err := run(func(c cycleCmds) [][]any { return c.lock }); err != nil {
			return err
		}
		return run(func(c cycleCmds) [][]any { return c.unlock })
	}
	n, err := timed(ctx, s, &r, cycle, d, warmup)
	if err != nil {
		r.Error = err.Error()
		return r
	}
	finish(&r, n*int64(len(m.cycles)), nil)
	r.CallsPerCycle = float64(len(m.cycles[0].lock) + len(m.cycles[0].unlock))
	return r
}

// serialTurn runs cycles on m's first key one after the other for d after
// warmup: replaying its recorded commands one at a time when open is
// nil, or by the library's own Lock and unlock.
func serialTurn(ctx context.Context, s *server, rdb *redis.Client, m serverMode, open opener, d, warmup time.Duration) Result {
	r := Result{Library: m.name + " replayed", Workload: "server-serial"}
	c := m.cycles[0]
	cycle := func() error {
		for _, args := range append(slices.Clip(c.lock), c.unlock...) {
			if err := rdb.Do(ctx, args...).Err(); err != nil && err != redis.Nil {
				return err
			}
		}
		return nil
	}
	if open != nil {
		r.Library = m.name + " library"
		lib, err := open(ctx, s, workloads[0])
		if err != nil {
			r.Error = err.Error()
			return r
		}
		defer lib.close()
		lk := lib.locker(c.key) // the key its cycles were recorded on
		cycle = func() error {
			unlock, err := lk.Lock(ctx)
			if err != nil {
				return err
			}
			return unlock(ctx)
		}
	}
	var lat []time.Duration
	timedCycle := func() error {
		t := time.Now()
		err := cycle()
		lat = append(lat, time.Since(t))
		return err
	}
	n, err := timed(ctx, s, &r, timedCycle, d, warmup)
	if err != nil {
		r.Error = err.Error()
		return r
	}
	finish(&r, n, lat[len(lat)-int(n):])
	r.CallsPerCycle = float64(len(c.lock) + len(c.unlock))
	return r
}

// timed runs cycle for warmup, then for d, and fills r's window, server
// commands and server CPU; it returns how many cycles the window had.
func timed(ctx context.Context, s *server, r *Result, cycle func() error, d, warmup time.Duration) (int64, error) {
	for end := time.Now().Add(warmup); time.Now().Before(end); {
		if err := cycle(); err != nil {
			return 0, err
		}
	}
	before, err := s.usage(ctx)
	if err != nil {
		return 0, err
	}
	var n int64
	start := time.Now()
	for end := start.Add(d); time.Now().Before(end); n++ {
		if err := cycle(); err != nil {
			return 0, err
		}
	}
	r.Seconds = time.Since(start).Seconds()
	after, err := s.usage(ctx)
	if err != nil {
		return 0, err
	}
	u := after.sub(before)
	r.ServerCmdsPerCycle = float64(u.cmds)
	r.ServerCPUPerCycleUs = micros(u.cpu)
	return n, nil
}

// finish divides r's server figures by its cycles and sets its rate and,
// when lat is given, its cycle percentiles.
func finish(r *Result, cycles int64, lat []time.Duration) {
	r.Cycles = cycles
	r.PerSecond = float64(cycles) / r.Seconds
	r.ServerCmdsPerCycle /= float64(cycles)
	r.ServerCPUPerCycleUs /= float64(cycles)
	if len(lat) > 0 {
		r.CycleP50us = micros(percentile(lat, 0.50))
		r.CycleP99us = micros(percentile(lat, 0.99))
	}
}

// printServerCost writes the experiment's two tables.
func printServerCost(out io.Writer, rs runResults, modes []serverMode) {
	cpu := func(r Result) float64 { return r.ServerCPUPerCycleUs }
	fmt.Fprintf(out, "### %s\n\n", heading(fmt.Sprintf("server cost: each library's commands for one lock+unlock cycle on %d keys, "+
		"replayed in a pipeline of locks, then one of unlocks", serverKeys)))
	fmt.Fprintln(out, "| commands of | cycles/s | server CPU/cycle | this ÷ relock's, server CPU | calls/cycle | server cmds/cycle |")
	fmt.Fprintln(out, "| --- | ---: | ---: | ---: | ---: | ---: |")
	for _, m := range modes {
		r, ok := rs.summary("server-pipelined", m.name)
		if !ok {
			fmt.Fprintf(out, "| %s | error: %s |\n", m.name, r.Error)
			continue
		}
		q := "—"
		if x, ok := rs.ratio("server-pipelined", m.name, modes[0].name, "server CPU/cycle", cpu); ok && m.name != modes[0].name {
			q = x.String()
		}
		fmt.Fprintf(out, "| %s | %.0f | %s | %s | %.0f | %.2f |\n", m.name, r.PerSecond, fmtMicros(r.ServerCPUPerCycleUs),
			q, r.CallsPerCycle, r.ServerCmdsPerCycle)
	}
	fmt.Fprintln(out)
	fmt.Fprintf(out, "### %s\n", heading("server cost, serial: one key's commands replayed one at a time, and the library's own lock+unlock on that key"))
	fmt.Fprintln(out)
	fmt.Fprintln(out, "| library | replayed cycles/s | library cycles/s | library ÷ replayed | replayed p50 | library p50 | server CPU/cycle, library |")
	fmt.Fprintln(out, "| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
	for _, m := range modes {
		if m.open == nil {
			continue
		}
		rep, ok1 := rs.summary("server-serial", m.name+" replayed")
		lib, ok2 := rs.summary("server-serial", m.name+" library")
		if !ok1 || !ok2 {
			fmt.Fprintf(out, "| %s | error: %s%s |\n", m.name, rep.Error, lib.Error)
			continue
		}
		q := "—"
		if x, ok := rs.ratio("server-serial", m.name+" library", m.name+" replayed", "cycles/s", throughput); ok {
			q = x.String()
		}
		fmt.Fprintf(out, "| %s | %.0f | %.0f | %s | %s | %s | %s |\n", m.name, rep.PerSecond, lib.PerSecond, q,
			fmtRTT(rep.CycleP50us, rep.CycleP50RTT), fmtRTT(lib.CycleP50us, lib.CycleP50RTT), fmtMicros(lib.ServerCPUPerCycleUs))
	}
	fmt.Fprintln(out)
	fmt.Fprintf(out, "%s\nratios are medians of per-round ratios (min–max)\n\n", rs.rttNotes("server-serial"))
}
