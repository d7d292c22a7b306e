package relock_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/internal/testkit"
)

// TestReplicaSyncStandaloneOff: on a server without replicas, replica sync
// is off by default and an uncontended cycle costs exactly two calls.
func TestReplicaSyncStandaloneOff(t *testing.T) {
	t.Parallel()
	var log rsLog
	c := syncedClient(t, redistest.Standalone(t), &log)
	m := c.Mutex(testkit.LockName(t))
	ctx := testkit.CtxTimeout(t, 10*time.Second)
	// The Client's first reads of the server (INFO replication, CONFIG GET)
	// run in the background after New: wait for them, and load the scripts.
	testkit.Eventually(t, 5*time.Second, "the first reads", func() bool { return log.count("info") == 1 && log.count("config") == 1 })
	l, err := m.Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	log.reset()
	const cycles = 20
	for range cycles {
		l, err := m.Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := l.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	}
	trips := log.all()
	if len(trips) != 2*cycles {
		t.Errorf("%d round trips for %d cycles, want %d", len(trips), cycles, 2*cycles)
	}
	for _, s := range trips {
		if n := s.names(); len(n) != 1 || n[0] != "evalsha" {
			t.Fatalf("round trip %v, want one EVALSHA", n)
		}
	}
}

// TestReplicaSyncCluster: on a cluster with a replica per master, replica
// sync is on by default, each acquisition's WAIT goes to the master of its
// key's slot in the same pipeline, and locks across slots work.
func TestReplicaSyncCluster(t *testing.T) {
	t.Parallel()
	c, cc, log := clusterWithLog(t)
	ctx := testkit.CtxTimeout(t, 20*time.Second)
	var locks []relock.Locker
	masters := map[string]bool{}
	for i := range 6 {
		// Hash tags of slots 0 and 12739: the first and last master's.
		m := c.Mutex(fmt.Sprintf("%s:{%s}:%d", testkit.LockName(t), []string{"1bz", "za2"}[i%2], i))
		locks = append(locks, m)
		log.reset()
		l, err := m.Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		slot, err := cc.ClusterKeySlot(ctx, m.Name()).Result()
		if err != nil {
			t.Fatal(err)
		}
		master, err := testkit.Cluster.MasterForSlot(ctx, int(slot))
		if err != nil {
			t.Fatal(err)
		}
		masters[master.Addr] = true
		trips := lockTrips(log)
		if len(trips) == 0 {
			t.Fatal("no round trip carried lock.lua")
		}
		for _, trip := range trips {
			if got := strings.Join(trip.names(), " "); got != "evalsha wait" && got != "eval wait" || trip.node != master.Addr {
				t.Errorf("%q sent to %s, want \"evalsha wait\" to the slot's master %s", got, trip.node, master.Addr)
			}
		}
		if err := l.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if len(masters) < 2 {
		t.Fatalf("the names hashed to %d masters; pick others", len(masters))
	}
	l, err := relock.Multi(locks...).Lock(ctx)
	if err != nil {
		t.Fatalf("a MultiLock across slots: %v", err)
	}
	if err := l.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestReplicaSyncRefused: a server that refuses WAIT (renamed away, as
// managed services do) fails lock calls with ErrReplicaSync wrapping its
// error, or, with Fallback, is used without replica sync after one
// warning. WAITAOF, which Redis before 7.2 does not know, likewise.
func TestReplicaSyncRefused(t *testing.T) {
	t.Parallel()
	srv := redistest.Standalone(t, redistest.Options{Args: []string{`rename-command WAIT ""`}})
	ctx := testkit.CtxTimeout(t, 20*time.Second)
	aof := testkit.Standalone
	if major, minor := rsVersion(t, testkit.Standalone); major > 7 || major == 7 && minor >= 2 {
		aof = redistest.Standalone(t, redistest.Options{Args: []string{`rename-command WAITAOF ""`}})
	}
	for _, tc := range []struct {
		name string
		srv  *redistest.Server
		rs   relock.ReplicaSync
	}{
		{"WAIT", srv, relock.ReplicaSync{Replicas: 1}},
		{"WAITAOF", aof, relock.ReplicaSync{Replicas: 1, AOF: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var sink rsSink
			c := syncedClient(t, tc.srv, nil, relock.WithReplicaSync(tc.rs), sink.logger())
			m := c.Mutex(testkit.LockName(t))
			_, err := m.Lock(ctx)
			if !errors.Is(err, relock.ErrReplicaSync) || !strings.Contains(err.Error(), "unknown command") {
				t.Fatalf("Lock = %v, want ErrReplicaSync wrapping the server's refusal", err)
			}
			if keys := testkit.KeysOf(t, testkit.CloseLater(t, tc.srv.Client()), m.Name()); len(keys) != 0 {
				t.Fatalf("keys left behind: %v", keys)
			}

			sink = rsSink{}
			rs := tc.rs
			rs.Fallback = true
			c = syncedClient(t, tc.srv, nil, relock.WithReplicaSync(rs), sink.logger())
			for range 2 {
				l, err := c.Mutex(testkit.LockName(t)).Lock(ctx)
				if err != nil {
					t.Fatalf("Lock with Fallback: %v", err)
				}
				if err := l.Unlock(ctx); err != nil {
					t.Fatal(err)
				}
			}
			if n := strings.Count(sink.String(), "refuses "+tc.name); n != 1 {
				t.Errorf("%d warnings of the refusal, want 1:\n%s", n, sink.String())
			}
		})
	}
}

// TestReplicaSyncOptions: invalid settings are refused by New.
func TestReplicaSyncOptions(t *testing.T) {
	t.Parallel()
	rdb := testkit.CloseLater(t, testkit.Standalone.Client())
	for _, opts := range [][]relock.Option{
		{relock.WithReplicaSync(relock.ReplicaSync{Replicas: -1})},
		{relock.WithReplicaSync(relock.ReplicaSync{Timeout: -time.Second})},
		{relock.WithReplicaSync(relock.ReplicaSync{Timeout: time.Microsecond})},
		{relock.WithReplicaSync(relock.ReplicaSync{Timeout: 5 * time.Second})},                                      // past the read timeout
		{relock.WithWatchdogTimeout(time.Second), relock.WithReplicaSync(relock.ReplicaSync{Timeout: time.Second})}, // past the renewal interval
	} {
		if c, err := relock.New(rdb, opts...); !errors.Is(err, relock.ErrInvalidOption) {
			if c != nil {
				_ = c.Close()
			}
			t.Errorf("New = %v, want ErrInvalidOption", err)
		}
	}
	ring := redis.NewRing(&redis.RingOptions{Addrs: map[string]string{"a": testkit.Standalone.Addr}})
	defer ring.Close()
	if _, err := relock.New(ring, relock.WithReplicaSync(relock.ReplicaSync{})); !errors.Is(err, relock.ErrUnsupportedClient) {
		t.Errorf("New(ring) = %v, want ErrUnsupportedClient", err)
	}
}
