package conformance

import (
	"context"
	"errors"
	"math/rand"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/layout"
	"github.com/relock-go/relock/internal/testkit"
)

// SemaphoreHammer: goroutines over three Clients, or in one, take one
// or two of three permits at a time, some giving up at random points;
// never more than three are in use, more than one is, and every permit is
// back at the end. With three Clients releases publish; with one (without
// replica sync, which turns it off), they hand their permits to the
// Client's own calls (Semaphore.releasePassing), some of which give up meanwhile.
func SemaphoreHammer(t *testing.T) {
	testkit.ForEach(t, func(t *testing.T, top testkit.Topology) {
		t.Run("3-clients", func(t *testing.T) { semaphoreHammer(t, top, 3) })
		t.Run("1-client", func(t *testing.T) { semaphoreHammer(t, top, 1, relock.WithoutReplicaSync()) })
	})
}

// SemaphoreWakesWhatFits: a release wakes only the local waiters its
// permits can satisfy, oldest first, skipping a request too large.
func SemaphoreWakesWhatFits(t *testing.T) {
	testkit.ForEach(t, func(t *testing.T, top testkit.Topology) {
		waiter, releaser := top.NewClient(t), top.NewClient(t)
		name := testkit.LockName(t)
		ctx := testkit.CtxTimeout(t, 20*time.Second)
		s := waiter.Semaphore(name)
		if ok, err := s.TrySetPermits(ctx, 1); !ok || err != nil {
			t.Fatal(ok, err)
		}
		if n, err := s.Drain(ctx); n != 1 || err != nil {
			t.Fatal(n, err)
		}
		done := make(chan int, 3)
		for i, n := range []int{3, 1, 1} { // started one after the other: oldest first
			go func() {
				if err := s.Acquire(ctx, n); err != nil {
					t.Error(err)
				}
				done <- i
			}()
			testkit.Eventually(t, 5*time.Second, "the waiter to sleep", func() bool { return waiter.Stats().Asleep == int64(i+1) })
		}
		before := waiter.Stats().Wakeups
		if err := releaser.Semaphore(name).Release(ctx, 1); err != nil {
			t.Fatal(err)
		}
		if i := <-done; i != 1 {
			t.Fatalf("waiter %d went first; want the oldest that fits, 1", i)
		}
		testkit.Eventually(t, 5*time.Second, "the others to sleep", func() bool { return waiter.Stats().Asleep == 2 })
		if woken := waiter.Stats().Wakeups - before; woken != 1 {
			t.Fatalf("one permit woke %d waiters, want 1", woken)
		}
		if err := releaser.Semaphore(name).Release(ctx, 4); err != nil {
			t.Fatal(err)
		}
		for i := 0; i < 2; i++ {
			<-done
		}
		if woken := waiter.Stats().Wakeups - before; woken != 3 {
			t.Fatalf("%d wake-ups in all, want 3", woken)
		}
		if n, _ := s.Available(ctx); n != 0 {
			t.Fatalf("%d permits left", n)
		}
	})
}

// PermitSemaphoreHammer: goroutines over three Clients hold one of
// two permits at a time, some giving up at random points; never more than
// two are held, more than one is, and every permit is back at the end.
func PermitSemaphoreHammer(t *testing.T) {
	testkit.ForEach(t, func(t *testing.T, top testkit.Topology) {
		const permits, workers, rounds = 2, 9, 20
		clients := []*relock.Client{top.NewClient(t), top.NewClient(t), top.NewClient(t)}
		name := testkit.NewPermits(t, clients[0], permits).Name()
		ctx := testkit.CtxTimeout(t, time.Minute)
		var g gauge
		var acquired, gaveUp atomic.Int64
		var wg sync.WaitGroup
		for i := 0; i < workers; i++ {
			ps := clients[i%len(clients)].PermitSemaphore(name)
			wg.Add(1)
			go func() {
				defer wg.Done()
				for j := 0; j < rounds; j++ {
					wctx, cancel := testkit.GivingUp(ctx, j%3 == i%3, time.Duration(j*150)*time.Microsecond)
					p, err := ps.Acquire(wctx)
					cancel()
					if errors.Is(err, context.DeadlineExceeded) {
						gaveUp.Add(1)
						continue
					}
					if err != nil {
						t.Error(err)
						return
					}
					acquired.Add(1)
					if v := g.enter(1); v > permits {
						t.Errorf("%d permits held", v)
					}
					time.Sleep(200 * time.Microsecond) // work
					g.leave(1)
					if err := p.Release(ctx); err != nil {
						t.Error(err)
						return
					}
					if !errors.Is(p.Err(), relock.ErrReleased) {
						t.Errorf("Err after Release: %v", p.Err())
					}
				}
			}()
		}
		wg.Wait()
		if p := g.peak.Load(); p != permits {
			t.Fatalf("at most %d permits held at once; want %d", p, permits)
		}
		if acquired.Load() == 0 || gaveUp.Load() == 0 {
			t.Fatalf("acquired %d, gave up %d: the test exercised one path only", acquired.Load(), gaveUp.Load())
		}
		if n, err := clients[1].PermitSemaphore(name).Available(ctx); n != permits || err != nil {
			t.Fatalf("%d permits free at the end (%v), want %d", n, err, permits)
		}
		if n := top.RDB(t).ZCard(ctx, layout.PermitTimeouts(name)).Val(); n != 0 {
			t.Fatalf("%d permits still held", n)
		}
		for _, c := range clients {
			if s := c.Stats(); s.Channels != 0 || s.Asleep != 0 || s.Held != 0 {
				t.Fatalf("state left behind: %+v", s)
			}
		}
	})
}

// PermitLeaseExpires: a permit with a fixed lease expires by the
// server's clock, says so, and goes to the waiter, who sleeps until the
// expiry it was told of.
func PermitLeaseExpires(t *testing.T) {
	testkit.ForEach(t, func(t *testing.T, top testkit.Topology) {
		a, b := top.NewClient(t), top.NewClient(t)
		ps := testkit.NewPermits(t, a, 1)
		ctx := testkit.CtxTimeout(t, 10*time.Second)
		stale, err := ps.Acquire(ctx, relock.WithLease(150*time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		next, err := b.PermitSemaphore(ps.Name()).Acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if !errors.Is(stale.Err(), relock.ErrLockLost) {
			t.Fatalf("expired permit's Err = %v, want ErrLockLost", stale.Err())
		}
		testkit.WaitPermitDone(t, stale, time.Second)
		if err := stale.Release(ctx); !errors.Is(err, relock.ErrNotHeld) {
			t.Fatalf("stale Release: %v, want ErrNotHeld", err)
		}
		if err := next.Err(); err != nil {
			t.Fatalf("new holder disturbed: %v", err)
		}
		if n, _ := ps.Available(ctx); n != 0 {
			t.Fatalf("stale Release freed a permit: %d free", n)
		}
		if err := next.Release(ctx); err != nil {
			t.Fatal(err)
		}
	})
}

func semaphoreHammer(t *testing.T, top testkit.Topology, nClients int, opts ...relock.Option) {
	const permits, workers, rounds = 3, 12, 25
	clients := top.NewClients(t, nClients, opts...)
	name := testkit.LockName(t)
	ctx := testkit.CtxTimeout(t, time.Minute)
	if ok, err := clients[0].Semaphore(name).TrySetPermits(ctx, permits); !ok || err != nil {
		t.Fatalf("TrySetPermits: %v %v", ok, err)
	}
	var g gauge
	var acquired, gaveUp atomic.Int64
	var wg sync.WaitGroup
	for i := 0; i < workers; i++ {
		s := clients[i%len(clients)].Semaphore(name)
		wg.Add(1)
		go func(seed int64) {
			defer wg.Done()
			rnd := rand.New(rand.NewSource(seed))
			for j := 0; j < rounds; j++ {
				n := 1 + rnd.Intn(2)
				wctx, cancel := testkit.GivingUp(ctx, rnd.Intn(3) == 0, time.Duration(rnd.Intn(3000))*time.Microsecond)
				err := s.Acquire(wctx, n)
				cancel()
				if errors.Is(err, context.DeadlineExceeded) {
					gaveUp.Add(1)
					continue
				}
				if err != nil {
					t.Error(err)
					return
				}
				acquired.Add(1)
				if v := g.enter(n); v > permits {
					t.Errorf("%d permits in use", v)
				}
				time.Sleep(time.Duration(rnd.Intn(300)) * time.Microsecond) // work
				g.leave(n)
				if err := s.Release(ctx, n); err != nil {
					t.Error(err)
					return
				}
			}
		}(int64(i))
	}
	wg.Wait()
	if p := g.peak.Load(); p > permits || p < 2 {
		t.Fatalf("at most %d permits in use at once; want 2..%d", p, permits)
	}
	if acquired.Load() == 0 || gaveUp.Load() == 0 {
		t.Fatalf("acquired %d, gave up %d: the test exercised one path only", acquired.Load(), gaveUp.Load())
	}
	if n, err := clients[len(clients)-1].Semaphore(name).Available(ctx); n != permits || err != nil {
		t.Fatalf("%d permits available at the end (%v), want %d", n, err, permits)
	}
	var handed uint64
	for _, c := range clients {
		s := c.Stats()
		if s.Channels != 0 || s.Asleep != 0 {
			t.Fatalf("state left behind: %+v", s)
		}
		handed += s.Handoffs
	}
	if nClients == 1 && handed == 0 {
		t.Fatal("no permits handed to the Client's own calls")
	}
}

// gauge tracks how many permits are in use, and the most seen at once.
type gauge struct{ now, peak atomic.Int64 }

func (g *gauge) enter(n int) int64 {
	v := g.now.Add(int64(n))
	for {
		p := g.peak.Load()
		if v <= p || g.peak.CompareAndSwap(p, v) {
			return v
		}
	}
}

func (g *gauge) leave(n int) { g.now.Add(-int64(n)) }
