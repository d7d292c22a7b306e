package conformance

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

// FairMutexOrder: 50 waiters over 3 Clients, queued one at a time,
// acquire in the order they queued, and each release wakes only the first.
func FairMutexOrder(t *testing.T) {
	testkit.ForEach(t, func(t *testing.T, top testkit.Topology) {
		rdb := top.RDB(t)
		clients := []*relock.Client{top.NewClient(t), top.NewClient(t), top.NewClient(t)}
		name := testkit.LockName(t)
		ctx := testkit.CtxTimeout(t, time.Minute)
		const waiters = 50
		order, _ := testkit.TakeInQueueOrder(t, ctx, rdb, name, waiters, func(i int) *relock.FairMutex {
			return clients[i%len(clients)].FairMutex(name)
		})
		for i, got := range order {
			if got != i {
				t.Fatalf("acquisition order %v, want 0..%d", order, waiters-1)
			}
		}
		if len(order) != waiters {
			t.Fatalf("%d of %d waiters acquired", len(order), waiters)
		}
		var wakeups, handoffs uint64
		for _, c := range clients {
			s := c.Stats()
			wakeups += s.Wakeups
			handoffs += s.Handoffs
			if s.Held != 0 || s.Asleep != 0 || s.Channels != 0 {
				t.Fatalf("state left behind: %+v", s)
			}
		}
		// One wake per handover at most: a release tells only the first.
		if wakeups+handoffs > waiters {
			t.Fatalf("%d wakeups and %d handoffs for %d handovers: more than the first waiter was woken", wakeups, handoffs, waiters)
		}
		testkit.NoKeysLeft(t, rdb, name)
	})
}

// FairMutexHammer: goroutines over two Clients guard an unsynchronised
// counter with the fair lock; -race and the history checker catch any
// overlap. The second round gives up at random points of the wait.
func FairMutexHammer(t *testing.T) {
	testkit.ForEach(t, func(t *testing.T, top testkit.Topology) {
		for _, cancelling := range []bool{false, true} {
			t.Run(fmt.Sprintf("cancelling=%v", cancelling), func(t *testing.T) {
				clients := []*relock.Client{top.NewClient(t), top.NewClient(t)}
				name := testkit.LockName(t)
				rec := history.New()
				ctx := testkit.CtxTimeout(t, time.Minute)
				// Each Client takes the lock once first, so that its first
				// calls' setup (connections, the replica count it probes on
				// a cluster) is not what the 0-3ms contexts below cut off.
				for _, c := range clients {
					l, err := c.FairMutex(name).Lock(ctx)
					if err != nil {
						t.Fatal(err)
					}
					if err := l.Unlock(ctx); err != nil {
						t.Fatal(err)
					}
				}
				const workers, rounds = 12, 25
				counter := 0
				var acquired, gaveUp atomic.Int64
				var wg sync.WaitGroup
				for i := 0; i < workers; i++ {
					m := clients[i%len(clients)].FairMutex(name)
					wg.Add(1)
					go func(seed int64) {
						defer wg.Done()
						rnd := rand.New(rand.NewSource(seed))
						for j := 0; j < rounds; j++ {
							wctx, cancel := testkit.GivingUp(ctx, cancelling, time.Duration(rnd.Intn(3000))*time.Microsecond)
							l, err := m.Lock(wctx)
							cancel()
							if err != nil {
								if cancelling && errors.Is(err, context.DeadlineExceeded) {
									gaveUp.Add(1)
									continue
								}
								t.Error(err)
								return
							}
							acquired.Add(1)
							h := rec.Begin(fmt.Sprint(seed), name, l.Token())
							v := counter
							runtime.Gosched()
							counter = v + 1
							h.End()
							if err := l.Unlock(ctx); err != nil {
								t.Error(err)
								return
							}
						}
					}(int64(i))
				}
				wg.Wait()
				if counter != int(acquired.Load()) {
					t.Fatalf("counter = %d, want %d", counter, acquired.Load())
				}
				if !cancelling && counter != workers*rounds {
					t.Fatalf("counter = %d, want %d", counter, workers*rounds)
				}
				if cancelling && (acquired.Load() == 0 || gaveUp.Load() == 0) {
					t.Fatalf("acquired %d, gave up %d: one path only", acquired.Load(), gaveUp.Load())
				}
				if v := rec.Check(); len(v) > 0 {
					t.Fatalf("%d violations, first: %+v", len(v), v[0])
				}
				for _, c := range clients {
					if s := c.Stats(); s.Held != 0 || s.Channels != 0 || s.Asleep != 0 {
						t.Fatalf("state left behind: %+v", s)
					}
				}
				testkit.NoKeysLeft(t, top.RDB(t), name)
			})
		}
	})
}
