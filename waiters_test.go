package relock_test

import (
	"context"
	"testing"
	"time"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/testkit"
)

// Waiters never sleep past a free moment: whatever shortens the time a
// waiter was told to sleep (a reader leaving, a lease updated, a lock
// changing hands) must reach the waiter. Each test below gives the waiter a
// stale deadline of a minute or more and a context that ends long before
// it (but long after the lock or permit is really free): a waiter that
// sleeps out the stale deadline fails with the context's error.

// staleBound is the context deadline of a waiter in these tests: far below
// the stale deadline it was told (a minute), far above the moment the lock
// or permit becomes free (about a second).
const staleBound = 20 * time.Second

// waited is the outcome of a waiting call and when it returned.
type waited[T any] struct {
	v   T
	err error
	at  time.Time
}

// waitInBackground runs call with a context that ends after staleBound
// and delivers its outcome.
func waitInBackground[T any](t *testing.T, ctx context.Context, call func(context.Context) (T, error)) <-chan waited[T] {
	got := make(chan waited[T], 1)
	wctx, cancel := context.WithTimeout(ctx, staleBound)
	t.Cleanup(cancel)
	go func() {
		v, err := call(wctx)
		got <- waited[T]{v, err, time.Now()}
	}()
	return got
}

// siblingWaits starts two waiting calls of c, short and then long, once
// the first sleeps; then runs release, which is to wake one of them (the
// older, short, which takes what it waits for for a second and lets it
// expire); and returns the outcome of long. long must not sleep out a stale
// time: it fails the test if it does.
func siblingWaits[T any](t *testing.T, ctx context.Context, c *relock.Client, short, long func(context.Context) (T, error), release func() error) waited[T] {
	t.Helper()
	shortGot := waitInBackground(t, ctx, short)
	testkit.Eventually(t, 5*time.Second, "the first waiter to sleep", func() bool { return c.Stats().Asleep == 1 })
	longGot := waitInBackground(t, ctx, long)
	testkit.Eventually(t, 5*time.Second, "the second waiter to sleep", func() bool { return c.Stats().Asleep == 2 })
	if err := release(); err != nil {
		t.Fatal(err)
	}
	first := <-shortGot
	if first.err != nil {
		// Say whether the newer call took it instead, or starved too.
		select {
		case second := <-longGot:
			t.Logf("the newer call returned meanwhile: %v, err %v", second.v, second.err)
		default:
			t.Logf("the newer call still waits; the Client's stats: %+v", c.Stats())
		}
		t.Fatal(first.err)
	}
	second := <-longGot
	if second.err != nil {
		t.Fatalf("waiter, told the holder's hour, did not get what its fellow took for a second when that second was up: %v", second.err)
	}
	t.Logf("second waiter acquired %v after the first", second.at.Sub(first.at).Round(time.Millisecond))
	return second
}

// TestRWMutexWriterToldWhenReaderLeaves: a writer waits on two readers, one
// with a short lease and one with a long one. The long reader unlocks: the
// lock now lives only as long as the short reader's hold, which expires
// without an unlock. The writer must get the lock when it does, not when
// the long reader's hold would have ended. The release tells the writer on
// its Client's grant channel, as a waiter in the lock's queue: its Client
// has no replica sync, whose calls do not queue (and, as Redisson's,
// sleep until the end they were told).
func TestRWMutexWriterToldWhenReaderLeaves(t *testing.T) {
	testkit.ForEach(t, func(t *testing.T, top testkit.Topology) {
		a, b, w := top.NewClient(t), top.NewClient(t), top.NewClient(t, relock.WithoutReplicaSync())
		name := testkit.LockName(t)
		ctx := testkit.CtxTimeout(t, staleBound+10*time.Second)
		must := testkit.RWMust(t)
		must(a.RWMutex(name).RLock(ctx, relock.WithLease(time.Second))) // left to expire
		long := must(b.RWMutex(name).RLock(ctx, relock.WithLease(time.Hour)))
		got := waitInBackground(t, ctx, func(ctx context.Context) (*relock.Lease, error) {
			return w.RWMutex(name).Lock(ctx)
		})
		testkit.Eventually(t, 5*time.Second, "the writer to wait", func() bool {
			return w.Stats().Asleep == 1 && testkit.RWSubscribers(t, top, name) == 1
		})
		left := time.Now()
		testkit.RWUnlockAll(t, ctx, long)
		r := <-got
		if r.err != nil {
			t.Fatalf("writer, told the long reader's hour, did not get the lock freed by the short reader's expiry: %v", r.err)
		}
		t.Logf("writer acquired %v after the long reader left", r.at.Sub(left).Round(time.Millisecond))
		testkit.RWUnlockAll(t, ctx, r.v)
	})
}

// TestPermitWaiterToldOfShorterLease: a waiter sleeps on the only permit,
// held under the watchdog; the holder shortens the permit's lease and its
// Client closes. The waiter must get the permit when the short lease runs
// out, not at the watchdog's expiry it was told.
func TestPermitWaiterToldOfShorterLease(t *testing.T) {
	testkit.ForEach(t, func(t *testing.T, top testkit.Topology) {
		holder := top.NewClient(t, relock.WithWatchdogTimeout(time.Hour))
		waiter := top.NewClient(t)
		name := testkit.NewPermits(t, holder, 1).Name()
		ctx := testkit.CtxTimeout(t, staleBound+10*time.Second)
		p, err := holder.PermitSemaphore(name).Acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		got := waitInBackground(t, ctx, func(ctx context.Context) (*relock.Permit, error) {
			return waiter.PermitSemaphore(name).Acquire(ctx)
		})
		testkit.Eventually(t, 5*time.Second, "the waiter to sleep", func() bool { return waiter.Stats().Asleep == 1 })
		updated := time.Now()
		if err := p.UpdateLease(ctx, 300*time.Millisecond); err != nil {
			t.Fatal(err)
		}
		if err := holder.Close(); err != nil {
			t.Fatal(err)
		}
		r := <-got
		if r.err != nil {
			t.Fatalf("waiter, told the watchdog's hour, did not get the permit whose lease was cut to 300ms: %v", r.err)
		}
		t.Logf("waiter acquired %v after the lease update", r.at.Sub(updated).Round(time.Millisecond))
		if err := r.v.Release(ctx); err != nil {
			t.Fatal(err)
		}
	})
}

// TestMutexSiblingToldOfShorterHold: two calls of one Client wait on a
// lock held for an hour by another Client; the release wakes one of them,
// which takes the lock with a one-second lease and lets it expire. The
// other, told the hour at its last attempt, must get the lock when that
// second is up.
func TestMutexSiblingToldOfShorterHold(t *testing.T) {
	testkit.ForEach(t, func(t *testing.T, top testkit.Topology) {
		holder, c := top.NewClient(t), top.NewClient(t)
		name := testkit.LockName(t)
		ctx := testkit.CtxTimeout(t, staleBound+10*time.Second)
		held, err := holder.Mutex(name).Lock(ctx, relock.WithLease(time.Hour))
		if err != nil {
			t.Fatal(err)
		}
		r := siblingWaits(t, ctx, c, func(ctx context.Context) (*relock.Lease, error) {
			return c.Mutex(name).Lock(ctx, relock.WithLease(time.Second)) // left to expire
		}, func(ctx context.Context) (*relock.Lease, error) {
			return c.Mutex(name).Lock(ctx)
		}, func() error { return held.Unlock(ctx) })
		if err := r.v.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	})
}

// TestMutexLeavingWaiterPassesItsTime: a lock's TTL is cut without a
// message (as a Redisson holder re-entering with a shorter lease does).
// Of two waiters of one Client, only the later one was told the new TTL;
// it gives up. The other, told the old hour, must get the lock when the
// new TTL runs out.
func TestMutexLeavingWaiterPassesItsTime(t *testing.T) {
	testkit.ForEach(t, func(t *testing.T, top testkit.Topology) {
		holder, c := top.NewClient(t), top.NewClient(t)
		rdb := top.RDB(t)
		name := testkit.LockName(t)
		ctx := testkit.CtxTimeout(t, staleBound+10*time.Second)
		if _, err := holder.Mutex(name).Lock(ctx, relock.WithLease(time.Hour)); err != nil {
			t.Fatal(err)
		}
		got := waitInBackground(t, ctx, func(ctx context.Context) (*relock.Lease, error) {
			return c.Mutex(name).Lock(ctx)
		})
		testkit.Eventually(t, 5*time.Second, "the first waiter to sleep", func() bool { return c.Stats().Asleep == 1 })
		if err := rdb.PExpire(ctx, name, 2*time.Second).Err(); err != nil {
			t.Fatal(err)
		}
		lctx, leave := context.WithCancel(ctx)
		left := waitInBackground(t, lctx, func(ctx context.Context) (*relock.Lease, error) {
			return c.Mutex(name).Lock(ctx)
		})
		testkit.Eventually(t, 5*time.Second, "the second waiter to sleep", func() bool { return c.Stats().Asleep == 2 })
		leave()
		if r := <-left; r.err == nil {
			t.Fatal("the second waiter got the lock")
		}
		r := <-got
		if r.err != nil {
			t.Fatalf("waiter, told the holder's hour, did not get the lock when its cut TTL ran out: %v", r.err)
		}
		if err := r.v.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	})
}

// TestPermitSiblingToldOfShorterLease: two calls of one Client wait for
// the only permit, held for an hour by another Client; its release wakes
// one of them, which takes the permit for one second and lets it expire.
// The other must get the permit when that second is up.
func TestPermitSiblingToldOfShorterLease(t *testing.T) {
	testkit.ForEach(t, func(t *testing.T, top testkit.Topology) {
		holder := top.NewClient(t, relock.WithWatchdogTimeout(time.Hour))
		c := top.NewClient(t)
		name := testkit.NewPermits(t, holder, 1).Name()
		ctx := testkit.CtxTimeout(t, staleBound+10*time.Second)
		held, err := holder.PermitSemaphore(name).Acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		r := siblingWaits(t, ctx, c, func(ctx context.Context) (*relock.Permit, error) {
			return c.PermitSemaphore(name).Acquire(ctx, relock.WithLease(time.Second)) // left to expire
		}, func(ctx context.Context) (*relock.Permit, error) {
			return c.PermitSemaphore(name).Acquire(ctx)
		}, func() error { return held.Release(ctx) })
		if err := r.v.Release(ctx); err != nil {
			t.Fatal(err)
		}
	})
}

// TestFairMutexHeadToldOfShorterHold: the head of a fair lock's queue
// takes the lock from an hour-long holder for a one-second lease and lets
// it expire. The next waiter, told the hour at its last attempt and with a
// heartbeat of a minute, must get the lock when that second is up.
func TestFairMutexHeadToldOfShorterHold(t *testing.T) {
	testkit.ForEach(t, func(t *testing.T, top testkit.Topology) {
		holder, a, b := top.NewClient(t), top.NewClient(t), top.NewClient(t)
		name := testkit.LockName(t)
		ctx := testkit.CtxTimeout(t, staleBound+10*time.Second)
		fair := func(c *relock.Client) *relock.FairMutex {
			return c.FairMutex(name, relock.WithWaiterTimeout(3*time.Minute))
		}
		held, err := fair(holder).Lock(ctx, relock.WithLease(time.Hour))
		if err != nil {
			t.Fatal(err)
		}
		first := waitInBackground(t, ctx, func(ctx context.Context) (*relock.Lease, error) {
			return fair(a).Lock(ctx, relock.WithLease(time.Second)) // left to expire
		})
		testkit.Eventually(t, 5*time.Second, "the first waiter to sleep", func() bool { return a.Stats().Asleep == 1 })
		got := waitInBackground(t, ctx, func(ctx context.Context) (*relock.Lease, error) {
			return fair(b).Lock(ctx)
		})
		testkit.Eventually(t, 5*time.Second, "the second waiter to sleep", func() bool { return b.Stats().Asleep == 1 })
		if err := held.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		f := <-first
		if f.err != nil {
			t.Fatal(f.err)
		}
		r := <-got
		if r.err != nil {
			t.Fatalf("next waiter, told the holder's hour, did not get the lock when the one-second hold before it expired: %v", r.err)
		}
		t.Logf("next waiter acquired %v after the first", r.at.Sub(f.at).Round(time.Millisecond))
		if err := r.v.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	})
}
