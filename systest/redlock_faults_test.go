package systest

import (
	"errors"
	"testing"
	"time"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/internal/testkit"
)

// TestRedLockMastersKilled: a hold survives the loss of two of five
// masters and is lost, Done closing, with the third.
func TestRedLockMastersKilled(t *testing.T) {
	t.Parallel()
	ms := redistest.NewMasters(t, 5)
	// Long enough that a loaded machine's late renewals do not lose the
	// live masters' node holds; the killed ones are lost within it.
	const timeout = 1500 * time.Millisecond
	ours := testkit.Nodes(t, ms, relock.WithWatchdogTimeout(timeout))
	theirs, rdbs := testkit.Nodes(t, ms), testkit.Direct(t, ms)
	name := testkit.LockName(t)
	ctx := testkit.CtxTimeout(t, 20*time.Second)
	l, err := relock.NewRedLock(name, ours).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		if err := ms[i].Kill(); err != nil {
			t.Fatal(err)
		}
		testkit.Eventually(t, 5*time.Second, "the node hold on the killed master to be lost", func() bool {
			return ours[i].Stats().Held == 0
		})
		if err := l.Err(); err != nil {
			t.Fatalf("after killing %d masters: Err() = %v", i+1, err)
		}
	}
	// Renewal keeps the quorum: well past the lease, still held and
	// still exclusive.
	time.Sleep(2 * timeout) // the passing of time is what is tested
	if err := l.Err(); err != nil {
		t.Fatalf("Err() = %v after two leases on three masters", err)
	}
	if _, err := relock.NewRedLock(name, theirs).TryLock(ctx); !errors.Is(err, relock.ErrNotAcquired) {
		t.Fatalf("another RedLock's TryLock: %v, want ErrNotAcquired", err)
	}
	if err := ms[2].Kill(); err != nil {
		t.Fatal(err)
	}
	testkit.WaitDone(t, l, 5*time.Second)
	if !errors.Is(l.Err(), relock.ErrLockLost) {
		t.Fatalf("Err() = %v after killing three masters, want ErrLockLost", l.Err())
	}
	if err := l.Unlock(ctx); !errors.Is(err, relock.ErrNotHeld) {
		t.Fatalf("Unlock: %v, want ErrNotHeld", err)
	}
	for _, i := range []int{3, 4} {
		if testkit.Exists(t, rdbs[i], name) {
			t.Fatalf("node %d still locked after Unlock", i)
		}
	}
	testkit.Idle(t, ours[3], ours[4])
}

// TestRedLockMasterRestarted: a master restarted without persistence
// comes back without the lock's key; the hold, still on a quorum, stays.
func TestRedLockMasterRestarted(t *testing.T) {
	t.Parallel()
	ms := redistest.NewMasters(t, 5)
	// A short lease, so that the restarted master's node hold is found
	// gone within a renewal or two; long enough that a loaded machine's
	// late renewals do not lose the other nodes' holds.
	ours := testkit.Nodes(t, ms, relock.WithWatchdogTimeout(1500*time.Millisecond))
	theirs, rdbs := testkit.Nodes(t, ms), testkit.Direct(t, ms)
	name := testkit.LockName(t)
	ctx := testkit.CtxTimeout(t, 20*time.Second)
	l, err := relock.NewRedLock(name, ours).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := ms[0].Restart(); err != nil {
		t.Fatal(err)
	}
	if testkit.Exists(t, rdbs[0], name) {
		t.Fatal("the restarted master kept the key without persistence")
	}
	testkit.Eventually(t, 5*time.Second, "the node hold on the restarted master to be lost", func() bool {
		return ours[0].Stats().Held == 0
	})
	if err := l.Err(); err != nil {
		t.Fatalf("Err() = %v with four of five nodes held", err)
	}
	if _, err := relock.NewRedLock(name, theirs).TryLock(ctx); !errors.Is(err, relock.ErrNotAcquired) {
		t.Fatalf("another RedLock's TryLock: %v, want ErrNotAcquired", err)
	}
	if err := l.Unlock(ctx); err != nil {
		t.Fatalf("Unlock: %v", err)
	}
	for i := range rdbs {
		if testkit.Exists(t, rdbs[i], name) {
			t.Fatalf("node %d still locked after Unlock", i)
		}
	}
}

// TestRedLockRestartGrantsTwice shows why a master that restarts without
// its data must stay out for a lease (docs/redlock.md): a hold on exactly
// a quorum loses one node to the restart, and another RedLock gets a
// quorum from that node and the two free ones. The first holder's Client
// for the restarted node hears of it when its pub/sub connection there is
// made again (it holds, so it listens), which may come before or after
// the second RedLock wins: two holders coexist either way.
func TestRedLockRestartGrantsTwice(t *testing.T) {
	t.Parallel()
	ms := redistest.NewMasters(t, 5)
	// Fixed leases of a minute: only the restart takes a node hold away.
	ours, theirs, third := testkit.Nodes(t, ms), testkit.Nodes(t, ms), testkit.Nodes(t, ms)
	name := testkit.LockName(t)
	ctx := testkit.CtxTimeout(t, 20*time.Second)
	var blockers []*relock.Lease
	for i := range 2 {
		b, err := third[i].Mutex(name).Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		blockers = append(blockers, b)
	}
	first, err := relock.NewRedLock(name, ours).Lock(ctx, relock.WithLease(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range blockers {
		if err := b.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if err := ms[2].Restart(); err != nil {
		t.Fatal(err)
	}
	second, err := relock.NewRedLock(name, theirs).TryLock(ctx, relock.WithLease(time.Minute))
	if err != nil {
		t.Fatalf("second RedLock after the restart: %v", err)
	}
	if err := second.Err(); err != nil {
		t.Fatalf("second RedLock's Err() = %v", err)
	}
	t.Logf("granted twice: nodes %v and %v; the first told already: %v", first.Tokens(), second.Tokens(), first.Err())
	if err := second.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := first.Unlock(ctx); !errors.Is(err, relock.ErrNotHeld) {
		t.Fatalf("first holder's Unlock: %v, want ErrNotHeld (it held only two nodes)", err)
	}
}
