package relock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/conformance"
	"github.com/relock-go/relock/internal/testkit"
)

func TestMultiLock(t *testing.T) { conformance.MultiLock(t) }

// TestMultiLockMixedLockers: a MultiLock takes any mix of relock's locks;
// read locks stay shared between MultiLocks.
func TestMultiLockMixedLockers(t *testing.T) {
	testkit.ForEach(t, func(t *testing.T, top testkit.Topology) {
		c1, c2, other := top.NewClient(t), top.NewClient(t), top.NewClient(t)
		names := testkit.SlotNames(t, 4)
		ctx := testkit.CtxTimeout(t, 10*time.Second)
		first := relock.Multi(c1.FairMutex(names[0]), c2.RWMutex(names[1]).RLocker(), c1.Mutex(names[2]))
		second := relock.Multi(c2.RWMutex(names[1]).RLocker(), c2.Mutex(names[3]))
		a, err := first.Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		b, err := second.TryLock(ctx)
		if err != nil {
			t.Fatalf("a second reader through another MultiLock: %v", err)
		}
		if _, err := other.RWMutex(names[1]).TryLock(ctx); !errors.Is(err, relock.ErrNotAcquired) {
			t.Fatalf("write TryLock of the shared member: %v, want ErrNotAcquired", err)
		}
		if _, err := other.FairMutex(names[0]).TryLock(ctx); !errors.Is(err, relock.ErrNotAcquired) {
			t.Fatalf("TryLock of the fair member: %v, want ErrNotAcquired", err)
		}
		for _, l := range []*relock.Lease{a, b} {
			if err := l.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
		}
		testkit.Free(t, top.RDB(t), names...)
		testkit.Idle(t, c1, c2)
	})
}

// TestMultiLockTryLockPartial: a member held by another makes TryLock
// fail and leaves nothing of the attempt behind.
func TestMultiLockTryLockPartial(t *testing.T) {
	testkit.ForEach(t, func(t *testing.T, top testkit.Topology) {
		c, other := top.NewClient(t), top.NewClient(t)
		rdb := top.RDB(t)
		names := testkit.SlotNames(t, 3)
		ctx := testkit.CtxTimeout(t, 10*time.Second)
		busy, err := other.Mutex(names[2]).Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		ml := relock.Multi(c.Mutex(names[0]), c.Mutex(names[1]), c.Mutex(names[2]))
		if _, err := ml.TryLock(ctx); !errors.Is(err, relock.ErrNotAcquired) {
			t.Fatalf("TryLock: %v, want ErrNotAcquired", err)
		}
		testkit.NoKeys(t, rdb, names[0], names[1])
		if n := testkit.HoldCount(t, rdb, names[2]); n != 1 {
			t.Fatalf("hold count of the busy member %d, want 1", n)
		}
		testkit.Idle(t, c)
		if err := busy.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		l, err := ml.TryLock(ctx)
		if err != nil {
			t.Fatalf("TryLock once free: %v", err)
		}
		if err := l.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	})
}

// TestMultiLockCancelMidway: a Lock that gives up while a member is held
// elsewhere leaves no hold, key, subscription or waiter behind, and
// succeeds later once the member is free.
func TestMultiLockCancelMidway(t *testing.T) {
	testkit.ForEach(t, func(t *testing.T, top testkit.Topology) {
		c1, c2, other := top.NewClient(t), top.NewClient(t), top.NewClient(t)
		rdb := top.RDB(t)
		names := testkit.SlotNames(t, 3)
		ctx := testkit.CtxTimeout(t, 10*time.Second)
		busy, err := other.Mutex(names[1]).Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		ml := relock.Multi(c1.Mutex(names[0]), c2.Mutex(names[1]), c2.Mutex(names[2]))
		short, cancel := context.WithTimeout(ctx, 150*time.Millisecond)
		defer cancel()
		if _, err := ml.Lock(short); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Lock: %v, want DeadlineExceeded", err)
		}
		testkit.NoKeys(t, rdb, names[0], names[2])
		if n := testkit.HoldCount(t, rdb, names[1]); n != 1 {
			t.Fatalf("hold count of the busy member %d, want 1", n)
		}
		testkit.Idle(t, c1, c2)

		// A waiting Lock gets everything once the member is freed.
		got := make(chan error, 1)
		go func() {
			l, err := ml.Lock(ctx)
			if err == nil {
				err = l.Unlock(ctx)
			}
			got <- err
		}()
		testkit.Eventually(t, 5*time.Second, "the multi-lock to wait", func() bool { return c2.Stats().Asleep == 1 })
		if err := busy.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		if err := <-got; err != nil {
			t.Fatal(err)
		}
		testkit.NoKeys(t, rdb, names...)
	})
}

// TestMultiLockMemberLost: deleting one member's key ends the MultiLock's
// lease; the other members are no longer renewed, and Unlock reports
// ErrNotHeld and frees what is left.
func TestMultiLockMemberLost(t *testing.T) {
	testkit.ForEach(t, func(t *testing.T, top testkit.Topology) {
		const timeout = 300 * time.Millisecond
		c1 := top.NewClient(t, relock.WithWatchdogTimeout(timeout))
		c2 := top.NewClient(t, relock.WithWatchdogTimeout(timeout))
		rdb := top.RDB(t)
		names := testkit.SlotNames(t, 3)
		ctx := testkit.CtxTimeout(t, 10*time.Second)
		// A nested MultiLock: the loss travels up two levels.
		inner := relock.Multi(c1.Mutex(names[0]), c2.Mutex(names[1]))
		l, err := relock.Multi(inner, c2.Mutex(names[2])).Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if tokens := l.Tokens(); len(tokens) != 2 {
			t.Fatalf("Tokens() = %v, want one per member", tokens)
		}
		if ok, err := c1.Mutex(names[1]).ForceUnlock(ctx); !ok || err != nil {
			t.Fatalf("ForceUnlock: %v, %v", ok, err)
		}
		testkit.WaitDone(t, l, 5*time.Second)
		if !errors.Is(l.Err(), relock.ErrLockLost) {
			t.Fatalf("Err() = %v, want ErrLockLost", l.Err())
		}
		// The survivors are not renewed any more.
		testkit.Eventually(t, 5*time.Second, "renewal of the survivors to stop", func() bool {
			return c1.Stats().Held == 0 && c2.Stats().Held == 0
		})
		if err := l.Unlock(ctx); !errors.Is(err, relock.ErrNotHeld) {
			t.Fatalf("Unlock: %v, want ErrNotHeld", err)
		}
		if !errors.Is(l.Err(), relock.ErrLockLost) {
			t.Fatalf("Err() after Unlock = %v, want ErrLockLost", l.Err())
		}
		testkit.NoKeys(t, rdb, names...)
	})
}

// TestMultiLockFixedLease: WithLease applies to every member; the lease
// ends when they expire.
func TestMultiLockFixedLease(t *testing.T) {
	testkit.ForEach(t, func(t *testing.T, top testkit.Topology) {
		c := top.NewClient(t)
		names := testkit.SlotNames(t, 2)
		ctx := testkit.CtxTimeout(t, 10*time.Second)
		l, err := relock.Multi(c.Mutex(names[0]), c.Mutex(names[1])).Lock(ctx, relock.WithLease(200*time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		for _, name := range names {
			if ttl, err := c.Mutex(name).TTL(ctx); err != nil || ttl <= 0 || ttl > 200*time.Millisecond {
				t.Fatalf("TTL of %q = %v, %v", name, ttl, err)
			}
		}
		testkit.WaitDone(t, l, 5*time.Second)
		if !errors.Is(l.Err(), relock.ErrLockLost) {
			t.Fatalf("Err() = %v, want ErrLockLost", l.Err())
		}
		// The local deadline passes a little before the keys expire.
		rdb := top.RDB(t)
		testkit.Eventually(t, 5*time.Second, "the keys to expire", func() bool {
			for _, name := range names {
				if n, err := rdb.Exists(ctx, name).Result(); err != nil || n != 0 {
					return false
				}
			}
			return true
		})
		if err := l.Unlock(ctx); !errors.Is(err, relock.ErrNotHeld) {
			t.Fatalf("Unlock of an expired lease: %v, want ErrNotHeld", err)
		}
	})
}

// TestMultiLockReentrant: with an owner, a MultiLock re-enters its
// members, and each lease releases its own holds.
func TestMultiLockReentrant(t *testing.T) {
	testkit.ForEach(t, func(t *testing.T, top testkit.Topology) {
		c := top.NewClient(t)
		rdb := top.RDB(t)
		names := testkit.SlotNames(t, 2)
		ctx := testkit.CtxTimeout(t, 10*time.Second)
		owner := relock.WithOwner(ctx)
		ml := relock.Multi(c.Mutex(names[0]), c.Mutex(names[1]))
		first, err := ml.Lock(owner)
		if err != nil {
			t.Fatal(err)
		}
		second, err := ml.TryLock(owner)
		if err != nil {
			t.Fatalf("re-entry: %v", err)
		}
		if _, err := ml.TryLock(ctx); !errors.Is(err, relock.ErrNotAcquired) {
			t.Fatalf("TryLock without the owner: %v", err)
		}
		for _, name := range names {
			if n := testkit.HoldCount(t, rdb, name); n != 2 {
				t.Fatalf("hold count of %q %d, want 2", name, n)
			}
		}
		if err := second.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		if err := first.Err(); err != nil {
			t.Fatalf("first lease after the second's Unlock: %v", err)
		}
		for _, name := range names {
			if n := testkit.HoldCount(t, rdb, name); n != 1 {
				t.Fatalf("hold count of %q %d, want 1", name, n)
			}
		}
		if err := first.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		testkit.Free(t, rdb, names...)
	})
}

func TestMultiLockBadInput(t *testing.T) {
	c := testkit.NewClient(t, testkit.CloseLater(t, testkit.Standalone.Client()))
	ctx := testkit.CtxTimeout(t, 10*time.Second)
	name := testkit.LockName(t)
	m := c.Mutex(name)
	for _, tc := range []struct {
		what    string
		members []relock.Locker
	}{
		{"no members", nil},
		{"nil member", []relock.Locker{m, nil}},
		{"nil *Mutex", []relock.Locker{(*relock.Mutex)(nil)}},
		{"one Mutex twice", []relock.Locker{m, m}},
		{"one name on one Client twice", []relock.Locker{c.Mutex(name), c.Mutex(name)}},
		{"a name twice through nesting", []relock.Locker{m, relock.Multi(c.Mutex(name+":x"), c.Mutex(name))}},
		{"a RedLock's name on its Client", []relock.Locker{m, relock.NewRedLock(name, []*relock.Client{c})}},
		{"a FairMutex and a Mutex of one name", []relock.Locker{c.FairMutex(name), m}},
		{"both sides of an RWMutex", []relock.Locker{c.RWMutex(name).RLocker(), c.RWMutex(name).WLocker()}},
	} {
		t.Run(tc.what, func(t *testing.T) {
			ml := relock.Multi(tc.members...)
			if _, err := ml.Lock(ctx); !errors.Is(err, relock.ErrInvalidOption) {
				t.Fatalf("Lock: %v, want ErrInvalidOption", err)
			}
			if _, err := ml.TryLock(ctx); !errors.Is(err, relock.ErrInvalidOption) {
				t.Fatalf("TryLock: %v, want ErrInvalidOption", err)
			}
		})
	}
	// A member's own bad input comes back from the call, and nothing of
	// the members before it stays held.
	if _, err := relock.Multi(m, c.Mutex("")).Lock(ctx); !errors.Is(err, relock.ErrInvalidName) {
		t.Fatalf("member with an empty name: %v, want ErrInvalidName", err)
	}
	if _, err := relock.Multi(m).Lock(ctx, relock.WithLease(0)); !errors.Is(err, relock.ErrInvalidOption) {
		t.Fatalf("zero lease: %v, want ErrInvalidOption", err)
	}
	testkit.NoKeys(t, testkit.CloseLater(t, testkit.Standalone.Client()), name)
	testkit.Idle(t, c)
}

// TestMultiLockClientClosed: closing a member's Client ends the lease.
func TestMultiLockClientClosed(t *testing.T) {
	testkit.ForEach(t, func(t *testing.T, top testkit.Topology) {
		c1, c2 := top.NewClient(t), top.NewClient(t)
		names := testkit.SlotNames(t, 2)
		ctx := testkit.CtxTimeout(t, 10*time.Second)
		l, err := relock.Multi(c1.Mutex(names[0]), c2.Mutex(names[1])).Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := c2.Close(); err != nil {
			t.Fatal(err)
		}
		testkit.WaitDone(t, l, time.Second)
		if !errors.Is(l.Err(), relock.ErrLockLost) {
			t.Fatalf("Err() = %v, want ErrLockLost", l.Err())
		}
		_ = l.Unlock(ctx)
		testkit.Idle(t, c1)
	})
}
