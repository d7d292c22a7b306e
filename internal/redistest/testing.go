package redistest

import "testing"

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
