package redistest

import (
	"fmt"
	"os"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// Standalone starts a server for the test, closes it when the test ends and
// fails the test if it cannot start (including when Redis is not
// installed). At most one Options may be given.
func Standalone(t testing.TB, opts ...Options) *Server {
	t.Helper()
	if len(opts) > 1 {
		t.Fatalf("redistest.Standalone: at most one Options, got %d", len(opts))
	}
	var o Options
	if len(opts) == 1 {
		o = opts[0]
	}
	s, err := Start(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// NewReplicated starts a master with the given number of replicas for the
// test, closes them when the test ends and fails the test if they cannot
// start.
func NewReplicated(t testing.TB, replicas int) *Replicated {
	t.Helper()
	r, err := StartReplicated(replicas)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Close() })
	return r
}

// NewSentinel starts a sentinel-managed group for the test, closes it when
// the test ends and fails the test if it cannot start.
func NewSentinel(t testing.TB) *Sentinel {
	t.Helper()
	s, err := StartSentinel()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// NewCluster starts a Redis Cluster for the test, closes it when the test
// ends and fails the test if it cannot start.
func NewCluster(t testing.TB, masters, replicasPerMaster int) *Cluster {
	t.Helper()
	c, err := StartCluster(masters, replicasPerMaster)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// NewMasters starts k independent masters for the test, closes them when
// the test ends and fails the test if they cannot start.
func NewMasters(t testing.TB, k int) Masters {
	t.Helper()
	m, err := StartMasters(k)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Close() })
	return m
}

// Main runs a test package's tests against one standalone server: it fails
// with the install command when the chosen server is missing, starts the
// server, hands it to use before the tests run, calls the cleanup use
// returns (if any) and closes the server afterwards, and fails the run if
// goroutines are left over. Call it from TestMain:
//
//	func TestMain(m *testing.M) {
//		os.Exit(redistest.Main(m, func(s *redistest.Server) func() { srv = s; return nil }))
//	}
func Main(m *testing.M, use func(*Server) (cleanup func())) int {
	if err := Require(); err != nil {
		fmt.Fprintln(os.Stderr, "FAIL:", err)
		return 1
	}
	s, err := Start(Options{})
	if err != nil {
		fmt.Fprintln(os.Stderr, "FAIL: start the server:", err)
		return 1
	}
	cleanup := use(s)
	code := m.Run()
	if cleanup != nil {
		cleanup()
	}
	_ = s.Close()
	if code == 0 {
		if err := Leaks(); err != nil {
			fmt.Fprintln(os.Stderr, "FAIL: leaked goroutines:", err)
			code = 1
		}
	}
	return code
}

// Leaks reports the goroutines still running at the end of a test binary,
// or nil. A go-redis pool whose dials failed keeps one goroutine probing
// the server that sleeps a second between probes and returns at the first
// probe after the pool is closed, so the check looks again for up to 5s
// before it reports; a goroutine that is really leaked is still there.
func Leaks() error {
	deadline := time.Now().Add(5 * time.Second)
	for {
		err := goleak.Find()
		if err == nil || time.Now().After(deadline) {
			return err
		}
		time.Sleep(100 * time.Millisecond)
	}
}
