package relockvalkey

import (
	"testing"
	"time"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/internal/slots"
	"github.com/relock-go/relock/internal/testkit"
)

// TestClusterFailover: with replica sync on, a cluster master's replica
// takes over (CLUSTER FAILOVER). A hold taken before is released after
// it, a waiter that listened on the old master is woken after it,
// and new acquisitions in the slot are replica-synced on the new master:
// the driver finds it by its slot map read again after the old master,
// now a replica, refused.
func TestClusterFailover(t *testing.T) {
	c := redistest.NewCluster(t, 3, 1)
	ctx := testkit.CtxTimeout(t, 2*time.Minute)
	opt := relock.WithReplicaSync(relock.ReplicaSync{Replicas: 1, Retry: true})
	a := newLocks(t, testkit.Deployment{Addrs: c.Addrs()}, opt)
	b := newLocks(t, testkit.Deployment{Addrs: c.Addrs()}, opt)
	name := testkit.LockName(t)
	old, err := c.MasterForSlot(ctx, slots.Of(name))
	if err != nil {
		t.Fatal(err)
	}
	waitAcking(t, old, 1)
	held, err := a.Mutex(name).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	rdb := testkit.CloseLater(t, c.Client())
	next := async(func() (*relock.Lease, error) { return b.Mutex(name).Lock(ctx) })
	grants := grantChannel(t, rdb, name, true)
	testkit.Eventually(t, 10*time.Second, "the waiter listens on the slot's master", func() bool {
		return shardNumSub(t, old, grants) == 1
	})
	if err := c.Failover(ctx, old); err != nil {
		t.Fatal(err)
	}
	promoted, err := c.MasterForSlot(ctx, slots.Of(name))
	if err != nil || promoted == old {
		t.Fatalf("the slot's master after the failover: %v, %v", promoted, err)
	}
	// The server ends the subscription on the demoted master, and the
	// waiter subscribes again: on the promoted master, or on the demoted
	// one, now its replica, which hears the slot's messages too (valkey-go
	// reads its slot map again at the next MOVED).
	testkit.Eventually(t, 30*time.Second, "the waiter listens again", func() bool {
		return shardNumSub(t, promoted, grants)+shardNumSub(t, old, grants) == 1
	})
	if err := held.Unlock(ctx); err != nil {
		t.Fatalf("unlock after the failover: %v", err)
	}
	if err := await(t, ctx, next, "the waiter's Lock").Unlock(ctx); err != nil {
		t.Fatal(err)
	}

	waitAcking(t, promoted, 1)
	before := waits(t, promoted)
	l, err := a.Mutex(testkit.LockName(t) + "{" + slots.Tag(slots.Of(name)) + "}").Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if after := waits(t, promoted); after <= before {
		t.Fatalf("the promoted master counts %d WAITs, as many as before the lock", after)
	}
	if err := l.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}
