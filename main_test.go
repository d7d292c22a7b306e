package relock_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/redistest"
)

// Shared servers, started once by TestMain. Tests that pause, kill or
// restart a server start their own.
var (
	standalone *redistest.Server
	cluster    *redistest.Cluster
)

func TestMain(m *testing.M) {
	permitHelper()     // exits in a permit-holder child process
	faultHelper()      // exits in a fault-suite child process
	campaignerHelper() // exits in an election campaigner child process
	if os.Getenv(helperEnv) != "" {
		os.Exit(helperProcess())
	}
	if os.Getenv(fairHelperEnv) != "" {
		os.Exit(fairHelperProcess())
	}
	os.Exit(run(m))
}

func run(m *testing.M) int {
	if err := redistest.RequireCluster(); err != nil {
		fmt.Fprintln(os.Stderr, "FAIL:", err)
		return 1
	}
	var err error
	if standalone, err = redistest.Start(redistest.Options{}); err != nil {
		fmt.Fprintln(os.Stderr, "FAIL: start redis-server:", err)
		return 1
	}
	defer standalone.Close()
	redisAddr = standalone.Addr
	if cluster, err = redistest.StartCluster(3, 1); err != nil {
		fmt.Fprintln(os.Stderr, "FAIL: start redis cluster:", err)
		return 1
	}
	defer cluster.Close()
	code := m.Run()
	_ = cluster.Close()
	_ = standalone.Close()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "FAIL: leaked goroutines:", err)
			code = 1
		}
	}
	return code
}

// topology is one Redis deployment the behaviour tests run against.
type topology struct {
	name string
	rdb  func(t testing.TB) redis.UniversalClient
}

func topologies() []topology {
	return []topology{
		{"standalone", func(t testing.TB) redis.UniversalClient { return closeLater(t, standalone.Client()) }},
		{"cluster", func(t testing.TB) redis.UniversalClient { return closeLater(t, cluster.Client()) }},
	}
}

func closeLater[C interface{ Close() error }](t testing.TB, c C) C {
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// forEach runs f as a parallel subtest on every topology.
func forEach(t *testing.T, f func(t *testing.T, top topology)) {
	for _, top := range topologies() {
		t.Run(top.name, func(t *testing.T) {
			t.Parallel()
			f(t, top)
		})
	}
}

// newClient returns a relock Client on a fresh go-redis client of top.
func (top topology) newClient(t testing.TB, opts ...relock.Option) *relock.Client {
	t.Helper()
	return newClient(t, top.rdb(t), opts...)
}

func newClient(t testing.TB, rdb redis.UniversalClient, opts ...relock.Option) *relock.Client {
	t.Helper()
	c, err := relock.New(rdb, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

var nameSeq atomic.Int64

// lockName returns a name no other test uses.
func lockName(t testing.TB) string {
	name := strings.NewReplacer("/", ":", " ", "_").Replace(t.Name())
	return fmt.Sprintf("test:%s:%d", name, nameSeq.Add(1))
}

func ctxTimeout(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// eventually polls cond until it holds or the bound passes. It is for
// conditions no signal reports, such as a server's view of subscriptions.
func eventually(t testing.TB, bound time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(bound)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", bound, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// waitDone waits for a lease's Done channel within a generous bound.
func waitDone(t testing.TB, l *relock.Lease, bound time.Duration) {
	t.Helper()
	select {
	case <-l.Done():
	case <-time.After(bound):
		t.Fatalf("lease of %q not done within %v", l.Name(), bound)
	}
}

// keysOf lists the keys of a lock name and its companion keys, on every
// master of the topology. The fencing counters, which are meant to stay,
// do not carry the name.
func keysOf(t testing.TB, rdb redis.UniversalClient, name string) []string {
	t.Helper()
	ctx := ctxTimeout(t, 5*time.Second)
	var found []string
	scan := func(ctx context.Context, c *redis.Client) error {
		for _, pattern := range []string{name, "*" + name + "*"} {
			keys, err := c.Keys(ctx, pattern).Result()
			if err != nil {
				return err
			}
			for _, k := range keys {
				if !contains(found, k) {
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

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
