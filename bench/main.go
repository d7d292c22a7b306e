// Command bench compares relock with redsync, bsm/redislock, rueidislock
// and valkeylock on the workloads of DESIGN.md section 7, side by side in
// one run against one Redis server, and judges relock against its targets.
// relock's FairMutex and RWMutex run every workload next to its Mutex, and
// so does its Mutex on a rueidis and on a valkey-go client (the adapter
// modules), set beside the peers on the same client; a read-heavy workload
// compares a read lock with exclusive locks, and a semaphore workload
// measures relock's Semaphore.
//
// Every workload runs in rounds: in each round every library takes its
// turn, and figures are medians over the rounds, ratios medians of the
// ratios within a round. The cross-process workload starts the binary
// again as worker processes (procs.go).
//
// Usage:
//
//	go run . [-d 2s] [-rounds 5] [-pool 128] [-redis host:port] [-rtt 2ms] [-libs relock,redsync] [-workloads serial,onekey] [-json out.json]
//	go run . -experiment floor [-d 2s] [-rounds 5] [-rtt 2ms]
//	go run . -experiment server [-d 2s] [-rounds 5] [-rtt 2ms]
//
// Without -redis it starts its own redis-server on a free loopback port.
// With -rtt every client connects through a proxy that delays each byte
// by half that in each direction, as a server in another zone would
// (delayproxy.go).
// README.md explains each column.
package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
	"syscall"
	"time"
)

// Report is what -json writes: the run's setting, every result and the
// targets.
type Report struct {
	// Go is the Go version and platform.
	Go string `json:"go"`
	// GOMAXPROCS is the number of CPUs the run could use.
	GOMAXPROCS int `json:"gomaxprocs"`
	// Redis is the server's version.
	Redis string `json:"redis"`
	// Versions maps each library module to its version.
	Versions map[string]string `json:"versions"`
	// Duration is the measured window of a turn: one library, one round.
	Duration string `json:"duration"`
	// Rounds is the number of rounds per workload.
	Rounds int `json:"rounds"`
	// Pool is the connection pool size of every client.
	Pool int `json:"pool"`
	// AddedRTT is what the delaying proxy adds to each round trip (-rtt);
	// empty when the clients connect to the server directly.
	AddedRTT string `json:"added_rtt,omitempty"`
	// Results holds one entry per library per workload per round.
	Results []Result `json:"results"`
	// Summaries holds one entry per library per workload: the medians
	// over the rounds, with Round the number of rounds that have figures.
	Summaries []Result `json:"summaries"`
	// Ratios holds relock's per-round throughput ratio to every other
	// library, per workload (relock-rw's on readheavy), and that of relock
	// on rueidis and on valkey-go to the peers on the same client.
	Ratios []Ratio `json:"ratios"`
	// Targets is relock's standing against DESIGN.md section 7.
	Targets []Target `json:"targets,omitempty"`
}

func main() {
	if os.Getenv(workerEnv) != "" {
		os.Exit(runWorkerProc())
	}
	if os.Getenv(proxyEnv) != "" {
		os.Exit(runProxyProc())
	}
	os.Exit(run())
}

// orderNote says how the libraries take turns in a round.
const orderNote = "in every round each library (or experiment mode) takes a turn, in -libs order " +
	"rotated left by one per round (round r starts with the (r mod n)-th)"

func run() int {
	d := flag.Duration("d", 2*time.Second, "measured time per library per round")
	warmup := flag.Duration("warmup", 300*time.Millisecond, "unmeasured warm-up before each measurement")
	rounds := flag.Int("rounds", 5, "rounds per workload; every library takes a turn in each")
	flag.IntVar(&poolSize, "pool", poolSize, "connection pool size of every client")
	addr := flag.String("redis", "", "use the Redis server at `host:port` instead of starting one")
	flag.DurationVar(&addedRTT, "rtt", 0, "connect every client through a proxy that adds `duration` to each round trip, half each way (delayproxy.go)")
	libFlag := flag.String("libs", names(len(libraries), func(i int) string { return libraries[i].name }), "comma-separated `libraries` to run")
	wlFlag := flag.String("workloads", names(len(workloads), func(i int) string { return workloads[i].name }), "comma-separated `workloads` to run")
	experiment := flag.String("experiment", "", "run an experiment instead of the workloads: `floor` (the serial floor, floor.go) or server (what a cycle costs the server, server.go)")
	jsonOut := flag.String("json", "", "also write the results as JSON to `file`")
	flag.Parse()

	libs, err := subset(*libFlag, len(libraries), func(i int) string { return libraries[i].name })
	var wls []string
	if err == nil {
		wls, err = subset(*wlFlag, len(workloads), func(i int) string { return workloads[i].name })
	}
	if err == nil && (*rounds < 1 || poolSize < 1) {
		err = errors.New("-rounds and -pool must be at least 1")
	}
	if err == nil && addedRTT < 0 {
		err = errors.New("-rtt must not be negative")
	}
	if err == nil && *experiment != "" && *experiment != "floor" && *experiment != "server" {
		err = fmt.Errorf("unknown experiment %q; there are: floor, server", *experiment)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		return 2
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var srv *server
	if *addr != "" {
		srv, err = dialServer(*addr)
	} else {
		srv, err = startServer()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		return 1
	}
	defer srv.stop()
	if addedRTT > 0 {
		if err := srv.delay(addedRTT); err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			return 1
		}
	}
	version, err := srv.version(ctx)
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		return 1
	}

	rep := Report{
		Go:         runtime.Version() + " " + runtime.GOOS + "/" + runtime.GOARCH,
		GOMAXPROCS: runtime.GOMAXPROCS(0),
		Redis:      version,
		Versions:   moduleVersions(),
		Duration:   d.String(),
		Rounds:     *rounds,
		Pool:       poolSize,
	}
	if addedRTT > 0 {
		rep.AddedRTT = addedRTT.String()
	}
	out := os.Stdout
	fmt.Fprintf(out, "%s, GOMAXPROCS=%d, Redis %s at %s\n", rep.Go, rep.GOMAXPROCS, rep.Redis, srv.redisAddr)
	if srv.proxy != nil {
		fmt.Fprintf(out, "every client connects through a delaying proxy at %s, a process of its own: %s added to each round trip, "+
			"%s each way, to every byte read\n", srv.addr, addedRTT, addedRTT/2)
	}
	fmt.Fprintln(out, versionLine(rep.Versions))
	fmt.Fprintf(out, "%d rounds, %s per turn (after %s warm-up); %s\n", rep.Rounds, rep.Duration, *warmup, orderNote)
	fmt.Fprintf(out, "pool size %d for every client: go-redis PoolSize; rueidis and valkey-go BlockingPoolSize "+
		"(they pipeline other commands over their own 4 connections)\n\n", poolSize)

	var failed bool
	switch *experiment {
	case "floor":
		failed, err = runFloor(ctx, out, srv, &rep, *d, *warmup)
	case "server":
		failed, err = runServerCost(ctx, out, srv, &rep, *d, *warmup)
	default:
		failed, err = runWorkloads(ctx, out, srv, &rep, libs, wls, *d, *warmup)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		return 1
	}
	if *jsonOut != "" {
		b, _ := json.MarshalIndent(rep, "", "  ")
		if err := os.WriteFile(*jsonOut, append(b, '\n'), 0o644); err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			return 1
		}
	}
	if failed {
		return 1
	}
	return 0
}

// runWorkloads runs the rounds of every selected workload, prints a table
// per workload and the targets, and fills rep. It reports whether a
// measurement of relock failed; the error is for a run that could not go
// on.
func runWorkloads(ctx context.Context, out io.Writer, srv *server, rep *Report, libs, wls []string, d, warmup time.Duration) (failed bool, err error) {
	runID := randomID()
	rs := runResults{}
	for _, w := range workloads {
		if !slices.Contains(wls, w.name) {
			continue
		}
		var names []string
		for _, name := range libs {
			if takesTurn(name, w) {
				names = append(names, name)
			}
		}
		for round := range rep.Rounds {
			for _, name := range rotated(names, round) {
				if ctx.Err() != nil {
					return failed, errors.New("interrupted")
				}
				open, _ := libraryNamed(name)
				t := turn{lib: name, open: open, w: w, d: d, warmup: warmup,
					base: fmt.Sprintf("bench:%s:%s:%s", runID, name, w.name)}
				r, err := takeTurn(ctx, srv.addr, rep, rs, round, w.name+" / "+name, func() Result { return measure(ctx, srv, t) })
				if err != nil {
					return failed, err
				}
				if r.Error != "" {
					// A peer's failure is one of its results, in its table;
					// only relock's own fail the run.
					failed = failed || !isPeer(name)
					fmt.Fprintf(os.Stderr, "  %s / %s failed: %s\n", w.name, name, r.Error)
				}
			}
		}
		printTable(out, rs, w, names)
		for _, name := range names {
			if s, ok := rs.summary(w.name, name); ok {
				rep.Summaries = append(rep.Summaries, s)
			}
			if q, ok := rs.ratio(w.name, w.reference(), name, "cycles/s", throughput); ok && name != w.reference() {
				rep.Ratios = append(rep.Ratios, q)
			}
		}
		for _, p := range sameClient(w, names) {
			if q, ok := rs.ratio(w.name, p[0], p[1], "cycles/s", throughput); ok {
				rep.Ratios = append(rep.Ratios, q)
			}
		}
	}
	rep.Targets = judge(rs, libs)
	printTargets(out, rep.Targets)
	return failed, nil
}

// names joins n names with commas.
func names(n int, name func(int) string) string {
	all := make([]string, n)
	for i := range all {
		all[i] = name(i)
	}
	return strings.Join(all, ",")
}

// subset parses a comma-separated list and checks every entry is known.
func subset(list string, n int, name func(int) string) ([]string, error) {
	known := strings.Split(names(n, name), ",")
	var picked []string
	for _, s := range strings.Split(list, ",") {
		if s = strings.TrimSpace(s); s == "" {
			continue
		}
		if !slices.Contains(known, s) {
			return nil, fmt.Errorf("unknown name %q; choose from %s", s, strings.Join(known, ","))
		}
		picked = append(picked, s)
	}
	if len(picked) == 0 {
		return nil, errors.New("empty selection")
	}
	return picked, nil
}

// moduleVersions returns the versions of the modules being compared.
func moduleVersions() map[string]string {
	v := map[string]string{}
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return v
	}
	for _, m := range info.Deps {
		switch m.Path {
		case "github.com/relock-go/relock", "github.com/go-redsync/redsync/v4", "github.com/bsm/redislock",
			"github.com/redis/rueidis", "github.com/redis/go-redis/v9", "github.com/valkey-io/valkey-go",
			"github.com/relock-go/relock/relockrueidis", "github.com/relock-go/relock/relockvalkey":
			v[m.Path] = m.Version
			if m.Replace != nil {
				v[m.Path] = m.Replace.Path
			}
		}
	}
	return v
}

func versionLine(v map[string]string) string {
	keys := make([]string, 0, len(v))
	for k := range v {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = k + " " + v[k]
	}
	return strings.Join(parts, ", ")
}

// randomID names this run's keys, so runs never share a lock.
func randomID() string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
