package conformance

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/history"
	"github.com/relock-go/relock/internal/layout"
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

// Grants: a release grants the lock to the first waiter of the lock's
// queue, in the order the waiters joined, across Clients; to a waiter of
// its own Client it hands the Lease in process, to another Client's it
// pushes the grant, which that waiter confirms to its full lease. A
// listener on the release channel that does not queue (as a Redisson
// waiter) turns grants off; a waiter granted the lock that has died costs
// the next one the short grant, whose end it finds by attempting at least
// that often; and nothing is left
// in Redis. With replica sync a Client grants to its own waiters only (a
// grant pushed to another would return before replicas acknowledged it).
func Grants(t *testing.T) {
	testkit.ForEach(t, func(t *testing.T, top testkit.Topology) {
		ctx := testkit.CtxTimeout(t, 30*time.Second)
		rdb := top.RDB(t)
		newClient := func(t *testing.T) *relock.Client { return top.NewClient(t, relock.WithoutReplicaSync()) }
		lockFor := func(c *relock.Client, name string) <-chan *relock.Lease {
			return testkit.LockAsync(t, ctx, c.Mutex(name).Lock)
		}
		asleep := func(c *relock.Client, n int64) {
			t.Helper()
			testkit.Eventually(t, 5*time.Second, "the waiters to sleep", func() bool { return c.Stats().Asleep == n })
		}
		unlock := func(l *relock.Lease) {
			t.Helper()
			if err := l.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
		}
		nothingLeft := func(name string) {
			t.Helper()
			testkit.Gone(t, rdb, name, queueKey(name))
		}

		t.Run("same-client", func(t *testing.T) {
			c := newClient(t)
			name := testkit.LockName(t)
			holder, err := c.Mutex(name).Lock(ctx)
			if err != nil {
				t.Fatal(err)
			}
			got := lockFor(c, name)
			asleep(c, 1)
			unlock(holder)
			next := <-got
			if next == nil {
				t.FailNow()
			}
			if s := c.Stats(); s.Handoffs != 1 {
				t.Fatalf("handoffs = %d, want 1", s.Handoffs)
			}
			if next.Token() != holder.Token()+1 {
				t.Fatalf("handed token %d after %d", next.Token(), holder.Token())
			}
			if n := testkit.HoldCount(t, rdb, name); n != 1 {
				t.Fatalf("hold count %d", n)
			}
			unlock(next)
			nothingLeft(name)
		})

		t.Run("other-clients-in-order", func(t *testing.T) {
			h, a, b := newClient(t), newClient(t), newClient(t)
			name := testkit.LockName(t)
			holder, err := h.Mutex(name).Lock(ctx)
			if err != nil {
				t.Fatal(err)
			}
			gotA := lockFor(a, name)
			asleep(a, 1)
			gotB := lockFor(b, name)
			asleep(b, 1)
			unlock(holder)
			la := <-gotA
			if la == nil {
				t.FailNow()
			}
			if s := a.Stats(); s.Handoffs != 1 || s.Wakeups != 0 {
				t.Errorf("first waiter: %d grants, %d wake-ups; want the grant pushed, no wake-up", s.Handoffs, s.Wakeups)
			}
			if la.Token() != holder.Token()+1 {
				t.Errorf("granted token %d after %d", la.Token(), holder.Token())
			}
			// The grant is confirmed to the waiter's full lease.
			testkit.Eventually(t, 5*time.Second, "the grant to be confirmed", func() bool {
				return rdb.PTTL(ctx, name).Val() > 3*time.Second
			})
			if s := b.Stats(); s.Asleep != 1 {
				t.Errorf("the second waiter is not asleep while the first holds: %+v", s)
			}
			unlock(la)
			lb := <-gotB
			if lb == nil {
				t.FailNow()
			}
			if s := b.Stats(); s.Handoffs != 1 {
				t.Errorf("second waiter: %d grants, want 1", s.Handoffs)
			}
			if lb.Token() != la.Token()+1 {
				t.Errorf("granted token %d after %d", lb.Token(), la.Token())
			}
			unlock(lb)
			nothingLeft(name)
		})

		t.Run("foreign-listener", func(t *testing.T) {
			h, a := newClient(t), newClient(t)
			name := testkit.LockName(t)
			testkit.Listen(t, ctx, rdb, layout.Companion(layout.LockChannel, name))
			holder, err := h.Mutex(name).Lock(ctx)
			if err != nil {
				t.Fatal(err)
			}
			got := lockFor(a, name)
			asleep(a, 1)
			unlock(holder)
			la := <-got
			if la == nil {
				t.FailNow()
			}
			if s := a.Stats(); s.Handoffs != 0 || s.Wakeups == 0 {
				t.Errorf("with a listener that does not queue: %d grants, %d wake-ups; want the lock freed and announced", s.Handoffs, s.Wakeups)
			}
			unlock(la)
			nothingLeft(name)
		})

		t.Run("dead-grantee", func(t *testing.T) {
			h, a := newClient(t), newClient(t)
			name := testkit.LockName(t)
			holder, err := h.Mutex(name).Lock(ctx)
			if err != nil {
				t.Fatal(err)
			}
			// Waiters of two Clients that have died are first in the
			// queue.
			if err := rdb.ZAdd(ctx, queueKey(name), redis.Z{Score: 1, Member: "30000|o|0dead:1"}, redis.Z{Score: 2, Member: "30000|o|0dead2:1"}).Err(); err != nil {
				t.Fatal(err)
			}
			got := testkit.LockAsync(t, testkit.CtxTimeout(t, 10*time.Second), a.Mutex(name).Lock)
			asleep(a, 1)
			unlock(holder)
			// The holder's TTL was the 30s watchdog lease, and nobody
			// tells the waiter when the first dead waiter's grant runs
			// out: it gets the lock within the test's bound only because
			// it attempts at least every grantTTL.
			la := <-got
			if la == nil {
				t.FailNow()
			}
			if la.Token() != holder.Token()+2 {
				t.Errorf("token %d after %d: want the dead waiter's grant between", la.Token(), holder.Token())
			}
			unlock(la)
			nothingLeft(name)
		})

		if top.Name == "cluster" { // its masters have replicas
			t.Run("replica-sync", func(t *testing.T) {
				h, a := top.NewClient(t), top.NewClient(t)
				name := testkit.LockName(t)
				holder, err := h.Mutex(name).Lock(ctx)
				if err != nil {
					t.Fatal(err)
				}
				got := lockFor(a, name)
				asleep(a, 1)
				unlock(holder)
				la := <-got
				if la == nil {
					t.FailNow()
				}
				if s := a.Stats(); s.Handoffs != 0 || s.Wakeups == 0 {
					t.Errorf("with replica sync: %d grants, %d wake-ups; want the lock freed and announced", s.Handoffs, s.Wakeups)
				}
				unlock(la)
				nothingLeft(name)
			})
		}

		t.Run("one-attempt-when-subscribed", func(t *testing.T) {
			// A waiting call whose Client listens on its grant channel
			// already when it queues makes no attempt past the first: a
			// grant that comes before it sleeps waits for it.
			a, attempts := top.CountingClient(t, "lock.lua", relock.WithoutReplicaSync())
			h := newClient(t)
			names := testkit.SlotNames(t, 4) // names[0] and names[3] share a slot, so a grant channel
			keep, name := names[0], names[3]
			// A call of a on another lock keeps the grant channel subscribed.
			kept, err := h.Mutex(keep).Lock(ctx)
			if err != nil {
				t.Fatal(err)
			}
			keeper := lockFor(a, keep)
			asleep(a, 1)
			for round := 1; round <= 3; round++ {
				holder, err := h.Mutex(name).Lock(ctx)
				if err != nil {
					t.Fatal(err)
				}
				before := attempts.N.Load()
				got := lockFor(a, name)
				asleep(a, 2)
				unlock(holder)
				la := <-got
				if la == nil {
					t.FailNow()
				}
				if n := attempts.N.Load() - before; n != 1 {
					t.Errorf("round %d: %d attempts, want 1", round, n)
				}
				unlock(la)
			}
			if s := a.Stats(); s.Handoffs != 3 {
				t.Errorf("%d grants, want 3", s.Handoffs)
			}
			unlock(kept)
			if l := <-keeper; l != nil {
				unlock(l)
			}
			for _, key := range []string{name, queueKey(name), keep, queueKey(keep)} {
				testkit.Gone(t, rdb, key)
			}
		})

		t.Run("given-up", func(t *testing.T) {
			h, a := newClient(t), newClient(t)
			name := testkit.LockName(t)
			holder, err := h.Mutex(name).Lock(ctx)
			if err != nil {
				t.Fatal(err)
			}
			wctx, cancel := context.WithCancel(ctx)
			done := make(chan error, 1)
			go func() {
				_, err := a.Mutex(name).Lock(wctx)
				done <- err
			}()
			asleep(a, 1)
			if n := rdb.ZCard(ctx, queueKey(name)).Val(); n != 1 {
				t.Fatalf("%d waiters queued, want 1", n)
			}
			cancel()
			if err := <-done; err == nil {
				t.Fatal("a cancelled Lock succeeded")
			}
			if n := rdb.Exists(ctx, queueKey(name)).Val(); n != 0 {
				t.Error("a waiter that gave up left its place in the queue")
			}
			unlock(holder)
			nothingLeft(name)
		})
	})
}

// queueKey is the queue of waiters of the Mutex name.
func queueKey(name string) string { return layout.Companion(layout.LockQueue, name) }
