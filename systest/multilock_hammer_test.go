package systest

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

// TestMultiLockNoDeadlock: MultiLocks over {a,b} and {b,a}, and plain
// Mutexes on a and b, hammer concurrently from two Clients; every worker
// finishes all its rounds and no two holds of a name overlap.
func TestMultiLockNoDeadlock(t *testing.T) {
	testkit.ForEach(t, func(t *testing.T, top testkit.Topology) {
		clients := []*relock.Client{top.NewClient(t), top.NewClient(t)}
		names := testkit.SlotNames(t, 2)
		rec := history.New()
		ctx := testkit.CtxTimeout(t, time.Minute)
		const rounds = 25
		var done [3]atomic.Int64
		var wg sync.WaitGroup
		work := func(kind, i int, c *relock.Client) {
			defer wg.Done()
			var l relock.Locker
			var order []string
			switch kind {
			case 0:
				order = []string{names[0], names[1]}
				l = relock.Multi(c.Mutex(order[0]), c.Mutex(order[1]))
			case 1:
				order = []string{names[1], names[0]}
				l = relock.Multi(c.Mutex(order[0]), c.Mutex(order[1]))
			default:
				order = []string{names[(i/3)%2]}
				l = c.Mutex(order[0])
			}
			for range rounds {
				lease, err := l.Lock(ctx)
				if err != nil {
					t.Error(err)
					return
				}
				var holds []*history.Hold
				for i, tok := range lease.Tokens() {
					holds = append(holds, rec.Begin(fmt.Sprint(kind), order[i], tok))
				}
				runtime.Gosched()
				for _, h := range holds {
					h.End()
				}
				if err := lease.Unlock(ctx); err != nil {
					t.Error(err)
					return
				}
				done[kind].Add(1)
			}
		}
		for i := range 8 {
			wg.Add(1)
			go work(i%3, i, clients[i%2])
		}
		wg.Wait()
		for kind, want := range []int64{3 * rounds, 3 * rounds, 2 * rounds} {
			if n := done[kind].Load(); n != want {
				t.Fatalf("kind %d finished %d rounds, want %d", kind, n, want)
			}
		}
		if v := rec.Check(); len(v) > 0 {
			t.Fatalf("%d violations, first: %+v", len(v), v[0])
		}
		testkit.NoKeys(t, top.RDB(t), names...)
		testkit.Idle(t, clients...)
	})
}

// TestMultiLockOutsideHold: an owner that holds b outside any MultiLock
// takes Multi(a, b) while another caller waits in Multi(a, b). Taking the
// members in order with blocking Locks would deadlock here (the waiter
// holding a, waiting for b; the owner waiting for a).
func TestMultiLockOutsideHold(t *testing.T) {
	testkit.ForEach(t, func(t *testing.T, top testkit.Topology) {
		c := top.NewClient(t)
		names := testkit.SlotNames(t, 2)
		ctx := testkit.CtxTimeout(t, 20*time.Second)
		owner := relock.WithOwner(ctx)
		outside, err := c.Mutex(names[1]).Lock(owner)
		if err != nil {
			t.Fatal(err)
		}
		ml := relock.Multi(c.Mutex(names[0]), c.Mutex(names[1]))
		got := make(chan error, 1)
		go func() {
			l, err := ml.Lock(ctx)
			if err == nil {
				err = l.Unlock(ctx)
			}
			got <- err
		}()
		testkit.Eventually(t, 5*time.Second, "the other multi-lock to wait", func() bool { return c.Stats().Asleep == 1 })
		mine, err := ml.Lock(owner)
		if err != nil {
			t.Fatalf("owner's multi-lock: %v", err)
		}
		if n := testkit.HoldCount(t, top.RDB(t), names[1]); n != 2 {
			t.Fatalf("hold count of b %d, want 2 (outside hold and re-entry)", n)
		}
		if err := mine.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		if err := outside.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		if err := <-got; err != nil {
			t.Fatalf("waiting multi-lock: %v", err)
		}
		testkit.Free(t, top.RDB(t), names...)
	})
}

// TestMultiLockHammerWithCancellation: overlapping MultiLocks whose calls
// give up at random points never overlap and leave nothing behind.
func TestMultiLockHammerWithCancellation(t *testing.T) {
	testkit.ForEach(t, func(t *testing.T, top testkit.Topology) {
		clients := []*relock.Client{top.NewClient(t), top.NewClient(t)}
		names := testkit.SlotNames(t, 3)
		rec := history.New()
		ctx := testkit.CtxTimeout(t, time.Minute)
		var acquired, gaveUp atomic.Int64
		var wg sync.WaitGroup
		for i := range 9 {
			c := clients[i%2]
			set := []string{names[i%3], names[(i+1)%3]}
			wg.Add(1)
			go func(seed int64) {
				defer wg.Done()
				rnd := rand.New(rand.NewSource(seed))
				ml := relock.Multi(c.Mutex(set[0]), c.Mutex(set[1]))
				for range 20 {
					wctx, cancel := context.WithTimeout(ctx, time.Duration(rnd.Intn(4000))*time.Microsecond)
					l, err := ml.Lock(wctx)
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
					var holds []*history.Hold
					for j, tok := range l.Tokens() {
						holds = append(holds, rec.Begin(fmt.Sprint(seed), set[j], tok))
					}
					runtime.Gosched()
					for _, h := range holds {
						h.End()
					}
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
		testkit.NoKeys(t, top.RDB(t), names...)
		testkit.Idle(t, clients...)
	})
}
