package relock_test

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/testkit"
)

func TestFairMutexBadInput(t *testing.T) {
	testkit.ForEach(t, func(t *testing.T, top testkit.Topology) {
		rdb := top.RDB(t)
		c := top.NewClient(t)
		ctx := testkit.CtxTimeout(t, 10*time.Second)
		for _, name := range []string{"", string(make([]byte, relock.MaxNameLen+1)), "a}b", "a{}b", "a{b"} {
			m := c.FairMutex(name)
			if _, err := m.Lock(ctx); !errors.Is(err, relock.ErrInvalidName) {
				t.Fatalf("Lock(%.10q): %v", name, err)
			}
			if _, err := m.TryLock(ctx); !errors.Is(err, relock.ErrInvalidName) {
				t.Fatalf("TryLock(%.10q): %v", name, err)
			}
			if _, err := m.IsLocked(ctx); !errors.Is(err, relock.ErrInvalidName) {
				t.Fatalf("IsLocked(%.10q): %v", name, err)
			}
			if _, err := m.TTL(ctx); !errors.Is(err, relock.ErrInvalidName) {
				t.Fatalf("TTL(%.10q): %v", name, err)
			}
			if _, err := m.ForceUnlock(ctx); !errors.Is(err, relock.ErrInvalidName) {
				t.Fatalf("ForceUnlock(%.10q): %v", name, err)
			}
		}
		name := testkit.LockName(t)
		for _, d := range []time.Duration{0, -time.Second, time.Millisecond} {
			if _, err := c.FairMutex(name, relock.WithWaiterTimeout(d)).Lock(ctx); !errors.Is(err, relock.ErrInvalidOption) {
				t.Fatalf("WithWaiterTimeout(%v): %v", d, err)
			}
		}
		if _, err := c.FairMutex(name).Lock(ctx, relock.WithLease(0)); !errors.Is(err, relock.ErrInvalidOption) {
			t.Fatalf("WithLease(0): %v", err)
		}
		if _, err := c.FairMutex(name).Lock(ctx, relock.WithSpin(0, 0)); !errors.Is(err, relock.ErrInvalidOption) {
			t.Fatalf("WithSpin(0, 0): %v", err)
		}
		// Keys of another type.
		for _, key := range []string{name, testkit.FairQueueKey(name)} {
			if err := rdb.Set(ctx, key, "x", 0).Err(); err != nil {
				t.Fatal(err)
			}
			if _, err := c.FairMutex(name).TryLock(ctx); !errors.Is(err, relock.ErrWrongType) {
				t.Fatalf("TryLock with %s a string: %v", key, err)
			}
			if _, err := c.FairMutex(name).Lock(ctx); !errors.Is(err, relock.ErrWrongType) {
				t.Fatalf("Lock with %s a string: %v", key, err)
			}
			rdb.Del(ctx, key)
		}
		rdb.Set(ctx, name, "x", 0)
		if _, err := c.FairMutex(name).ForceUnlock(ctx); !errors.Is(err, relock.ErrWrongType) {
			t.Fatalf("ForceUnlock of a string: %v", err)
		}
		rdb.Del(ctx, name)
		testkit.NoKeysLeft(t, rdb, name)
		// A closed client.
		closed := top.NewClient(t)
		_ = closed.Close()
		if _, err := closed.FairMutex(name).Lock(ctx); !errors.Is(err, relock.ErrClosed) {
			t.Fatalf("Lock on a closed client: %v", err)
		}
	})
}

// TestFairMutexTryLockRespectsQueue: TryLock never goes past a live
// waiter, even while the lock is free, and Lock queues behind it; once the
// waiter's deadline passes it is skipped.
func TestFairMutexTryLockRespectsQueue(t *testing.T) {
	testkit.ForEach(t, func(t *testing.T, top testkit.Topology) {
		rdb := top.RDB(t)
		c := top.NewClient(t)
		name := testkit.LockName(t)
		m := c.FairMutex(name, relock.WithWaiterTimeout(300*time.Millisecond))
		ctx := testkit.CtxTimeout(t, 10*time.Second)
		// A waiter of another process, queued while the lock is free: its
		// deadline is 500ms away on the server's clock.
		now, err := rdb.Time(ctx).Result()
		if err != nil {
			t.Fatal(err)
		}
		ghost := "00000000-0000-4000-8000-000000000000:1"
		rdb.ZAdd(ctx, testkit.FairTimeoutKey(name), redis.Z{Score: float64(now.UnixMilli() + 500), Member: ghost})
		rdb.RPush(ctx, testkit.FairQueueKey(name), ghost)
		if _, err := m.TryLock(ctx); !errors.Is(err, relock.ErrNotAcquired) {
			t.Fatalf("TryLock past a live waiter: %v", err)
		}
		if q := testkit.Queued(t, rdb, name); len(q) != 1 {
			t.Fatalf("TryLock joined the queue: %v", q)
		}
		l, err := m.Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if q := testkit.Queued(t, rdb, name); len(q) != 0 {
			t.Fatalf("queue %v after the dead waiter was skipped", q)
		}
		if err := l.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		testkit.NoKeysLeft(t, rdb, name)
	})
}

// TestFairMutexFixedLease: a WithLease hold expires and the first waiter,
// told by nobody, takes the lock when the holder's TTL runs out.
func TestFairMutexFixedLease(t *testing.T) {
	testkit.ForEach(t, func(t *testing.T, top testkit.Topology) {
		a, b := top.NewClient(t), top.NewClient(t)
		name := testkit.LockName(t)
		ctx := testkit.CtxTimeout(t, 10*time.Second)
		stale, err := a.FairMutex(name).Lock(ctx, relock.WithLease(150*time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		next, err := b.FairMutex(name).Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if !errors.Is(stale.Err(), relock.ErrLockLost) {
			t.Fatalf("expired lease Err = %v", stale.Err())
		}
		if next.Token() <= stale.Token() {
			t.Fatalf("token %d after %d", next.Token(), stale.Token())
		}
		if err := stale.Unlock(ctx); !errors.Is(err, relock.ErrNotHeld) {
			t.Fatalf("stale Unlock: %v", err)
		}
		if ttl, err := b.FairMutex(name).TTL(ctx); err != nil || ttl <= 0 {
			t.Fatalf("TTL %v, %v", ttl, err)
		}
		if err := next.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		if locked, err := b.FairMutex(name).IsLocked(ctx); err != nil || locked {
			t.Fatalf("IsLocked after Unlock: %v, %v", locked, err)
		}
		testkit.NoKeysLeft(t, top.RDB(t), name)
	})
}

// TestFairMutexSpin: waiters that poll (WithSpin) keep the order too.
func TestFairMutexSpin(t *testing.T) {
	testkit.ForEach(t, func(t *testing.T, top testkit.Topology) {
		rdb := top.RDB(t)
		c := top.NewClient(t)
		name := testkit.LockName(t)
		ctx := testkit.CtxTimeout(t, 20*time.Second)
		holder, err := c.FairMutex(name).Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		const waiters = 5
		done := make(chan int, waiters)
		var wg sync.WaitGroup
		for i := 0; i < waiters; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				l, err := c.FairMutex(name).Lock(ctx, relock.WithSpin(time.Millisecond, 20*time.Millisecond))
				if err != nil {
					t.Error(err)
					done <- -1
					return
				}
				done <- i
				if err := l.Unlock(ctx); err != nil {
					t.Error(err)
				}
			}()
			testkit.WaitQueued(t, rdb, name, i+1)
		}
		if s := c.Stats(); s.Channels != 0 {
			t.Fatalf("spinning waiters subscribed: %+v", s)
		}
		if err := holder.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		for i := 0; i < waiters; i++ {
			if got := <-done; got != i {
				t.Fatalf("waiter %d acquired as %d", got, i)
			}
		}
		wg.Wait()
		testkit.NoKeysLeft(t, rdb, name)
	})
}

// TestFairMutexHeartbeat: waiters queued for several waiter timeouts keep
// their places by refreshing them.
func TestFairMutexHeartbeat(t *testing.T) {
	testkit.ForEach(t, func(t *testing.T, top testkit.Topology) {
		const timeout = 150 * time.Millisecond
		rdb := top.RDB(t)
		a, b := top.NewClient(t), top.NewClient(t)
		name := testkit.LockName(t)
		ctx := testkit.CtxTimeout(t, 10*time.Second)
		holder, err := a.FairMutex(name).Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		const waiters = 3
		done := make(chan int, waiters)
		var wg sync.WaitGroup
		for i := 0; i < waiters; i++ {
			m := []*relock.Client{a, b}[i%2].FairMutex(name, relock.WithWaiterTimeout(timeout))
			wg.Add(1)
			go func() {
				defer wg.Done()
				l, err := m.Lock(ctx)
				if err != nil {
					t.Error(err)
					done <- -1
					return
				}
				done <- i
				if err := l.Unlock(ctx); err != nil {
					t.Error(err)
				}
			}()
			testkit.WaitQueued(t, rdb, name, i+1)
		}
		q := testkit.Queued(t, rdb, name)
		time.Sleep(4 * timeout) // the passing of time is what is tested
		if got := testkit.Queued(t, rdb, name); fmt.Sprint(got) != fmt.Sprint(q) {
			t.Fatalf("queue %v after %v, was %v", got, 4*timeout, q)
		}
		if err := holder.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		for i := 0; i < waiters; i++ {
			if got := <-done; got != i {
				t.Fatalf("waiter %d acquired as %d", got, i)
			}
		}
		wg.Wait()
		testkit.NoKeysLeft(t, rdb, name)
	})
}
