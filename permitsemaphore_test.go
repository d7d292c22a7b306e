package relock_test

import (
	"context"
	"encoding/hex"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/conformance"
	"github.com/relock-go/relock/internal/layout"
	"github.com/relock-go/relock/internal/testkit"
)

func TestPermitSemaphoreHammer(t *testing.T) { conformance.PermitSemaphoreHammer(t) }

func TestPermitLeaseExpires(t *testing.T) { conformance.PermitLeaseExpires(t) }

// TestPermitRenewed: a watchdog-kept permit outlives three leases.
func TestPermitRenewed(t *testing.T) {
	testkit.ForEach(t, func(t *testing.T, top testkit.Topology) {
		const timeout = 300 * time.Millisecond
		c := top.NewClient(t, relock.WithWatchdogTimeout(timeout))
		other := top.NewClient(t).PermitSemaphore(testkit.NewPermits(t, c, 1).Name())
		ctx := testkit.CtxTimeout(t, 10*time.Second)
		p, err := c.PermitSemaphore(other.Name()).Acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		for time.Since(start) < 4*timeout {
			time.Sleep(timeout / 4) // the passing of time is what is tested
			if err := p.Err(); err != nil {
				t.Fatalf("lost after %v: %v", time.Since(start), err)
			}
			if _, err := other.TryAcquire(ctx); !errors.Is(err, relock.ErrNotAcquired) {
				t.Fatalf("another client's TryAcquire after %v: %v", time.Since(start), err)
			}
		}
		if err := p.Release(ctx); err != nil {
			t.Fatal(err)
		}
	})
}

// TestPermitByID: permits addressed by id (as another process or Redisson
// would), unknown ids, lease updates, and what a local Permit learns.
func TestPermitByID(t *testing.T) {
	testkit.ForEach(t, func(t *testing.T, top testkit.Topology) {
		c := top.NewClient(t, relock.WithWatchdogTimeout(300*time.Millisecond))
		ps := testkit.NewPermits(t, c, 2)
		ctx := testkit.CtxTimeout(t, 10*time.Second)
		unknown := strings.Repeat("ab", 16)
		if err := ps.Release(ctx, unknown); !errors.Is(err, relock.ErrUnknownPermit) {
			t.Fatalf("Release of an unknown id: %v", err)
		}
		if err := ps.UpdateLease(ctx, unknown, time.Second); !errors.Is(err, relock.ErrUnknownPermit) {
			t.Fatalf("UpdateLease of an unknown id: %v", err)
		}
		for _, bad := range []string{"", "xyz", "abcd", strings.Repeat("ab", 17)} {
			if err := ps.Release(ctx, bad); !errors.Is(err, relock.ErrInvalidOption) {
				t.Fatalf("Release(%q): %v", bad, err)
			}
		}
		// Released by id elsewhere: the Permit learns it at its renewal.
		p, err := ps.Acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(p.ID()) != 48 {
			t.Fatalf("id %q", p.ID())
		}
		if err := top.NewClient(t).PermitSemaphore(ps.Name()).Release(ctx, p.ID()); err != nil {
			t.Fatal(err)
		}
		testkit.WaitPermitDone(t, p, 5*time.Second)
		if !errors.Is(p.Err(), relock.ErrLockLost) {
			t.Fatalf("Err = %v, want ErrLockLost", p.Err())
		}
		if err := p.Release(ctx); !errors.Is(err, relock.ErrNotHeld) {
			t.Fatalf("Release of a permit released by id: %v", err)
		}
		if err := ps.Release(ctx, p.ID()); !errors.Is(err, relock.ErrUnknownPermit) {
			t.Fatalf("second release by id: %v", err)
		}
		// A shortened lease ends the permit; a Permit without watchdog is
		// lost at its new deadline.
		q, err := ps.Acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := q.UpdateLease(ctx, 100*time.Millisecond); err != nil {
			t.Fatal(err)
		}
		testkit.WaitPermitDone(t, q, 5*time.Second)
		if !errors.Is(q.Err(), relock.ErrLockLost) {
			t.Fatalf("Err after the updated lease ran out: %v", q.Err())
		}
		if err := q.UpdateLease(ctx, 0); !errors.Is(err, relock.ErrInvalidOption) {
			t.Fatalf("UpdateLease(0): %v", err)
		}
		testkit.Eventually(t, 5*time.Second, "both permits to come back", func() bool {
			n, err := ps.Available(ctx)
			return n == 2 && err == nil
		})
		if s := c.Stats(); s.Held != 0 || s.Lost != 2 {
			t.Fatalf("stats %+v: want nothing held, 2 lost", s)
		}
	})
}

// TestPermitWaiterToldOfReclaim: a call that reclaims an expired permit
// publishes, and a waiter that had no expiry to wait for (a permit
// without lease, as Redisson writes) is woken by that message.
func TestPermitWaiterToldOfReclaim(t *testing.T) {
	testkit.ForEach(t, func(t *testing.T, top testkit.Topology) {
		rdb := top.RDB(t)
		waiter, other := top.NewClient(t), top.NewClient(t)
		name := testkit.LockName(t)
		ctx := testkit.CtxTimeout(t, 10*time.Second)
		zset := layout.PermitTimeouts(name)
		if err := rdb.ZAdd(ctx, zset, redis.Z{Score: 922337203685477, Member: "javajavajavajava"}).Err(); err != nil {
			t.Fatal(err)
		}
		if err := rdb.Set(ctx, name, 0, 0).Err(); err != nil {
			t.Fatal(err)
		}
		got := make(chan *relock.Permit, 1)
		go func() {
			p, err := waiter.PermitSemaphore(name).Acquire(ctx)
			if err != nil {
				t.Error(err)
			}
			got <- p
		}()
		testkit.Eventually(t, 5*time.Second, "the waiter to sleep", func() bool { return waiter.Stats().Asleep == 1 })
		if err := rdb.ZAdd(ctx, zset, redis.Z{Score: 1, Member: "javajavajavajava"}).Err(); err != nil { // long expired
			t.Fatal(err)
		}
		if n, err := other.PermitSemaphore(name).Available(ctx); n != 1 || err != nil {
			t.Fatalf("Available after the expiry = %d, %v", n, err)
		}
		p := <-got
		if p == nil {
			t.FailNow()
		}
		if waiter.Stats().Wakeups == 0 {
			t.Fatal("the waiter was not woken by the reclaim message")
		}
		if err := p.Release(ctx); err != nil {
			t.Fatal(err)
		}
	})
}

func TestPermitSemaphoreCancelledWaiterLeavesNothing(t *testing.T) {
	testkit.ForEach(t, func(t *testing.T, top testkit.Topology) {
		c := top.NewClient(t)
		rdb := top.RDB(t)
		ps := testkit.NewPermits(t, c, 1)
		ctx := testkit.CtxTimeout(t, 10*time.Second)
		p, err := ps.Acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		before := testkit.KeysOf(t, rdb, ps.Name())
		waitCancelled(t, c, func(ctx context.Context) error {
			_, err := ps.Acquire(ctx)
			return err
		})
		if s := c.Stats(); s.Channels != 0 || s.Asleep != 0 || s.Held != 1 {
			t.Fatalf("waiter left %+v", s)
		}
		testkit.Eventually(t, 5*time.Second, "the server to drop the subscription", func() bool {
			return channelSubscribers(t, top, layout.Companion(layout.SemaphoreChannel, ps.Name())) == 0
		})
		noNewKeys(t, before, testkit.KeysOf(t, rdb, ps.Name()))
		if n := rdb.ZCard(ctx, layout.PermitTimeouts(ps.Name())).Val(); n != 1 {
			t.Fatalf("%d permits held, want 1", n)
		}
		if err := p.Release(ctx); err != nil {
			t.Fatal(err)
		}
	})
}

func TestPermitSemaphoreBadInput(t *testing.T) {
	testkit.ForEach(t, func(t *testing.T, top testkit.Topology) {
		c := top.NewClient(t)
		ps := c.PermitSemaphore(testkit.LockName(t))
		ctx := testkit.CtxTimeout(t, 10*time.Second)
		for _, n := range []int{0, -3} {
			if _, err := ps.TrySetPermits(ctx, n); !errors.Is(err, relock.ErrInvalidOption) {
				t.Errorf("TrySetPermits(%d): %v", n, err)
			}
		}
		if err := ps.AddPermits(ctx, 0); !errors.Is(err, relock.ErrInvalidOption) {
			t.Errorf("AddPermits(0): %v", err)
		}
		for _, opt := range []relock.LockOption{relock.WithLease(0), relock.WithLease(-time.Second), relock.WithSpin(0, time.Second)} {
			if _, err := ps.Acquire(ctx, opt); !errors.Is(err, relock.ErrInvalidOption) {
				t.Errorf("Acquire with a bad option: %v", err)
			}
		}
		if _, err := c.PermitSemaphore("").TryAcquire(ctx); !errors.Is(err, relock.ErrInvalidName) {
			t.Errorf("TryAcquire of an empty name: %v", err)
		}
		if _, err := ps.TryAcquire(ctx); !errors.Is(err, relock.ErrNotAcquired) {
			t.Errorf("TryAcquire of an unset semaphore: %v", err)
		}
		if s := c.Stats(); s.Held != 0 || s.Channels != 0 {
			t.Fatalf("bad input left state behind: %+v", s)
		}
	})
}

// TestPermitSemaphoreAddPermitsShrinks: a negative AddPermits takes free
// permits away; the semaphore then grants none until enough are added
// back.
func TestPermitSemaphoreAddPermitsShrinks(t *testing.T) {
	testkit.ForEach(t, func(t *testing.T, top testkit.Topology) {
		c := top.NewClient(t)
		ctx := testkit.CtxTimeout(t, time.Minute)
		ps := c.PermitSemaphore(testkit.LockName(t))
		if ok, err := ps.TrySetPermits(ctx, 1); !ok || err != nil {
			t.Fatalf("TrySetPermits: %v %v", ok, err)
		}
		if err := ps.AddPermits(ctx, -2); err != nil {
			t.Fatal(err)
		}
		if n, err := ps.Available(ctx); n != -1 || err != nil {
			t.Fatalf("Available = %d, %v, want -1", n, err)
		}
		if _, err := ps.TryAcquire(ctx); !errors.Is(err, relock.ErrNotAcquired) {
			t.Fatalf("TryAcquire with -1 free = %v, want ErrNotAcquired", err)
		}
		if err := ps.AddPermits(ctx, 2); err != nil {
			t.Fatal(err)
		}
		p, err := ps.TryAcquire(ctx)
		if err != nil {
			t.Fatalf("TryAcquire with 1 free: %v", err)
		}
		if err := p.Release(ctx); err != nil {
			t.Fatal(err)
		}
	})
}

// TestPermitSemaphoreSpin: with WithSpin a waiting Acquire polls by
// backoff and takes the permit once it is released.
func TestPermitSemaphoreSpin(t *testing.T) {
	testkit.ForEach(t, func(t *testing.T, top testkit.Topology) {
		c := top.NewClient(t)
		ctx := testkit.CtxTimeout(t, time.Minute)
		ps := c.PermitSemaphore(testkit.LockName(t))
		if ok, err := ps.TrySetPermits(ctx, 1); !ok || err != nil {
			t.Fatalf("TrySetPermits: %v %v", ok, err)
		}
		held, err := ps.Acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		got := make(chan *relock.Permit, 1)
		go func() {
			p, err := ps.Acquire(ctx, relock.WithSpin(time.Millisecond, 20*time.Millisecond))
			if err != nil {
				t.Error(err)
			}
			got <- p
		}()
		if err := held.Release(ctx); err != nil {
			t.Fatal(err)
		}
		p := <-got
		if p == nil {
			t.Fatal("the spinning waiter got no permit")
		}
		if err := p.Release(ctx); err != nil {
			t.Fatal(err)
		}
		// A spinning call with a context that ends returns its error and
		// leaves nothing held.
		held, err = ps.Acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		sctx, cancel := context.WithTimeout(ctx, 30*time.Millisecond)
		defer cancel()
		if _, err := ps.Acquire(sctx, relock.WithSpin(time.Millisecond, 5*time.Millisecond)); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("spinning Acquire past its deadline: %v", err)
		}
		if err := held.Release(ctx); err != nil {
			t.Fatal(err)
		}
		if n, err := ps.Available(ctx); n != 1 || err != nil {
			t.Fatalf("Available = %d, %v, want the one permit back", n, err)
		}
	})
}

func TestPermitSemaphoreRedissonInterop(t *testing.T) {
	testkit.ForEach(t, func(t *testing.T, top testkit.Topology) {
		rdb := top.RDB(t)
		c := top.NewClient(t, relock.WithWatchdogTimeout(300*time.Millisecond))
		ps := testkit.NewPermits(t, c, 1)
		name := ps.Name()
		java := &javaPermits{rdb: rdb, keys: []string{name, "{" + name + "}:timeout", "redisson_sc:{" + name + "}"}, publish: javaPublish(top)}
		ctx := testkit.CtxTimeout(t, 10*time.Second)

		// Java holds a permit: relock waits and is woken by Java's release.
		javaID := []byte("0123456789abcdef")
		if v, err := java.acquire(ctx, javaID, time.Minute); v != 1 || err != nil {
			t.Fatal(v, err)
		}
		if _, err := ps.TryAcquire(ctx); !errors.Is(err, relock.ErrNotAcquired) {
			t.Fatalf("TryAcquire over Java's permit: %v", err)
		}
		got := make(chan *relock.Permit, 1)
		go func() {
			p, err := ps.Acquire(ctx)
			if err != nil {
				t.Error(err)
			}
			got <- p
		}()
		testkit.Eventually(t, 5*time.Second, "relock to wait", func() bool { return c.Stats().Asleep == 1 })
		if v, err := java.release(ctx, hex.EncodeToString(javaID)); v != 1 || err != nil {
			t.Fatal(v, err)
		}
		p := <-got
		if p == nil {
			t.FailNow()
		}
		if c.Stats().Wakeups == 0 {
			t.Fatal("relock was not woken by Java's release message")
		}
		// A Java permit without a lease: relock waits for the release
		// message alone, and is woken by it.
		javaID2 := []byte("fedcba9876543210")
		if err := p.Release(ctx); err != nil {
			t.Fatal(err)
		}
		if v, err := java.acquire(ctx, javaID2, -1); v != 1 || err != nil {
			t.Fatal(v, err)
		}
		go func() {
			p, err := ps.Acquire(ctx)
			if err != nil {
				t.Error(err)
			}
			got <- p
		}()
		testkit.Eventually(t, 5*time.Second, "relock to wait", func() bool { return c.Stats().Asleep == 1 })
		wakes := c.Stats().Wakeups
		if v, err := java.release(ctx, hex.EncodeToString(javaID2)); v != 1 || err != nil {
			t.Fatal(v, err)
		}
		if p = <-got; p == nil {
			t.FailNow()
		}
		if c.Stats().Wakeups == wakes {
			t.Fatal("relock was not woken by Java's release of a permit without a lease")
		}
		// Java releases relock's permit by its id; the Permit learns of it.
		if v, err := java.release(ctx, p.ID()); v != 1 || err != nil {
			t.Fatalf("Java release of relock's permit %s: %v %v", p.ID(), v, err)
		}
		testkit.WaitPermitDone(t, p, 5*time.Second)
		if !errors.Is(p.Err(), relock.ErrLockLost) {
			t.Fatalf("Err = %v", p.Err())
		}
		// relock releases a Java permit by id, and reclaims an expired one
		// (Java's clock is the test's).
		if v, err := java.acquire(ctx, javaID, time.Minute); v != 1 || err != nil {
			t.Fatal(v, err)
		}
		if err := ps.Release(ctx, hex.EncodeToString(javaID)); err != nil {
			t.Fatal(err)
		}
		if v, err := java.acquire(ctx, javaID, 50*time.Millisecond); v != 1 || err != nil {
			t.Fatal(v, err)
		}
		if p, err := ps.Acquire(ctx); err != nil {
			t.Fatalf("Acquire after Java's permit expired: %v", err)
		} else if err := p.Release(ctx); err != nil {
			t.Fatal(err)
		}
	})
}

// TestPermitGrants: a permit released goes, in the same script, to the
// first call of the semaphore's queue, across Clients and in the order
// they queued, pushed so that the call's Acquire returns on it and
// confirms the permit to its full lease. A listener on the channel that
// does not queue (a Redisson waiter) turns grants off; a permit granted to
// a call that has died costs the next one the short grant, of which it is
// told; a call that gives up leaves the queue; and nothing is left.
func TestPermitGrants(t *testing.T) {
	testkit.ForEach(t, func(t *testing.T, top testkit.Topology) {
		ctx := testkit.CtxTimeout(t, 30*time.Second)
		rdb := top.RDB(t)
		newClient := func(t *testing.T) *relock.Client { return top.NewClient(t, relock.WithoutReplicaSync()) }
		setUp := func(t *testing.T) (string, *relock.Permit) {
			t.Helper()
			name := testkit.LockName(t)
			h := newClient(t)
			if ok, err := h.PermitSemaphore(name).TrySetPermits(ctx, 1); err != nil || !ok {
				t.Fatalf("TrySetPermits: %v, %v", ok, err)
			}
			p, err := h.PermitSemaphore(name).Acquire(ctx)
			if err != nil {
				t.Fatal(err)
			}
			return name, p
		}
		type got struct {
			p   *relock.Permit
			err error
		}
		acquireFor := func(ctx context.Context, c *relock.Client, name string) <-chan got {
			ch := make(chan got, 1)
			go func() {
				p, err := c.PermitSemaphore(name).Acquire(ctx)
				ch <- got{p, err}
			}()
			return ch
		}
		queued := func(name string, n int64) {
			t.Helper()
			testkit.Eventually(t, 5*time.Second, "the calls to queue", func() bool {
				return rdb.ZCard(ctx, permitQueueKey(name)).Val() == n
			})
		}
		received := func(ch <-chan got) *relock.Permit {
			t.Helper()
			g := <-ch
			if g.err != nil {
				t.Fatal(g.err)
			}
			return g.p
		}
		release := func(p *relock.Permit) {
			t.Helper()
			if err := p.Release(ctx); err != nil {
				t.Fatal(err)
			}
		}
		nothingLeft := func(name string) {
			t.Helper()
			testkit.Gone(t, rdb, permitQueueKey(name), layout.PermitTimeouts(name))
			if v := rdb.Get(ctx, name).Val(); v != "1" {
				t.Errorf("%s permits free at the end, want 1", v)
			}
		}

		t.Run("in-order", func(t *testing.T) {
			name, holder := setUp(t)
			a, b := newClient(t), newClient(t)
			gotA := acquireFor(ctx, a, name)
			queued(name, 1)
			gotB := acquireFor(ctx, b, name)
			queued(name, 2)
			release(holder)
			pa := received(gotA)
			if s := a.Stats(); s.Handoffs != 1 || s.Wakeups != 0 {
				t.Errorf("first call: %d grants, %d wake-ups; want the grant pushed, no wake-up", s.Handoffs, s.Wakeups)
			}
			// The grant is confirmed to the call's full lease.
			testkit.Eventually(t, 5*time.Second, "the grant to be confirmed", func() bool {
				exp := rdb.ZScore(ctx, layout.PermitTimeouts(name), mustDecode(t, pa.ID())).Val()
				return time.Until(time.UnixMilli(int64(exp))) > 3*time.Second
			})
			release(pa)
			pb := received(gotB)
			if s := b.Stats(); s.Handoffs != 1 {
				t.Errorf("second call: %d grants, want 1", s.Handoffs)
			}
			release(pb)
			nothingLeft(name)
		})

		t.Run("foreign-listener", func(t *testing.T) {
			name, holder := setUp(t)
			testkit.Listen(t, ctx, rdb, layout.Companion(layout.SemaphoreChannel, name))
			a := newClient(t)
			gotA := acquireFor(ctx, a, name)
			queued(name, 1)
			release(holder)
			pa := received(gotA)
			if s := a.Stats(); s.Handoffs != 0 || s.Wakeups == 0 {
				t.Errorf("with a listener that does not queue: %d grants, %d wake-ups; want the permit freed and announced", s.Handoffs, s.Wakeups)
			}
			release(pa)
			nothingLeft(name)
		})

		t.Run("dead-grantee", func(t *testing.T) {
			name, holder := setUp(t)
			// A call of a Client that has died is first in the queue.
			if err := rdb.ZAdd(ctx, permitQueueKey(name), redis.Z{Score: 1, Member: "30000|o|0dead:1"}).Err(); err != nil {
				t.Fatal(err)
			}
			a := newClient(t)
			gotA := acquireFor(ctx, a, name)
			queued(name, 2)
			release(holder)
			// The holder's permit had a 30s lease: the call gets the
			// permit within the test's bound only if it is told to check
			// again when the dead call's grant runs out.
			pa := received(gotA)
			release(pa)
			nothingLeft(name)
		})

		t.Run("gives-up", func(t *testing.T) {
			name, holder := setUp(t)
			a, b := newClient(t), newClient(t)
			actx, cancel := context.WithCancel(ctx)
			gotA := acquireFor(actx, a, name)
			queued(name, 1)
			gotB := acquireFor(ctx, b, name)
			queued(name, 2)
			cancel()
			if g := <-gotA; !errors.Is(g.err, context.Canceled) {
				t.Fatalf("cancelled Acquire: %v", g.err)
			}
			queued(name, 1)
			release(holder)
			pb := received(gotB)
			if s := b.Stats(); s.Handoffs != 1 {
				t.Errorf("call behind one that gave up: %d grants, want 1", s.Handoffs)
			}
			release(pb)
			nothingLeft(name)
		})
	})
}

func permitQueueKey(name string) string { return layout.Companion(layout.PermitQueue, name) }

func mustDecode(t *testing.T, id string) string {
	t.Helper()
	b, err := hex.DecodeString(id)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestPermitIDNamesItsClient: a permit's id begins with its Client's uuid,
// whether the call took it itself or a release granted it to the call
// waiting in the queue, so that the Client's identity hash
// relock_client:<uuid> tells who holds it; Redisson takes it as any id.
func TestPermitIDNamesItsClient(t *testing.T) {
	testkit.ForEach(t, func(t *testing.T, top testkit.Topology) {
		ctx := testkit.CtxTimeout(t, 30*time.Second)
		rdb := top.RDB(t)
		holder := top.NewClient(t, relock.WithoutReplicaSync(), relock.WithClientName("holder"))
		waiter := top.NewClient(t, relock.WithoutReplicaSync(), relock.WithClientName("waiter"))
		ps := testkit.NewPermits(t, holder, 1)
		clientOf := func(p *relock.Permit) string {
			t.Helper()
			id := p.ID()
			if len(id) != 48 {
				t.Fatalf("permit id %q: want 48 hex digits", id)
			}
			uuid := id[0:8] + "-" + id[8:12] + "-" + id[12:16] + "-" + id[16:20] + "-" + id[20:32]
			return rdb.HGet(ctx, layout.ClientKey(uuid), "name").Val()
		}
		taken, err := ps.Acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if who := clientOf(taken); who != "holder" {
			t.Errorf("the permit taken by an attempt names client %q, want holder", who)
		}
		got := make(chan *relock.Permit, 1)
		go func() {
			p, err := waiter.PermitSemaphore(ps.Name()).Acquire(ctx)
			if err != nil {
				t.Error(err)
			}
			got <- p
		}()
		testkit.Eventually(t, 5*time.Second, "the call to queue", func() bool {
			return rdb.ZCard(ctx, permitQueueKey(ps.Name())).Val() == 1
		})
		if err := taken.Release(ctx); err != nil {
			t.Fatal(err)
		}
		granted := <-got
		if granted == nil {
			t.FailNow()
		}
		if s := waiter.Stats(); s.Handoffs != 1 {
			t.Errorf("%d grants, want the permit granted by the release", s.Handoffs)
		}
		if who := clientOf(granted); who != "waiter" {
			t.Errorf("the permit granted to a queued call names client %q, want waiter", who)
		}
		if err := granted.Release(ctx); err != nil {
			t.Fatal(err)
		}
	})
}
