package relock_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/history"
	"github.com/relock-go/relock/internal/testkit"
)

// TestMutexHammer: 16 goroutines over two Clients on one name guard an
// unsynchronised counter with the lock only; -race and the history checker
// catch any overlap.
func TestMutexHammer(t *testing.T) {
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

func TestReentrancy(t *testing.T) {
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

func TestPlainContextIsNotReentrant(t *testing.T) {
	testkit.ForEach(t, func(t *testing.T, top testkit.Topology) {
		m := top.NewClient(t).Mutex(testkit.LockName(t))
		ctx := testkit.CtxTimeout(t, 10*time.Second)
		l, err := m.Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
		defer cancel()
		if _, err := m.Lock(short); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("second Lock with a plain context: %v, want it to block until the deadline", err)
		}
		if err := l.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	})
}

func TestFencingTokensGrow(t *testing.T) {
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

// TestWatchdogKeepsLockAlive holds a lock for over three watchdog timeouts.
func TestWatchdogKeepsLockAlive(t *testing.T) {
	testkit.ForEach(t, func(t *testing.T, top testkit.Topology) {
		const timeout = 300 * time.Millisecond
		c := top.NewClient(t, relock.WithWatchdogTimeout(timeout))
		other := top.NewClient(t)
		m := c.Mutex(testkit.LockName(t))
		ctx := testkit.CtxTimeout(t, 10*time.Second)
		l, err := m.Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		for time.Since(start) < 4*timeout {
			time.Sleep(timeout / 4) // the passing of time is what is tested
			if err := l.Err(); err != nil {
				t.Fatalf("lost after %v: %v", time.Since(start), err)
			}
			if _, err := other.Mutex(m.Name()).TryLock(ctx); !errors.Is(err, relock.ErrNotAcquired) {
				t.Fatalf("another client's TryLock after %v: %v", time.Since(start), err)
			}
		}
		ttl, err := m.TTL(ctx)
		if err != nil || ttl <= 0 || ttl > timeout {
			t.Fatalf("TTL %v, %v: want in (0, %v]", ttl, err, timeout)
		}
		if err := l.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	})
}

// TestFixedLeaseExpires: a WithLease hold expires, its Lease says so, and
// its stale Unlock leaves the next holder alone.
func TestFixedLeaseExpires(t *testing.T) {
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

func TestTryLockAndTTL(t *testing.T) {
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

func TestLeaseContext(t *testing.T) {
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

// TestMutexHammerWithCancellation: waiters that give up at random points,
// in the middle of a wait, an attempt or a handoff, never break mutual
// exclusion and leave nothing behind.
func TestMutexHammerWithCancellation(t *testing.T) {
	testkit.ForEach(t, func(t *testing.T, top testkit.Topology) {
		for _, nclients := range []int{1, 2} {
			t.Run(fmt.Sprintf("clients=%d", nclients), func(t *testing.T) {
				var clients []*relock.Client
				for i := 0; i < nclients; i++ {
					clients = append(clients, top.NewClient(t))
				}
				name := testkit.LockName(t)
				rec := history.New()
				ctx := testkit.CtxTimeout(t, time.Minute)
				var acquired, gaveUp atomic.Int64
				var wg sync.WaitGroup
				for i := 0; i < 12; i++ {
					c := clients[i%nclients]
					wg.Add(1)
					go func(seed int64) {
						defer wg.Done()
						rnd := rand.New(rand.NewSource(seed))
						m := c.Mutex(name)
						for j := 0; j < 30; j++ {
							wctx, cancel := context.WithTimeout(ctx, time.Duration(rnd.Intn(3000))*time.Microsecond)
							l, err := m.Lock(wctx)
							cancel()
							if err != nil {
								if !errors.Is(err, context.DeadlineExceeded) {
									t.Error(err)
									return
								}
								gaveUp.Add(1)
								continue
							}
							acquired.Add(1)
							h := rec.Begin(fmt.Sprint(seed), name, l.Token())
							runtime.Gosched()
							h.End()
							if err := l.Unlock(ctx); err != nil {
								t.Error(err)
								return
							}
						}
					}(int64(i))
				}
				wg.Wait()
				if v := rec.Check(); len(v) > 0 {
					t.Fatalf("%d violations, first: %+v", len(v), v[0])
				}
				if acquired.Load() == 0 || gaveUp.Load() == 0 {
					t.Fatalf("acquired %d, gave up %d: the test exercised one path only", acquired.Load(), gaveUp.Load())
				}
				if keys := testkit.KeysOf(t, top.RDB(t), name); len(keys) > 0 {
					t.Fatalf("keys left behind: %v", keys)
				}
				for _, c := range clients {
					if s := c.Stats(); s.Held != 0 || s.Channels != 0 || s.Asleep != 0 {
						t.Fatalf("state left behind: %+v", s)
					}
				}
			})
		}
	})
}
