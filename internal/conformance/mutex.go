package conformance

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/history"
	"github.com/relock-go/relock/internal/testkit"
)

// MutexHammer: 16 goroutines over two Clients on one name guard an
// unsynchronised counter with the lock only; -race and the history checker
// catch any overlap.
func MutexHammer(t *testing.T) {
	testkit.ForEach(t, func(t *testing.T, top testkit.Topology) {
		clients := []*relock.Client{top.NewClient(t), top.NewClient(t)}
		name := testkit.LockName(t)
		rec := history.New()
		ctx := testkit.CtxTimeout(t, time.Minute)
		const workers, rounds = 16, 40
		counter := 0
		var wg sync.WaitGroup
		for i := 0; i < workers; i++ {
			c := clients[i%len(clients)]
			who := []string{"a", "b"}[i%2]
			wg.Add(1)
			go func() {
				defer wg.Done()
				m := c.Mutex(name)
				for j := 0; j < rounds; j++ {
					l, err := m.Lock(ctx)
					if err != nil {
						t.Error(err)
						return
					}
					h := rec.Begin(who, name, l.Token())
					v := counter
					runtime.Gosched()
					counter = v + 1
					h.End()
					if err := l.Unlock(ctx); err != nil {
						t.Error(err)
						return
					}
				}
			}()
		}
		wg.Wait()
		if counter != workers*rounds {
			t.Fatalf("counter = %d, want %d", counter, workers*rounds)
		}
		if v := rec.Check(); len(v) > 0 {
			t.Fatalf("%d violations, first: %+v", len(v), v[0])
		}
		if keys := testkit.KeysOf(t, top.RDB(t), name); len(keys) > 0 {
			t.Fatalf("keys left behind: %v", keys)
		}
	})
}

// Reentrancy: calls whose contexts carry one owner re-enter the lock,
// sharing the holder's token; other owners and plain contexts are
// excluded; the lock is free once every hold of the owner is unlocked.
func Reentrancy(t *testing.T) {
	testkit.ForEach(t, func(t *testing.T, top testkit.Topology) {
		c := top.NewClient(t)
		rdb := top.RDB(t)
		m := c.Mutex(testkit.LockName(t))
		ctx := testkit.CtxTimeout(t, 10*time.Second)
		owner := relock.WithOwner(ctx)

		first, err := m.Lock(owner)
		if err != nil {
			t.Fatal(err)
		}
		second, err := m.TryLock(owner)
		if err != nil {
			t.Fatalf("re-entry: %v", err)
		}
		if first.Token() != second.Token() {
			t.Fatalf("re-entry token %d, holder's %d", second.Token(), first.Token())
		}
		if n := testkit.HoldCount(t, rdb, m.Name()); n != 2 {
			t.Fatalf("hold count %d, want 2", n)
		}
		// Another owner, and a plain context, are excluded.
		if _, err := m.TryLock(ctx); !errors.Is(err, relock.ErrNotAcquired) {
			t.Fatalf("plain context TryLock: %v, want ErrNotAcquired", err)
		}
		if _, err := m.TryLock(relock.WithOwner(ctx)); !errors.Is(err, relock.ErrNotAcquired) {
			t.Fatalf("other owner TryLock: %v, want ErrNotAcquired", err)
		}

		if err := second.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		if err := second.Unlock(ctx); !errors.Is(err, relock.ErrNotHeld) {
			t.Fatalf("second Unlock of one lease: %v, want ErrNotHeld", err)
		}
		if !errors.Is(second.Err(), relock.ErrReleased) {
			t.Fatalf("unlocked lease Err = %v", second.Err())
		}
		if n := testkit.HoldCount(t, rdb, m.Name()); n != 1 {
			t.Fatalf("hold count %d after one Unlock (and a repeated one), want 1", n)
		}
		if err := first.Err(); err != nil {
			t.Fatalf("remaining lease Err = %v", err)
		}
		if locked, _ := m.IsLocked(ctx); !locked {
			t.Fatal("lock free while a hold remains")
		}
		if err := first.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		if locked, _ := m.IsLocked(ctx); locked {
			t.Fatal("lock held after every hold was unlocked")
		}
	})
}

// TryLockAndTTL: TTL follows PTTL (-2 for a free lock, the lease while
// held), TryLock of a held lock fails with ErrNotAcquired, and Unlock ends
// the lease with ErrReleased and a closed Done.
func TryLockAndTTL(t *testing.T) {
	testkit.ForEach(t, func(t *testing.T, top testkit.Topology) {
		m := top.NewClient(t).Mutex(testkit.LockName(t))
		ctx := testkit.CtxTimeout(t, 10*time.Second)
		if ttl, err := m.TTL(ctx); err != nil || ttl != -2 {
			t.Fatalf("TTL of a free lock = %v, %v; want -2ns", ttl, err)
		}
		l, err := m.TryLock(ctx, relock.WithLease(time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		if ttl, err := m.TTL(ctx); err != nil || ttl <= 50*time.Second || ttl > time.Minute {
			t.Fatalf("TTL = %v, %v; want about a minute", ttl, err)
		}
		if _, err := m.TryLock(ctx); !errors.Is(err, relock.ErrNotAcquired) {
			t.Fatalf("TryLock of a held lock: %v", err)
		}
		if err := l.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		if !errors.Is(l.Err(), relock.ErrReleased) {
			t.Fatalf("Err after Unlock = %v", l.Err())
		}
		select {
		case <-l.Done():
		default:
			t.Fatal("Done open after Unlock")
		}
	})
}

// FencingTokensGrow: every acquisition, by either of two Clients, gets a
// larger token than the one before.
func FencingTokensGrow(t *testing.T) {
	testkit.ForEach(t, func(t *testing.T, top testkit.Topology) {
		a, b := top.NewClient(t), top.NewClient(t)
		name := testkit.LockName(t)
		ctx := testkit.CtxTimeout(t, 10*time.Second)
		var last uint64
		for i := 0; i < 10; i++ {
			c := []*relock.Client{a, b}[i%2]
			l, err := c.Mutex(name).Lock(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if l.Token() <= last {
				t.Fatalf("token %d after %d", l.Token(), last)
			}
			last = l.Token()
			if err := l.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
		}
	})
}

// FixedLeaseExpires: a WithLease hold expires, its Lease says so, and
// its stale Unlock leaves the next holder alone.
func FixedLeaseExpires(t *testing.T) {
	testkit.ForEach(t, func(t *testing.T, top testkit.Topology) {
		a, b := top.NewClient(t), top.NewClient(t)
		name := testkit.LockName(t)
		ctx := testkit.CtxTimeout(t, 10*time.Second)
		stale, err := a.Mutex(name).Lock(ctx, relock.WithLease(150*time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		// b waits for the expiry: no release message comes, the TTL wakes it.
		next, err := b.Mutex(name).Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if !errors.Is(stale.Err(), relock.ErrLockLost) {
			t.Fatalf("expired lease Err = %v, want ErrLockLost", stale.Err())
		}
		testkit.WaitDone(t, stale, time.Second)
		if next.Token() <= stale.Token() {
			t.Fatalf("next token %d, stale %d", next.Token(), stale.Token())
		}
		if err := stale.Unlock(ctx); !errors.Is(err, relock.ErrNotHeld) {
			t.Fatalf("stale Unlock: %v, want ErrNotHeld", err)
		}
		if err := next.Err(); err != nil {
			t.Fatalf("new holder disturbed: %v", err)
		}
		if locked, _ := b.Mutex(name).IsLocked(ctx); !locked {
			t.Fatal("stale Unlock freed the new holder's lock")
		}
		if err := next.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	})
}

// LeaseContext: a lease's context ends with ErrLockLost as its cause
// when another Client force-unlocks the lock.
func LeaseContext(t *testing.T) {
	testkit.ForEach(t, func(t *testing.T, top testkit.Topology) {
		a, b := top.NewClient(t), top.NewClient(t)
		m := a.Mutex(testkit.LockName(t))
		ctx := testkit.CtxTimeout(t, 10*time.Second)
		l, err := m.Lock(ctx, relock.WithLease(time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		lctx, cancel := l.Context(ctx)
		defer cancel()
		if _, err := b.Mutex(m.Name()).ForceUnlock(ctx); err != nil {
			t.Fatal(err)
		}
		// The lease is checked, not renewed, every third of the watchdog
		// timeout; a fixed lease learns of the deletion at the next check.
		_ = l.Unlock(ctx)
		<-lctx.Done()
		if cause := context.Cause(lctx); !errors.Is(cause, relock.ErrLockLost) {
			t.Fatalf("context cause %v, want ErrLockLost", cause)
		}
	})
}
