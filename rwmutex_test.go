package relock_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/testkit"
)

// TestRWMutexReadersShare: readers of two clients hold together, a writer
// is excluded until the last of them leaves, and is woken by its release.
func TestRWMutexReadersShare(t *testing.T) {
	testkit.ForEach(t, func(t *testing.T, top testkit.Topology) {
		a, b, w := top.NewClient(t), top.NewClient(t), top.NewClient(t)
		name := testkit.LockName(t)
		ctx := testkit.CtxTimeout(t, 10*time.Second)
		must := testkit.RWMust(t)
		ra := must(a.RWMutex(name).RLock(ctx))
		rb := must(b.RWMutex(name).TryRLock(ctx))
		rc := must(b.RWMutex(name).RLock(ctx, relock.WithLease(time.Minute)))
		readers := max(ra.Token(), rb.Token(), rc.Token())
		if locked, err := w.RWMutex(name).IsLocked(ctx); err != nil || !locked {
			t.Fatalf("IsLocked = %v, %v", locked, err)
		}
		if _, err := w.RWMutex(name).TryLock(ctx); !errors.Is(err, relock.ErrNotAcquired) {
			t.Fatalf("writer TryLock over readers: %v", err)
		}
		got := make(chan *relock.Lease, 1)
		go func() {
			l, err := w.RWMutex(name).Lock(ctx)
			if err != nil {
				t.Error(err)
			}
			got <- l
		}()
		testkit.Eventually(t, 5*time.Second, "the writer to wait", func() bool {
			return w.Stats().Asleep == 1 && testkit.RWSubscribers(t, top, name) == 1
		})
		testkit.RWUnlockAll(t, ctx, ra, rb)
		select {
		case <-got:
			t.Fatal("writer acquired while a reader holds")
		default:
		}
		testkit.RWUnlockAll(t, ctx, rc)
		wl := <-got
		if wl == nil {
			t.FailNow()
		}
		if s := w.Stats(); s.Wakeups == 0 {
			t.Fatalf("writer not woken by the readers' release: %+v", s)
		}
		if wl.Token() <= readers {
			t.Fatalf("writer's token %d, want above the readers' %d", wl.Token(), readers)
		}
		testkit.RWUnlockAll(t, ctx, wl)
		if keys := testkit.KeysOf(t, top.RDB(t), name); len(keys) > 0 {
			t.Fatalf("keys left: %v", keys)
		}
	})
}

// TestRWMutexWriterExcludes: a writer excludes readers and writers of
// other owners; waiting readers are all woken by its release; readers
// carry the writer's token, the next writer a greater one.
func TestRWMutexWriterExcludes(t *testing.T) {
	testkit.ForEach(t, func(t *testing.T, top testkit.Topology) {
		c, other := top.NewClient(t), top.NewClient(t)
		name := testkit.LockName(t)
		ctx := testkit.CtxTimeout(t, 10*time.Second)
		wl := testkit.RWMust(t)(c.RWMutex(name).Lock(ctx))
		rw := other.RWMutex(name)
		if _, err := rw.TryRLock(ctx); !errors.Is(err, relock.ErrNotAcquired) {
			t.Fatalf("TryRLock over a writer: %v", err)
		}
		if _, err := rw.TryLock(relock.WithOwner(ctx)); !errors.Is(err, relock.ErrNotAcquired) {
			t.Fatalf("TryLock over a writer: %v", err)
		}
		if _, err := c.RWMutex(name).TryLock(ctx); !errors.Is(err, relock.ErrNotAcquired) {
			t.Fatalf("a second one-shot writer of the same client: %v", err)
		}
		const readers = 3
		got := make(chan *relock.Lease, readers)
		for i := 0; i < readers; i++ {
			go func() {
				l, err := rw.RLock(ctx)
				if err != nil {
					t.Error(err)
				}
				got <- l
			}()
		}
		testkit.Eventually(t, 5*time.Second, "the readers to wait", func() bool { return other.Stats().Asleep == readers })
		testkit.RWUnlockAll(t, ctx, wl)
		var rls []*relock.Lease
		var last uint64
		for i := 0; i < readers; i++ {
			l := <-got
			if l == nil {
				t.FailNow()
			}
			if l.Token() < wl.Token() {
				t.Fatalf("reader token %d, below the last writer's %d", l.Token(), wl.Token())
			}
			last = max(last, l.Token())
			rls = append(rls, l)
		}
		testkit.RWUnlockAll(t, ctx, rls...)
		next := testkit.RWMust(t)(rw.Lock(ctx))
		if next.Token() <= last {
			t.Fatalf("next writer's token %d after the readers' %d", next.Token(), last)
		}
		testkit.RWUnlockAll(t, ctx, next)
	})
}

// TestRWMutexDowngrade: a writer takes the read lock too, and keeps it
// after unlocking the write lock; other readers may then join.
func TestRWMutexDowngrade(t *testing.T) {
	testkit.ForEach(t, func(t *testing.T, top testkit.Topology) {
		c, other := top.NewClient(t), top.NewClient(t)
		rdb := top.RDB(t)
		name := testkit.LockName(t)
		ctx := testkit.CtxTimeout(t, 10*time.Second)
		owner := relock.WithOwner(ctx)
		must := testkit.RWMust(t)
		rw := c.RWMutex(name)
		wl := must(rw.Lock(owner))
		rl := must(rw.RLock(owner))
		if rl.Token() != wl.Token() {
			t.Fatalf("downgrade read token %d, writer's %d", rl.Token(), wl.Token())
		}
		if _, err := other.RWMutex(name).TryRLock(ctx); !errors.Is(err, relock.ErrNotAcquired) {
			t.Fatalf("another reader under the writer: %v", err)
		}
		testkit.RWUnlockAll(t, ctx, wl)
		if mode := rdb.HGet(ctx, name, "mode").Val(); mode != "read" {
			t.Fatalf("mode %q after the write unlock, want read", mode)
		}
		if err := rl.Err(); err != nil {
			t.Fatalf("read lease after the write unlock: %v", err)
		}
		if _, err := other.RWMutex(name).TryLock(ctx); !errors.Is(err, relock.ErrNotAcquired) {
			t.Fatalf("a writer over the downgraded reader: %v", err)
		}
		joined := must(other.RWMutex(name).TryRLock(ctx))
		testkit.RWUnlockAll(t, ctx, rl, joined)
		if locked, _ := rw.IsLocked(ctx); locked {
			t.Fatal("locked after every hold was unlocked")
		}
	})
}

// TestRWMutexUpgrade: a reader asking for the write lock gets ErrUpgrade
// at once, from Lock as from TryLock, and its read hold is intact.
func TestRWMutexUpgrade(t *testing.T) {
	testkit.ForEach(t, func(t *testing.T, top testkit.Topology) {
		c := top.NewClient(t)
		rdb := top.RDB(t)
		name := testkit.LockName(t)
		ctx := testkit.CtxTimeout(t, 10*time.Second)
		owner := relock.WithOwner(ctx)
		rw := c.RWMutex(name)
		rl := testkit.RWMust(t)(rw.RLock(owner))
		before := rdb.HGetAll(ctx, name).Val()
		if _, err := rw.TryLock(owner); !errors.Is(err, relock.ErrUpgrade) {
			t.Fatalf("TryLock by a reader: %v, want ErrUpgrade", err)
		}
		if _, err := rw.WLocker().Lock(owner); !errors.Is(err, relock.ErrUpgrade) {
			t.Fatalf("Lock by a reader: %v, want ErrUpgrade", err)
		}
		if after := rdb.HGetAll(ctx, name).Val(); fmt.Sprint(after) != fmt.Sprint(before) {
			t.Fatalf("upgrade attempts changed the lock from %v to %v", before, after)
		}
		if s := c.Stats(); s.Held != 1 || s.Channels != 0 || s.Waits != 0 {
			t.Fatalf("upgrade attempts left state: %+v", s)
		}
		if err := rl.Err(); err != nil {
			t.Fatal(err)
		}
		testkit.RWUnlockAll(t, ctx, rl)
		wl := testkit.RWMust(t)(rw.Lock(owner))
		testkit.RWUnlockAll(t, ctx, wl)
	})
}

// TestRWMutexReentrancy: an owner re-enters each side; every lease is
// unlocked on its own, and a second Unlock of one lease is ErrNotHeld.
func TestRWMutexReentrancy(t *testing.T) {
	testkit.ForEach(t, func(t *testing.T, top testkit.Topology) {
		c := top.NewClient(t)
		rdb := top.RDB(t)
		name := testkit.LockName(t)
		ctx := testkit.CtxTimeout(t, 10*time.Second)
		owner := relock.WithOwner(ctx)
		rw := c.RWMutex(name)
		must := testkit.RWMust(t)
		w1, w2 := must(rw.Lock(owner)), must(rw.Lock(owner))
		if w1.Token() != w2.Token() {
			t.Fatalf("write re-entry token %d, holder's %d", w2.Token(), w1.Token())
		}
		r1, r2 := must(rw.RLock(owner)), must(rw.TryRLock(owner))
		if n := testkit.HoldCount(t, rdb, name); n != 4 {
			t.Fatalf("hold count %d, want 4", n)
		}
		if s := c.Stats(); s.Held != 2 {
			t.Fatalf("%d watchdog entries, want one per owner and side", s.Held)
		}
		testkit.RWUnlockAll(t, ctx, w2)
		if err := w2.Unlock(ctx); !errors.Is(err, relock.ErrNotHeld) {
			t.Fatalf("second Unlock: %v", err)
		}
		testkit.RWUnlockAll(t, ctx, r1, w1)
		if err := r2.Err(); err != nil {
			t.Fatalf("remaining read lease: %v", err)
		}
		testkit.RWUnlockAll(t, ctx, r2)
		if locked, _ := rw.IsLocked(ctx); locked {
			t.Fatal("still locked")
		}
	})
}

// TestRWMutexWatchdog: reader and writer holds outlive several watchdog
// timeouts, and a ForceUnlock is reported to all of them as a loss.
func TestRWMutexWatchdog(t *testing.T) {
	testkit.ForEach(t, func(t *testing.T, top testkit.Topology) {
		const timeout = 500 * time.Millisecond
		c := top.NewClient(t, relock.WithWatchdogTimeout(timeout))
		other := top.NewClient(t)
		name := testkit.LockName(t)
		ctx := testkit.CtxTimeout(t, 10*time.Second)
		owner := relock.WithOwner(ctx)
		rw := c.RWMutex(name)
		must := testkit.RWMust(t)
		held := func(leases []*relock.Lease, d time.Duration) {
			t.Helper()
			start := time.Now()
			for time.Since(start) < d {
				time.Sleep(timeout / 4) // the passing of time is what is tested
				for _, l := range leases {
					if err := l.Err(); err != nil {
						t.Fatalf("lost after %v: %v", time.Since(start), err)
					}
				}
			}
		}
		wl := must(rw.Lock(owner))
		leases := []*relock.Lease{must(rw.RLock(owner)), must(rw.RLock(owner))}
		held(append(leases, wl), 3*timeout)
		testkit.RWUnlockAll(t, ctx, wl) // downgrade: one-shot readers may join
		second := top.NewClient(t, relock.WithWatchdogTimeout(timeout))
		leases = append(leases, must(rw.RLock(ctx)), must(second.RWMutex(name).RLock(ctx)))
		held(leases, 2*timeout)
		if ok, err := other.RWMutex(name).ForceUnlock(ctx); err != nil || !ok {
			t.Fatalf("ForceUnlock = %v, %v", ok, err)
		}
		for _, l := range leases {
			testkit.WaitDone(t, l, 5*time.Second)
			if !errors.Is(l.Err(), relock.ErrLockLost) {
				t.Fatalf("Err = %v after ForceUnlock", l.Err())
			}
		}
		for _, k := range testkit.KeysOf(t, top.RDB(t), name) {
			if !rwIsMarker(k) {
				t.Fatalf("ForceUnlock left %q", k)
			}
		}
		if ok, _ := other.RWMutex(name).ForceUnlock(ctx); ok {
			t.Fatal("ForceUnlock of a free lock reported true")
		}
	})
}

// isMarker reports whether key is a request or release marker, which
// outlives the holds of reentrant owners on purpose.
func rwIsMarker(key string) bool {
	return strings.HasPrefix(key, "relock_lock_request:") || strings.HasPrefix(key, "redisson_unlock_latch:")
}

// TestRWMutexViews: the read and write views are Lockers that lock the
// sides of the RWMutex.
func TestRWMutexViews(t *testing.T) {
	testkit.ForEach(t, func(t *testing.T, top testkit.Topology) {
		c := top.NewClient(t)
		name := testkit.LockName(t)
		ctx := testkit.CtxTimeout(t, 10*time.Second)
		rw := c.RWMutex(name)
		lockers := []relock.Locker{rw.RLocker(), rw.RLocker(), rw.WLocker()}
		for _, l := range lockers {
			if l.Name() != name {
				t.Fatalf("Name = %q", l.Name())
			}
		}
		r1 := testkit.RWMust(t)(lockers[0].Lock(ctx))
		r2 := testkit.RWMust(t)(lockers[1].TryLock(ctx))
		if _, err := lockers[2].TryLock(ctx); !errors.Is(err, relock.ErrNotAcquired) {
			t.Fatalf("write view over two readers: %v", err)
		}
		testkit.RWUnlockAll(t, ctx, r1, r2)
		w := testkit.RWMust(t)(lockers[2].Lock(ctx))
		if _, err := lockers[0].TryLock(ctx); !errors.Is(err, relock.ErrNotAcquired) {
			t.Fatalf("read view over a writer: %v", err)
		}
		testkit.RWUnlockAll(t, ctx, w)
	})
}

// TestRWMutexSpin: WithSpin waits by backoff on either side, subscribing
// to nothing.
func TestRWMutexSpin(t *testing.T) {
	testkit.ForEach(t, func(t *testing.T, top testkit.Topology) {
		c, other := top.NewClient(t), top.NewClient(t)
		name := testkit.LockName(t)
		ctx := testkit.CtxTimeout(t, 10*time.Second)
		wl := testkit.RWMust(t)(other.RWMutex(name).Lock(ctx, relock.WithLease(100*time.Millisecond)))
		rl := testkit.RWMust(t)(c.RWMutex(name).RLock(ctx, relock.WithSpin(time.Millisecond, 10*time.Millisecond)))
		if s := c.Stats(); s.Waits != 1 || s.Channels != 0 {
			t.Fatalf("stats %+v: want one wait and no channel", s)
		}
		if !errors.Is(wl.Err(), relock.ErrLockLost) {
			t.Fatalf("writer's expired lease: %v", wl.Err())
		}
		testkit.RWUnlockAll(t, ctx, rl)
	})
}

// TestRWMutexTTL: TTL is the lock's time left in either mode, like the
// Mutex's: -2ns when free, at most the longest hold's lease while held.
func TestRWMutexTTL(t *testing.T) {
	testkit.ForEach(t, func(t *testing.T, top testkit.Topology) {
		c := top.NewClient(t)
		ctx := testkit.CtxTimeout(t, time.Minute)
		rw := c.RWMutex(testkit.LockName(t))
		if d, err := rw.TTL(ctx); d != -2*time.Nanosecond || err != nil {
			t.Fatalf("TTL of a free lock = %v, %v, want -2ns", d, err)
		}
		r, err := rw.RLock(ctx, relock.WithLease(time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		if d, err := rw.TTL(ctx); d <= 0 || d > time.Minute || err != nil {
			t.Fatalf("TTL while read-locked for 1m = %v, %v", d, err)
		}
		if err := r.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		w, err := rw.Lock(ctx, relock.WithLease(30*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		if d, err := rw.TTL(ctx); d <= 0 || d > 30*time.Second || err != nil {
			t.Fatalf("TTL while write-locked for 30s = %v, %v", d, err)
		}
		if err := w.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	})
}
