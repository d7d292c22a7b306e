package systest

import (
	"errors"
	"testing"
	"time"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/faultproxy"
	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/internal/testkit"
)

// TestFaultReplicaSyncRenewalGap checks the one failover that replica
// sync on acquisitions alone does not cover, step by step: a hold
// acquired with one replica's acknowledgement, whose master renews it
// while the replication link is cut, then dies; the replica is promoted,
// and the holder cannot reach it (its connections still lead to the dead
// master) until the promoted copy of the lock, which never saw the last
// renewal, has expired; another client is granted the lock there.
//
// Had the renewal the replica did not acknowledge moved the holder's local
// deadline, the holder would still believe it held the lock at that
// moment: a double grant. Only acknowledged renewals move it, so the
// holder's deadline passes before the promoted copy expires, and it has
// been told.
func TestFaultReplicaSyncRenewalGap(t *testing.T) {
	t.Parallel()
	const lease = 1500 * time.Millisecond
	r := redistest.NewReplicated(t, 1)
	master, replica := r.Master, r.Replicas[0]
	waitAcknowledging(t, master, 1)
	p, err := faultproxy.New(master.Addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	holder := testkit.Deployment{Addr: p.Addr()}.Open(t,
		relock.WithWatchdogTimeout(lease), relock.WithReplicaSync(relock.ReplicaSync{Replicas: 1}))
	name := testkit.LockName(t)
	ctx := testkit.CtxTimeout(t, 30*time.Second)
	l, err := holder.Mutex(name).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}

	// Cut the replication link: the replica cannot reconnect while stopped.
	if err := replica.Pause(); err != nil {
		t.Fatal(err)
	}
	if _, err := master.Do(ctx, "CLIENT", "KILL", "TYPE", "replica"); err != nil {
		t.Fatal(err)
	}
	short := holder.Stats().RenewSyncShort
	testkit.Eventually(t, 10*time.Second, "a renewal the replica did not acknowledge", func() bool {
		return holder.Stats().RenewSyncShort > short
	})
	// The master dies; the holder's traffic goes nowhere for now.
	p.Stall()
	if err := master.Kill(); err != nil {
		t.Fatal(err)
	}
	if err := replica.Resume(); err != nil {
		t.Fatal(err)
	}
	if _, err := replica.Do(ctx, "REPLICAOF", "NO", "ONE"); err != nil {
		t.Fatal(err)
	}
	direct := testkit.CloseLater(t, replica.Client())
	testkit.Eventually(t, 10*time.Second, "the promoted copy of the lock to expire", func() bool {
		n, err := direct.Exists(ctx, name).Result()
		return err == nil && n == 0
	})
	other := testkit.NewClient(t, direct, relock.WithoutReplicaSync())
	nl, err := other.Mutex(name).TryLock(ctx)
	if err != nil {
		t.Fatalf("the lock is gone on the promoted replica, yet TryLock: %v", err)
	}
	holderErr := l.Err()
	doubleGrants := 0
	if holderErr == nil {
		doubleGrants = 1
		t.Errorf("the holder still holds by its local deadline while another client was granted the lock: " +
			"a renewal that no replica acknowledged extended its deadline past the promoted replica's copy")
	} else if !errors.Is(holderErr, relock.ErrLockLost) {
		t.Errorf("holder's Err = %v, want ErrLockLost", holderErr)
	}
	testkit.Safety(t, "replica-sync-renewal-gap", "runs", 1, "sync", "on-replicas-1", "double_grants", doubleGrants,
		"lease", lease)

	// Let the holder's client reach the new master, so that it closes
	// without waiting on a stalled connection.
	p.SetTarget(replica.Addr)
	p.Drop()
	p.Resume()
	if err := nl.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}
