package conformance

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/internal/testkit"
)

// LossSignalled: a hold whose key is deleted or force-unlocked by
// another client reports ErrLockLost through Done and Err.
func LossSignalled(t *testing.T) {
	testkit.ForEach(t, func(t *testing.T, top testkit.Topology) {
		for _, how := range []string{"deleted", "force-unlocked", "taken over"} {
			t.Run(how, func(t *testing.T) {
				c := top.NewClient(t, relock.WithWatchdogTimeout(300*time.Millisecond))
				other := top.NewClient(t)
				rdb := top.RDB(t)
				name := testkit.LockName(t)
				ctx := testkit.CtxTimeout(t, 10*time.Second)
				l, err := c.Mutex(name).Lock(ctx)
				if err != nil {
					t.Fatal(err)
				}
				switch how {
				case "deleted":
					err = rdb.Del(ctx, name).Err()
				case "force-unlocked":
					_, err = other.Mutex(name).ForceUnlock(ctx)
				case "taken over":
					err = rdb.Del(ctx, name).Err()
					if err == nil {
						_, err = other.Mutex(name).TryLock(ctx)
					}
				}
				if err != nil {
					t.Fatal(err)
				}
				testkit.WaitDone(t, l, 5*time.Second)
				if !errors.Is(l.Err(), relock.ErrLockLost) {
					t.Fatalf("Err = %v, want ErrLockLost", l.Err())
				}
				if err := l.Unlock(ctx); !errors.Is(err, relock.ErrNotHeld) {
					t.Fatalf("Unlock of a lost lease: %v, want ErrNotHeld", err)
				}
				if s := c.Stats(); s.Lost != 1 || s.Held != 0 {
					t.Fatalf("stats %+v: want 1 lost, 0 held", s)
				}
			})
		}
	})
}

// WaiterWokenByRelease: a waiter is woken by the release message or
// handed the lock by the release's grant, not left to the TTL, and also
// after its pub/sub connection was killed.
func WaiterWokenByRelease(t *testing.T) {
	testkit.ForEach(t, func(t *testing.T, top testkit.Topology) {
		for _, kill := range []bool{false, true} {
			t.Run(fmt.Sprintf("pubsub-killed=%v", kill), func(t *testing.T) {
				holder := top.NewClient(t) // 30s watchdog: TTL far beyond the test's bound
				waiter := top.NewClient(t)
				name := testkit.LockName(t)
				ctx := testkit.CtxTimeout(t, 10*time.Second)
				l, err := holder.Mutex(name).Lock(ctx)
				if err != nil {
					t.Fatal(err)
				}
				got := make(chan *relock.Lease, 1)
				go func() {
					nl, err := waiter.Mutex(name).Lock(ctx)
					if err != nil {
						t.Error(err)
					}
					got <- nl
				}()
				// Asleep: its subscriptions are confirmed.
				testkit.Eventually(t, 5*time.Second, "the waiter to subscribe", func() bool { return waiter.Stats().Asleep == 1 })
				if kill {
					before := waiter.Stats().Wakeups
					killPubSub(t, top)
					// A re-confirmed subscription wakes its waiters to check.
					testkit.Eventually(t, 5*time.Second, "the waiter to resubscribe", func() bool {
						s := waiter.Stats()
						return s.Wakeups > before && s.Asleep == 1
					})
				}
				if err := l.Unlock(ctx); err != nil {
					t.Fatal(err)
				}
				nl := <-got
				if nl == nil {
					t.Fatal("waiter failed")
				}
				if s := waiter.Stats(); s.Wakeups == 0 && s.Handoffs == 0 {
					t.Fatalf("waiter neither woken by a message nor granted the lock: %+v", s)
				}
				if err := nl.Unlock(ctx); err != nil {
					t.Fatal(err)
				}
			})
		}
	})
}

// CancelledWaiterLeavesNothing: a waiter whose context ends leaves no
// subscription, key or goroutine (TestMain checks goroutines).
func CancelledWaiterLeavesNothing(t *testing.T) {
	testkit.ForEach(t, func(t *testing.T, top testkit.Topology) {
		holder, waiter := top.NewClient(t), top.NewClient(t)
		name := testkit.LockName(t)
		ctx := testkit.CtxTimeout(t, 10*time.Second)
		l, err := holder.Mutex(name).Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, end := range []string{"deadline", "cancel"} {
			wctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
			if end == "cancel" {
				wctx, cancel = context.WithCancel(ctx)
				go func() {
					for waiter.Stats().Channels == 0 {
						time.Sleep(time.Millisecond)
					}
					cancel()
				}()
			}
			_, err := waiter.Mutex(name).Lock(wctx)
			cancel()
			want := context.DeadlineExceeded
			if end == "cancel" {
				want = context.Canceled
			}
			if !errors.Is(err, want) {
				t.Fatalf("%s: Lock = %v, want %v", end, err, want)
			}
		}
		if s := waiter.Stats(); s.Channels != 0 || s.Held != 0 {
			t.Fatalf("waiter left %+v", s)
		}
		testkit.Eventually(t, 5*time.Second, "the server to drop the subscription", func() bool {
			return testkit.Subscribers(t, top, name) == 0
		})
		if err := l.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		if keys := testkit.KeysOf(t, top.RDB(t), name); len(keys) > 0 {
			t.Fatalf("keys left: %v", keys)
		}
	})
}

// RedisRestarted: after a restart (script cache and data gone) the
// holder learns of the loss and everything works again.
func RedisRestarted(t *testing.T) {
	srv := redistest.Standalone(t)
	c := testkit.Deployment{Addr: srv.Addr}.Open(t, relock.WithWatchdogTimeout(300*time.Millisecond))
	name := testkit.LockName(t)
	ctx := testkit.CtxTimeout(t, 20*time.Second)
	m := c.Mutex(name)
	l, err := m.Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Restart(); err != nil {
		t.Fatal(err)
	}
	testkit.WaitDone(t, l, 5*time.Second)
	if !errors.Is(l.Err(), relock.ErrLockLost) {
		t.Fatalf("Err = %v after a restart without persistence", l.Err())
	}
	for i := 0; i < 3; i++ { // NOSCRIPT is answered by EVAL, then cached again
		l, err := m.Lock(ctx)
		if err != nil {
			t.Fatalf("lock after restart: %v", err)
		}
		if err := l.Unlock(ctx); err != nil {
			t.Fatalf("unlock after restart: %v", err)
		}
		if err := testkit.CloseLater(t, srv.Client()).ScriptFlush(ctx).Err(); err != nil {
			t.Fatal(err)
		}
	}
}

// killPubSub closes every pub/sub connection of top's servers.
func killPubSub(t testing.TB, top testkit.Topology) {
	t.Helper()
	ctx := testkit.CtxTimeout(t, 5*time.Second)
	var n int
	var err error
	if top.Name == "cluster" {
		n, err = testkit.Cluster.KillPubSubClients(ctx)
	} else {
		n, err = testkit.Standalone.KillPubSubClients(ctx)
	}
	if err != nil || n == 0 {
		t.Fatalf("killed %d pub/sub connections: %v", n, err)
	}
}

// CloseWithServerPaused: with the server stopped (SIGSTOP), Close
// ends the calls of its Client within the cleanup timeout, with
// ErrClosed: the Lock calls waiting for a held lock (Mutex and FairMutex),
// which leave its queue on the way out, and the TryLock calls in flight
// in the batcher's pipelines, whose replies will not come. Only a call
// sent on its own, the one in flight while no other was, waits for the
// Redis client's read timeout.
func CloseWithServerPaused(t *testing.T) {
	const cleanup = 500 * time.Millisecond
	ctx := context.Background()
	srv := redistest.Standalone(t)
	name := testkit.LockName(t)
	holder := testkit.Deployment{Addr: srv.Addr}.Open(t)
	if _, err := holder.FairMutex(name + "-fair").TryLock(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := holder.Mutex(name).TryLock(ctx); err != nil {
		t.Fatal(err)
	}
	// A read timeout far from the cleanup timeout tells the two apart.
	rdb := testkit.CloseLater(t, srv.Client())
	c := testkit.Deployment{Addr: srv.Addr, ReadTimeout: 8 * time.Second}.Open(t, relock.WithCleanupTimeout(cleanup))
	const waiters, inFlight = 10, 5
	errs := make(chan error, 2*waiters+inFlight)
	for range waiters {
		go func() { _, err := c.FairMutex(name + "-fair").Lock(ctx); errs <- err }()
		go func() { _, err := c.Mutex(name).Lock(ctx); errs <- err }()
	}
	testkit.WaitQueued(t, rdb, name+"-fair", waiters)
	testkit.Eventually(t, 5*time.Second, "every waiter asleep", func() bool { return c.Stats().Asleep == 2*waiters })
	if err := srv.Pause(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = srv.Resume() }()
	started := make(chan struct{}, inFlight)
	for i := range inFlight {
		go func() {
			started <- struct{}{}
			_, err := c.Mutex(name + string(rune('a'+i))).TryLock(ctx)
			errs <- err
		}()
	}
	for range inFlight {
		<-started
	}
	begun := time.Now()
	go func() { _ = c.Close() }()
	timeout := time.After(6 * cleanup) // generous: only so that a call held longer fails the test
	for range 2*waiters + inFlight - 1 {
		select {
		case err := <-errs:
			if !errors.Is(err, relock.ErrClosed) {
				t.Errorf("call cut short by Close = %v, want ErrClosed", err)
			}
		case <-timeout:
			t.Fatalf("calls still running %v after Close began", time.Since(begun))
		}
	}
	if err := srv.Resume(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-errs: // the call sent on its own, which the server answers now
	case <-time.After(30 * time.Second): // generous: the read timeout is 8s
		t.Fatalf("the call sent on its own still running %v after Close began", time.Since(begun))
	}
}

// PubSubKilled: the server closes every pub/sub connection again and
// again while 8 goroutines over two Clients take turns at a Mutex, then
// at a FairMutex. The holders keep the 30s watchdog lease, so a waiter
// whose client library lost a release message or a resubscription, and
// was left to the lock's TTL, would outlive its call's 15s context: every
// Lock returns the lock, no two holds overlap, and connections were
// killed. On a server of its own and on the shared cluster.
func PubSubKilled(t *testing.T) {
	t.Run("standalone", func(t *testing.T) {
		t.Parallel()
		srv := redistest.Standalone(t)
		pubsubStorm(t, testkit.Deployment{Addr: srv.Addr}, srv.KillPubSubClients)
	})
	t.Run("cluster", func(t *testing.T) {
		pubsubStorm(t, testkit.Topologies()[1].Deployment, testkit.Cluster.KillPubSubClients)
	})
}

// pubsubStorm runs PubSubKilled's contention on d while kill closes its
// pub/sub connections.
func pubsubStorm(t *testing.T, d testkit.Deployment, kill func(context.Context) (int, error)) {
	clients := []*relock.Client{d.Open(t), d.Open(t)}
	kinds := map[string]func(c *relock.Client, name string) func(context.Context, ...relock.LockOption) (*relock.Lease, error){
		"mutex": func(c *relock.Client, name string) func(context.Context, ...relock.LockOption) (*relock.Lease, error) {
			return c.Mutex(name).Lock
		},
		"fair": func(c *relock.Client, name string) func(context.Context, ...relock.LockOption) (*relock.Lease, error) {
			return c.FairMutex(name).Lock
		},
	}
	for _, kind := range []string{"mutex", "fair"} {
		t.Run(kind, func(t *testing.T) {
			name := testkit.LockName(t)
			ctx := testkit.CtxTimeout(t, time.Minute)
			const workers, rounds = 8, 15
			var inside, holds atomic.Int64
			var wg sync.WaitGroup
			for i := range workers {
				lock := kinds[kind](clients[i%2], name)
				wg.Add(1)
				go func() {
					defer wg.Done()
					for range rounds {
						lctx, cancel := context.WithTimeout(ctx, 15*time.Second)
						l, err := lock(lctx)
						cancel()
						if err != nil {
							t.Errorf("Lock while pub/sub connections are killed: %v", err)
							return
						}
						if n := inside.Add(1); n != 1 {
							t.Errorf("%d holds at once", n)
						}
						time.Sleep(time.Millisecond) // the hold
						inside.Add(-1)
						holds.Add(1)
						if err := l.Unlock(ctx); err != nil {
							t.Error(err)
							return
						}
					}
				}()
			}
			done := make(chan struct{})
			go func() { wg.Wait(); close(done) }()
			kills := 0
			for stormy := true; stormy; {
				select {
				case <-done:
					stormy = false
				case <-time.After(time.Duration(2+rand.IntN(20)) * time.Millisecond):
					n, err := kill(ctx)
					if err != nil {
						t.Error(err)
						<-done // the workers report to t: the test waits for them
						stormy = false
					}
					kills += n
				}
			}
			if holds.Load() != workers*rounds {
				t.Fatalf("%d holds, want %d", holds.Load(), workers*rounds)
			}
			if kills == 0 {
				t.Fatal("no pub/sub connection was killed")
			}
			t.Logf("%d holds, %d pub/sub connections killed", holds.Load(), kills)
		})
	}
}
