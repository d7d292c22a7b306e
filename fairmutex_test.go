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

// TestFairMutexOrder: 50 waiters over 3 Clients, queued one at a time,
// acquire in the order they queued, and each release wakes only the first.
func TestFairMutexOrder(t *testing.T) {
	testkit.ForEach(t, func(t *testing.T, top testkit.Topology) {
		rdb := top.RDB(t)
		clients := []*relock.Client{top.NewClient(t), top.NewClient(t), top.NewClient(t)}
		name := testkit.LockName(t)
		ctx := testkit.CtxTimeout(t, time.Minute)
		holder, err := clients[0].FairMutex(name).Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		const waiters = 50
		var mu sync.Mutex
		var order []int
		var wg sync.WaitGroup
		for i := 0; i < waiters; i++ {
			m := clients[i%len(clients)].FairMutex(name)
			wg.Add(1)
			go func() {
				defer wg.Done()
				l, err := m.Lock(ctx)
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				order = append(order, i)
				mu.Unlock()
				if err := l.Unlock(ctx); err != nil {
					t.Error(err)
				}
			}()
			testkit.WaitQueued(t, rdb, name, i+1)
		}
		if err := holder.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		wg.Wait()
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

// TestFairMutexCancelInQueue: waiters that give up in the middle of the
// queue (cancelled, or past their deadline) leave it before Lock returns,
// and the others keep their order.
func TestFairMutexCancelInQueue(t *testing.T) {
	testkit.ForEach(t, func(t *testing.T, top testkit.Topology) {
		rdb := top.RDB(t)
		a, b := top.NewClient(t), top.NewClient(t)
		name := testkit.LockName(t)
		ctx := testkit.CtxTimeout(t, 30*time.Second)
		holder, err := a.FairMutex(name).Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		const waiters = 8
		cancels := make([]context.CancelFunc, waiters)
		errs := make([]chan error, waiters)
		var mu sync.Mutex
		var order []int
		for i := 0; i < waiters; i++ {
			wctx, cancel := context.WithCancel(ctx)
			if i == 5 {
				wctx, cancel = context.WithTimeout(ctx, 300*time.Millisecond)
			}
			cancels[i], errs[i] = cancel, make(chan error, 1)
			m := []*relock.Client{a, b}[i%2].FairMutex(name)
			go func() {
				l, err := m.Lock(wctx)
				if err == nil {
					mu.Lock()
					order = append(order, i)
					mu.Unlock()
					err = l.Unlock(ctx)
				}
				errs[i] <- err
			}()
			testkit.WaitQueued(t, rdb, name, i+1)
		}
		q := testkit.Queued(t, rdb, name)
		cancels[2]()
		if err := <-errs[2]; !errors.Is(err, context.Canceled) {
			t.Fatalf("cancelled waiter: %v", err)
		}
		if got := testkit.Queued(t, rdb, name); len(got) != waiters-1 || testkit.Contains(got, q[2]) {
			t.Fatalf("queue %v after waiter 2 of %v left", got, q)
		}
		if err := <-errs[5]; !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("timed-out waiter: %v", err)
		}
		if got := testkit.Queued(t, rdb, name); len(got) != waiters-2 || testkit.Contains(got, q[5]) {
			t.Fatalf("queue %v after waiter 5 of %v left", got, q)
		}
		if err := holder.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		for i := 0; i < waiters; i++ {
			if i != 2 && i != 5 {
				if err := <-errs[i]; err != nil {
					t.Fatal(err)
				}
			}
			cancels[i]()
		}
		if fmt.Sprint(order) != "[0 1 3 4 6 7]" {
			t.Fatalf("acquisition order %v, want [0 1 3 4 6 7]", order)
		}
		for _, c := range []*relock.Client{a, b} {
			if s := c.Stats(); s.Held != 0 || s.Asleep != 0 || s.Channels != 0 {
				t.Fatalf("state left behind: %+v", s)
			}
		}
		testkit.NoKeysLeft(t, rdb, name)
	})
}

// TestFairMutexHammer: goroutines over two Clients guard an unsynchronised
// counter with the fair lock; -race and the history checker catch any
// overlap. The second round gives up at random points of the wait.
func TestFairMutexHammer(t *testing.T) {
	testkit.ForEach(t, func(t *testing.T, top testkit.Topology) {
		for _, cancelling := range []bool{false, true} {
			t.Run(fmt.Sprintf("cancelling=%v", cancelling), func(t *testing.T) {
				clients := []*relock.Client{top.NewClient(t), top.NewClient(t)}
				name := testkit.LockName(t)
				rec := history.New()
				ctx := testkit.CtxTimeout(t, time.Minute)
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
							wctx, cancel := ctx, context.CancelFunc(func() {})
							if cancelling {
								wctx, cancel = context.WithTimeout(ctx, time.Duration(rnd.Intn(3000))*time.Microsecond)
							}
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

func TestFairMutexReentrancy(t *testing.T) {
	testkit.ForEach(t, func(t *testing.T, top testkit.Topology) {
		rdb := top.RDB(t)
		c, other := top.NewClient(t), top.NewClient(t)
		name := testkit.LockName(t)
		m := c.FairMutex(name)
		ctx := testkit.CtxTimeout(t, 10*time.Second)
		owner := relock.WithOwner(ctx)
		first, err := m.Lock(owner)
		if err != nil {
			t.Fatal(err)
		}
		got := make(chan *relock.Lease, 1)
		go func() {
			l, err := other.FairMutex(name).Lock(ctx)
			if err != nil {
				t.Error(err)
			}
			got <- l
		}()
		testkit.WaitQueued(t, rdb, name, 1)
		// Re-entry does not wait behind the queue.
		second, err := m.TryLock(owner)
		if err != nil {
			t.Fatalf("re-entry past a queue: %v", err)
		}
		third, err := m.Lock(owner)
		if err != nil {
			t.Fatal(err)
		}
		if second.Token() != first.Token() || third.Token() != first.Token() {
			t.Fatalf("re-entry tokens %d, %d; holder's %d", second.Token(), third.Token(), first.Token())
		}
		if n := testkit.HoldCount(t, rdb, name); n != 3 {
			t.Fatalf("hold count %d, want 3", n)
		}
		if _, err := m.TryLock(ctx); !errors.Is(err, relock.ErrNotAcquired) {
			t.Fatalf("plain context TryLock: %v", err)
		}
		if _, err := m.TryLock(relock.WithOwner(ctx)); !errors.Is(err, relock.ErrNotAcquired) {
			t.Fatalf("other owner TryLock: %v", err)
		}
		for _, l := range []*relock.Lease{third, second} {
			if err := l.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
		}
		if err := second.Unlock(ctx); !errors.Is(err, relock.ErrNotHeld) {
			t.Fatalf("second Unlock of a lease: %v", err)
		}
		if n := testkit.HoldCount(t, rdb, name); n != 1 {
			t.Fatalf("hold count %d, want 1", n)
		}
		if q := testkit.Queued(t, rdb, name); len(q) != 1 {
			t.Fatalf("queue %v while a hold remains", q)
		}
		if err := first.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		l := <-got
		if l == nil {
			t.FailNow()
		}
		if l.Token() <= first.Token() {
			t.Fatalf("token %d after %d", l.Token(), first.Token())
		}
		if err := l.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		testkit.NoKeysLeft(t, rdb, name)
	})
}
