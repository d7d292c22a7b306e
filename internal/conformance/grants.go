package conformance

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/layout"
	"github.com/relock-go/relock/internal/testkit"
)

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
