package relockrueidis

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/layout"
	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/internal/slots"
	"github.com/relock-go/relock/internal/testkit"
)

// newLocks returns a relock Client made by New on a rueidis client of d,
// closed when the test ends.
func newLocks(t testing.TB, d testkit.Deployment, opts ...relock.Option) *relock.Client {
	t.Helper()
	locks, err := New(client(t, d), opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = locks.Close() })
	return locks
}

// handOver checks a Mutex on two relock Clients: the first holds it,
// the second queues up and listens on its grant channel (subscribers
// counts a channel's subscribers where it is served), and obtains the
// mutex once the first unlocks. rdb observes the server.
func handOver(t *testing.T, a, b *relock.Client, rdb redis.UniversalClient, cluster bool, subscribers func(channel string) int64) {
	t.Helper()
	ctx := testkit.CtxTimeout(t, 30*time.Second)
	name := testkit.LockName(t)
	held, err := a.Mutex(name).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Mutex(name).TryLock(ctx); !errors.Is(err, relock.ErrNotAcquired) {
		t.Fatalf("TryLock of a held mutex: %v, want ErrNotAcquired", err)
	}
	got := testkit.LockAsync(t, ctx, b.Mutex(name).Lock)
	grants := grantChannel(t, rdb, name, cluster)
	testkit.Eventually(t, 10*time.Second, "the waiter listens on "+grants, func() bool { return subscribers(grants) == 1 })
	if err := held.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	var next *relock.Lease
	select {
	case next = <-got:
	case <-ctx.Done():
		t.Fatal("the waiter did not obtain the mutex")
	}
	if next == nil {
		t.Fatal("the waiter's Lock failed")
	}
	if err := next.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}

// grantChannel returns the grant channel of the one waiter that queues
// up on name: its Client's uuid begins its owner, the last part of its
// queue member ("<lease ms>|<kind>|<uuid>:<n>").
func grantChannel(t testing.TB, rdb redis.UniversalClient, name string, cluster bool) string {
	t.Helper()
	var q []string
	testkit.Eventually(t, 10*time.Second, "one waiter queued", func() bool {
		var err error
		q, err = rdb.ZRange(context.Background(), layout.Companion(layout.LockQueue, name), 0, -1).Result()
		if err != nil {
			t.Fatal(err)
		}
		return len(q) == 1
	})
	parts := strings.Split(q[0], "|")
	uuid, _, _ := strings.Cut(parts[len(parts)-1], ":")
	return layout.Grants(uuid, name, cluster)
}

// numSub counts s's subscribers of channel.
func numSub(t testing.TB, s *redistest.Server, channel string) int64 {
	t.Helper()
	n, err := testkit.CloseLater(t, s.Client()).PubSubNumSub(context.Background(), channel).Result()
	if err != nil {
		t.Fatal(err)
	}
	return n[channel]
}

// shardNumSub counts s's sharded subscribers of channel.
func shardNumSub(t testing.TB, s *redistest.Server, channel string) int64 {
	t.Helper()
	n, err := testkit.CloseLater(t, s.Client()).PubSubShardNumSub(context.Background(), channel).Result()
	if err != nil {
		t.Fatal(err)
	}
	return n[channel]
}

// TestStandalone: on one server, a Mutex is held, refused to another,
// handed over to a waiter woken by pub/sub, and released.
func TestStandalone(t *testing.T) {
	a := newLocks(t, testkit.Deployment{Addr: testkit.Standalone.Addr})
	b := newLocks(t, testkit.Deployment{Addr: testkit.Standalone.Addr})
	rdb := testkit.CloseLater(t, testkit.Standalone.Client())
	handOver(t, a, b, rdb, false, func(ch string) int64 { return numSub(t, testkit.Standalone, ch) })
}

// TestCluster: the same on a cluster, where the waiter listens on a
// sharded channel on the master of the lock's slot.
func TestCluster(t *testing.T) {
	a := newLocks(t, testkit.Deployment{Addrs: testkit.Cluster.Addrs()})
	b := newLocks(t, testkit.Deployment{Addrs: testkit.Cluster.Addrs()})
	rdb := testkit.CloseLater(t, testkit.Cluster.Client())
	handOver(t, a, b, rdb, true, func(ch string) int64 {
		m, err := testkit.Cluster.MasterForSlot(context.Background(), slots.Of(ch))
		if err != nil {
			t.Fatal(err)
		}
		return shardNumSub(t, m, ch)
	})
}

// TestClusterReshard: a lease taken before its slot moves to another
// master is released after the move, and a waiter that listened on the
// old master, whose subscription the move ended, is woken on the new one.
func TestClusterReshard(t *testing.T) {
	c := redistest.NewCluster(t, 3, 0)
	a := newLocks(t, testkit.Deployment{Addrs: c.Addrs()})
	b := newLocks(t, testkit.Deployment{Addrs: c.Addrs()})
	ctx := testkit.CtxTimeout(t, 60*time.Second)
	name := testkit.LockName(t)
	slot := slots.Of(name)
	held, err := a.Mutex(name).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got := testkit.LockAsync(t, ctx, b.Mutex(name).Lock)
	rdb := testkit.CloseLater(t, c.Client())
	grants := grantChannel(t, rdb, name, true)
	from, err := c.MasterForSlot(ctx, slot)
	if err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 10*time.Second, "the waiter listens on the slot's master", func() bool {
		return shardNumSub(t, from, grants) == 1
	})
	to := otherMaster(c, from)
	if err := c.MigrateSlot(ctx, slot, to); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 10*time.Second, "the waiter listens on the slot's new master", func() bool {
		return shardNumSub(t, to, grants) == 1
	})
	if err := held.Unlock(ctx); err != nil {
		t.Fatalf("unlock after the slot moved: %v", err)
	}
	var next *relock.Lease
	select {
	case next = <-got:
	case <-ctx.Done():
		t.Fatal("the waiter did not obtain the mutex after the slot moved")
	}
	if next == nil {
		t.Fatal("the waiter's Lock failed")
	}
	if err := next.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}

func otherMaster(c *redistest.Cluster, not *redistest.Server) *redistest.Server {
	for _, m := range c.Masters {
		if m != not {
			return m
		}
	}
	return nil
}

// TestReplicaSync: with replica sync on, an acquisition returns once the
// replica has it (the WAIT went on the connection that wrote), and one
// that asks for more replicas than there are fails with ErrReplicaSync.
func TestReplicaSync(t *testing.T) {
	r := redistest.NewReplicated(t, 1)
	ctx := testkit.CtxTimeout(t, 30*time.Second)
	waitAcking(t, r.Master, 1)
	locks := newLocks(t, testkit.Deployment{Addr: r.Master.Addr}, relock.WithReplicaSync(relock.ReplicaSync{Replicas: 1}))
	name := testkit.LockName(t)
	lease, err := locks.Mutex(name).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	replica := testkit.CloseLater(t, r.Replicas[0].Client())
	if n, err := replica.Exists(ctx, name).Result(); err != nil || n != 1 {
		t.Fatalf("the replica has %d of the acquired lock (%v), want 1", n, err)
	}
	if calls := waits(t, r.Master); calls == 0 {
		t.Fatal("the master counts no WAIT")
	}
	if err := lease.Unlock(ctx); err != nil {
		t.Fatal(err)
	}

	greedy := newLocks(t, testkit.Deployment{Addr: r.Master.Addr}, relock.WithReplicaSync(relock.ReplicaSync{Replicas: 2, Timeout: 20 * time.Millisecond}))
	if _, err := greedy.Mutex(testkit.LockName(t)).Lock(ctx); !errors.Is(err, relock.ErrReplicaSync) {
		t.Fatalf("Lock with 2 replicas wanted and 1 there: %v, want ErrReplicaSync", err)
	}
}

// waitAcking waits until master has n replicas online that have
// acknowledged an offset: until then a WAIT may count none of them.
func waitAcking(t testing.TB, master *redistest.Server, n int) {
	t.Helper()
	testkit.Eventually(t, 30*time.Second, strconv.Itoa(n)+" replicas acknowledging", func() bool {
		v, err := master.Do(context.Background(), "INFO", "replication")
		if err != nil {
			t.Fatal(err)
		}
		acking := 0
		for _, line := range strings.Split(v.(string), "\n") {
			line = strings.TrimSpace(line)
			if strings.HasPrefix(line, "slave") && strings.Contains(line, "state=online") && !strings.Contains(line+",", ",offset=0,") {
				acking++
			}
		}
		return acking == n
	})
}

// waits returns the calls of WAIT s has answered.
func waits(t testing.TB, s *redistest.Server) int64 {
	t.Helper()
	v, err := s.Do(context.Background(), "INFO", "commandstats")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(v.(string), "\n") {
		if rest, ok := strings.CutPrefix(line, "cmdstat_wait:calls="); ok {
			n, err := strconv.ParseInt(rest[:strings.IndexByte(rest, ',')], 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	return 0
}

// TestSentinel: through rueidis's Sentinel client, a Mutex is handed
// over to a waiter listening on the master; after the master is killed
// and a replica promoted, a lock is taken on the new master and handed
// over again.
func TestSentinel(t *testing.T) {
	s := redistest.NewSentinel(t)
	d := testkit.Deployment{MasterName: s.MasterName, Sentinels: s.SentinelAddrs()}
	a := newLocks(t, d)
	b := newLocks(t, d)
	ctx := testkit.CtxTimeout(t, 90*time.Second)
	on := func(m *redistest.Server) {
		t.Helper()
		rdb := testkit.CloseLater(t, m.Client())
		handOver(t, a, b, rdb, false, func(ch string) int64 { return numSub(t, m, ch) })
	}
	old, err := s.CurrentMaster(ctx)
	if err != nil {
		t.Fatal(err)
	}
	on(old)
	if err := old.Kill(); err != nil {
		t.Fatal(err)
	}
	m, err := s.WaitForNewMaster(ctx, old)
	if err != nil {
		t.Fatal(err)
	}
	// rueidis follows the sentinels to the new master; the first calls
	// after the switch may fail while it does.
	name := testkit.LockName(t)
	var l *relock.Lease
	testkit.Eventually(t, 30*time.Second, "a lock on the new master", func() bool {
		l, err = a.Mutex(name).TryLock(ctx)
		return err == nil
	})
	if err := l.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	on(m)
}
