// Package testkit holds what relock's test packages share: the Redis
// servers a test binary starts once (Main), the topologies behaviour tests
// run on, the Opener that says which client library the binary's Clients
// use (driver.go), and helpers for clients, names, waits and Redis state.
// The behaviour tests live beside the code; the whole-system suites (fault
// injection, hammers, soak) in systest/; the tests every client library
// runs in internal/conformance.
package testkit

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/redistest"
)

// Shared servers, started once by Main. Tests that pause, kill or restart
// a server start their own.
var (
	Standalone *redistest.Server
	Cluster    *redistest.Cluster
)

// Main starts the shared servers, runs the tests, stops the servers, and
// fails the run on goroutines left behind. A test binary's TestMain calls
// it: os.Exit(testkit.Main(m)). ready, if given, run once the servers are
// up, before the tests. The servers are the ones redistest.ServerEnv
// chooses; a missing binary fails the run with the command that installs it.
func Main(m *testing.M, ready ...func()) int {
	if err := redistest.RequireCluster(); err != nil {
		fmt.Fprintln(os.Stderr, "FAIL:", err)
		return 1
	}
	var err error
	if Standalone, err = redistest.Start(redistest.Options{}); err != nil {
		fmt.Fprintln(os.Stderr, "FAIL: start the server:", err)
		return 1
	}
	defer Standalone.Close()
	if Cluster, err = redistest.StartCluster(3, 1); err != nil {
		fmt.Fprintln(os.Stderr, "FAIL: start the cluster:", err)
		return 1
	}
	defer Cluster.Close()
	for _, f := range ready {
		f()
	}
	code := m.Run()
	_ = Cluster.Close()
	_ = Standalone.Close()
	if code == 0 {
		if err := redistest.Leaks(); err != nil {
			fmt.Fprintln(os.Stderr, "FAIL: leaked goroutines:", err)
			code = 1
		}
	}
	return code
}

// Topology is one Redis deployment the behaviour tests run against:
// its Clients come from the test binary's Opener, and RDB is a go-redis
// client for looking at the server's state.
type Topology struct {
	Name       string
	Deployment Deployment
	RDB        func(t testing.TB) redis.UniversalClient
}

// Topologies returns the shared standalone server and cluster.
func Topologies() []Topology {
	return []Topology{
		{Name: "standalone", Deployment: Deployment{Addr: Standalone.Addr},
			RDB: func(t testing.TB) redis.UniversalClient { return CloseLater(t, Standalone.Client()) }},
		{Name: "cluster", Deployment: Deployment{Addrs: Cluster.Addrs()},
			RDB: func(t testing.TB) redis.UniversalClient { return CloseLater(t, Cluster.Client()) }},
	}
}

// CloseLater closes c when the test ends, and returns it.
func CloseLater[C interface{ Close() error }](t testing.TB, c C) C {
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// ForEach runs f as a parallel subtest on every topology.
func ForEach(t *testing.T, f func(t *testing.T, top Topology)) {
	for _, top := range Topologies() {
		t.Run(top.Name, func(t *testing.T) {
			t.Parallel()
			f(t, top)
		})
	}
}

// NewClient returns a relock Client of top on a fresh client of the test
// binary's client library (see SetOpener).
func (top Topology) NewClient(t testing.TB, opts ...relock.Option) *relock.Client {
	t.Helper()
	return top.Deployment.Open(t, opts...)
}

// NewClients returns n relock Clients of top with opts, each on its own
// client of the test binary's client library, closed when the test ends.
func (top Topology) NewClients(t testing.TB, n int, opts ...relock.Option) []*relock.Client {
	t.Helper()
	clients := make([]*relock.Client, n)
	for i := range clients {
		clients[i] = top.NewClient(t, opts...)
	}
	return clients
}

// CountingClient returns a relock Client of top, on a fresh client of the
// test binary's client library, whose calls of script (a file name, see
// CountCalls) are counted.
func (top Topology) CountingClient(t testing.TB, script string, opts ...relock.Option) (*relock.Client, *CountCalls) {
	t.Helper()
	calls := &CountCalls{Script: script}
	return NewClientOn(t, calls.Driver(Open(t, top.Deployment)), opts...), calls
}

// NewClient returns a relock Client on rdb, a go-redis client the test
// made for what only go-redis offers it (hooks, an ACL user), closed when
// the test ends. Tests that any client library must pass make their
// Clients from a Deployment instead (Topology.NewClient, Deployment.Open).
func NewClient(t testing.TB, rdb redis.UniversalClient, opts ...relock.Option) *relock.Client {
	t.Helper()
	c, err := relock.New(rdb, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

var nameSeq atomic.Int64

// LockName returns a name no other test uses.
func LockName(t testing.TB) string {
	name := strings.NewReplacer("/", ":", " ", "_").Replace(t.Name())
	return fmt.Sprintf("test:%s:%d", name, nameSeq.Add(1))
}

// CtxTimeout returns a context that ends after d or with the test.
func CtxTimeout(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// Eventually polls cond until it holds or the bound passes. It is for
// conditions no signal reports, such as a server's view of subscriptions.
func Eventually(t testing.TB, bound time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(bound)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", bound, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// WaitDone waits for a lease's Done channel within a generous bound.
func WaitDone(t testing.TB, l *relock.Lease, bound time.Duration) {
	t.Helper()
	select {
	case <-l.Done():
	case <-time.After(bound):
		t.Fatalf("lease of %q not done within %v", l.Name(), bound)
	}
}

// KeysOf lists the keys of a lock name and its companion keys, on every
// master of the topology. The fencing counters, which are meant to stay,
// do not carry the name.
func KeysOf(t testing.TB, rdb redis.UniversalClient, name string) []string {
	t.Helper()
	ctx := CtxTimeout(t, 5*time.Second)
	var found []string
	scan := func(ctx context.Context, c *redis.Client) error {
		for _, pattern := range []string{name, "*" + name + "*"} {
			keys, err := c.Keys(ctx, pattern).Result()
			if err != nil {
				return err
			}
			for _, k := range keys {
				if !Contains(found, k) {
					found = append(found, k)
				}
			}
		}
		return nil
	}
	var err error
	if cc, ok := rdb.(*redis.ClusterClient); ok {
		var mu = make(chan struct{}, 1)
		err = cc.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error {
			mu <- struct{}{}
			defer func() { <-mu }()
			return scan(ctx, c)
		})
	} else {
		err = scan(ctx, rdb.(*redis.Client))
	}
	if err != nil {
		t.Fatal(err)
	}
	return found
}

// Contains reports whether list holds s.
func Contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// Soaking reports whether the suites run long: RELOCK_SOAK set to
// anything but "" or "0".
func Soaking() bool {
	v := os.Getenv("RELOCK_SOAK")
	return v != "" && v != "0"
}

// Rounds returns quick normally and soak under RELOCK_SOAK.
func Rounds(quick, soak int) int {
	if Soaking() {
		return soak
	}
	return quick
}

// Safety logs one line of the safety report that docs/safety.md
// tabulates: "SAFETY scenario=... key=value ...".
func Safety(t testing.TB, scenario string, kv ...any) {
	t.Helper()
	var b strings.Builder
	fmt.Fprintf(&b, "SAFETY scenario=%s", scenario)
	for i := 0; i+1 < len(kv); i += 2 {
		fmt.Fprintf(&b, " %v=%v", kv[i], kv[i+1])
	}
	t.Log(b.String())
}
