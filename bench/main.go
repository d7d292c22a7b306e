// Command bench compares relock with redsync, bsm/redislock and
// rueidislock on the workloads of DESIGN.md section 7, side by side in
// one run against one Redis server, and judges relock against its targets.
// relock's FairMutex and RWMutex run every workload next to its Mutex; a
// read-heavy workload compares a read lock with exclusive locks, and a
// semaphore workload measures relock's Semaphore.
//
// Usage:
//
//	go run . [-d 5s] [-redis host:port] [-libs relock,redsync] [-workloads serial,onekey] [-json out.json]
//
// Without -redis it starts its own redis-server on a free loopback port.
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
	// Duration is the measured window per library per workload.
	Duration string `json:"duration"`
	// Results holds one entry per library per workload.
	Results []Result `json:"results"`
	// Targets is relock's standing against DESIGN.md section 7.
	Targets []Target `json:"targets"`
}

func main() { os.Exit(run()) }

func run() int {
	d := flag.Duration("d", 5*time.Second, "measured time per workload per library")
	warmup := flag.Duration("warmup", 500*time.Millisecond, "unmeasured warm-up before each measurement")
	addr := flag.String("redis", "", "use the Redis server at `host:port` instead of starting one")
	libFlag := flag.String("libs", names(len(libraries), func(i int) string { return libraries[i].name }), "comma-separated `libraries` to run")
	wlFlag := flag.String("workloads", names(len(workloads), func(i int) string { return workloads[i].name }), "comma-separated `workloads` to run")
	jsonOut := flag.String("json", "", "also write the results as JSON to `file`")
	flag.Parse()

	libs, err := subset(*libFlag, len(libraries), func(i int) string { return libraries[i].name })
	if err == nil {
		_, err = subset(*wlFlag, len(workloads), func(i int) string { return workloads[i].name })
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
	}
	out := os.Stdout
	fmt.Fprintf(out, "%s, GOMAXPROCS=%d, Redis %s at %s, %s per library per workload\n",
		rep.Go, rep.GOMAXPROCS, rep.Redis, srv.addr, rep.Duration)
	fmt.Fprintln(out, versionLine(rep.Versions))
	fmt.Fprintln(out)

	runID := randomID()
	rs := results{}
	failed := false
	for _, w := range workloads {
		if !slices.Contains(strings.Split(*wlFlag, ","), w.name) {
			continue
		}
		for _, lib := range libraries {
			if !slices.Contains(libs, lib.name) {
				continue
			}
			if w.permits > 0 && lib.own && lib.name != "relock" {
				continue // relock's Semaphore is measured once, as relock
			}
			if ctx.Err() != nil {
				fmt.Fprintln(os.Stderr, "bench: interrupted")
				return 1
			}
			fmt.Fprintf(os.Stderr, "running %s / %s ...\n", w.name, lib.name)
			r := measure(ctx, srv, lib.name, lib.open, w, runID, *d, *warmup)
			if r.Unsupported != "" {
				fmt.Fprintf(os.Stderr, "  n/a: %s\n", r.Unsupported)
			}
			if r.Error != "" {
				failed = true
				fmt.Fprintf(os.Stderr, "  %s / %s failed: %s\n", w.name, lib.name, r.Error)
			}
			rs.add(r)
			rep.Results = append(rep.Results, r)
		}
		printTable(out, rs, w, libs)
	}
	rep.Targets = judge(rs, libs)
	printTargets(out, rep.Targets)

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
			"github.com/redis/rueidis", "github.com/redis/go-redis/v9":
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
