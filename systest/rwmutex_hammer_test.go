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
	"github.com/relock-go/relock/internal/layout"
	"github.com/relock-go/relock/internal/testkit"
)

// TestRWMutexHammer: readers and writers over two clients, some giving up
// at random points. No writer may overlap anyone (atomic counters inside
// the sections, -race on the data writers change, and the history checker
// for writers' holds and tokens); readers must overlap; nothing is left.
//
// It runs with the Clients' default replica sync (where the servers have
// replicas, releases then never grant) and without it, where a release
// that frees the lock grants it to the first waiting writer; and with one
// Client whose calls are mostly writes, which it hands and passes on in
// process among them.
func TestRWMutexHammer(t *testing.T) {
	testkit.ForEach(t, func(t *testing.T, top testkit.Topology) {
		t.Run("default", func(t *testing.T) { rwHammer(t, top, 2, 25) })
		t.Run("grants", func(t *testing.T) { rwHammer(t, top, 2, 25, relock.WithoutReplicaSync()) })
		t.Run("one-client-writes", func(t *testing.T) { rwHammer(t, top, 1, 85, relock.WithoutReplicaSync()) })
	})
}

// rwHammer runs the hammer with n Clients, writePercent of whose calls
// are writes on average.
func rwHammer(t *testing.T, top testkit.Topology, n, writePercent int, opts ...relock.Option) {
	clients := top.NewClients(t, n, opts...)
	name := testkit.LockName(t)
	rec := history.New()
	ctx := testkit.CtxTimeout(t, time.Minute)
	var readers, writers, maxReaders, reads, writes, gaveUp, seen atomic.Int64
	data := 0 // written by writers, read by readers, guarded by the lock only
	var wg sync.WaitGroup
	for i := 0; i < 12; i++ {
		rw := clients[i%n].RWMutex(name)
		wg.Add(1)
		go func(seed int64) {
			defer wg.Done()
			rnd := rand.New(rand.NewSource(seed))
			for j := 0; j < 30; j++ {
				write := rnd.Intn(100) < writePercent
				lctx, cancel := testkit.GivingUp(ctx, rnd.Intn(4) == 0, time.Duration(rnd.Intn(3000))*time.Microsecond)
				lock := rw.RLock
				if write {
					lock = rw.Lock
				}
				l, err := lock(lctx)
				cancel()
				if errors.Is(err, context.DeadlineExceeded) {
					gaveUp.Add(1)
					continue
				}
				if err != nil {
					t.Error(err)
					return
				}
				if write {
					h := rec.Begin(fmt.Sprint(seed), name, l.Token())
					if writers.Add(1) != 1 || readers.Load() != 0 {
						t.Errorf("writer entered beside %d writers, %d readers", writers.Load()-1, readers.Load())
					}
					data++
					runtime.Gosched()
					if readers.Load() != 0 {
						t.Errorf("a reader entered during a write")
					}
					writers.Add(-1)
					writes.Add(1)
					h.End()
				} else {
					n := readers.Add(1)
					for m := maxReaders.Load(); n > m && !maxReaders.CompareAndSwap(m, n); m = maxReaders.Load() {
					}
					if writers.Load() != 0 {
						t.Errorf("reader entered during a write")
					}
					seen.Store(int64(data))
					time.Sleep(200 * time.Microsecond) // a read that takes a while, so that readers overlap
					if writers.Load() != 0 {
						t.Errorf("a writer entered during a read")
					}
					readers.Add(-1)
					reads.Add(1)
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
	if int64(data) != writes.Load() {
		t.Fatalf("data %d after %d writes", data, writes.Load())
	}
	if maxReaders.Load() < 2 {
		t.Fatalf("readers never overlapped (max %d)", maxReaders.Load())
	}
	if reads.Load() == 0 || writes.Load() == 0 {
		t.Fatalf("%d reads, %d writes, %d gave up: the test exercised too little", reads.Load(), writes.Load(), gaveUp.Load())
	}
	var granted uint64
	for _, c := range clients {
		granted += c.Stats().Handoffs
	}
	t.Logf("%d reads (up to %d at once), %d writes (%d granted by a release), %d gave up",
		reads.Load(), maxReaders.Load(), writes.Load(), granted, gaveUp.Load())
	if keys := testkit.KeysOf(t, top.RDB(t), name); len(keys) > 0 {
		t.Fatalf("keys left behind: %v", keys)
	}
	for _, c := range clients {
		if s := c.Stats(); s.Held != 0 || s.Channels != 0 || s.Asleep != 0 {
			t.Fatalf("state left behind: %+v", s)
		}
	}
}

// TestRWMutexCancelledWaiterLeavesNothing: readers waiting on a writer and
// writers waiting on readers, whose contexts end, leave no subscription,
// key or goroutine (TestMain checks goroutines).
func TestRWMutexCancelledWaiterLeavesNothing(t *testing.T) {
	testkit.ForEach(t, func(t *testing.T, top testkit.Topology) {
		holder, waiter := top.NewClient(t), top.NewClient(t)
		name := testkit.LockName(t)
		ctx := testkit.CtxTimeout(t, 10*time.Second)
		for _, write := range []bool{true, false} {
			hold := holder.RWMutex(name).RLock
			wait := waiter.RWMutex(name).Lock
			if write {
				hold, wait = holder.RWMutex(name).Lock, waiter.RWMutex(name).RLock
			}
			l := testkit.RWMust(t)(hold(ctx))
			for _, end := range []string{"deadline", "cancel"} {
				wctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
				if end == "cancel" {
					wctx, cancel = context.WithCancel(ctx)
					go func() {
						for waiter.Stats().Asleep == 0 {
							time.Sleep(time.Millisecond)
						}
						cancel()
					}()
				}
				_, err := wait(wctx)
				cancel()
				want := map[string]error{"deadline": context.DeadlineExceeded, "cancel": context.Canceled}[end]
				if !errors.Is(err, want) {
					t.Fatalf("%s: %v, want %v", end, err, want)
				}
			}
			if s := waiter.Stats(); s.Channels != 0 || s.Held != 0 || s.Asleep != 0 {
				t.Fatalf("waiter left %+v", s)
			}
			testkit.Eventually(t, 5*time.Second, "the server to drop the subscription", func() bool {
				return testkit.RWSubscribers(t, top, name) == 0
			})
			testkit.RWUnlockAll(t, ctx, l)
			if keys := testkit.KeysOf(t, top.RDB(t), name); len(keys) > 0 {
				t.Fatalf("keys left: %v", keys)
			}
		}
	})
}

// TestRWMutexWritersTakeTurns: the waiting writers of one Client take
// turns in the lock's queue, so the end of a write lock wakes or grants
// one writer instead of all of them; behind a relock writer, none listens
// on the release channel; each still gets the lock.
func TestRWMutexWritersTakeTurns(t *testing.T) {
	testkit.ForEach(t, func(t *testing.T, top testkit.Topology) {
		// Without replica sync, so that the writers queue (with it they
		// do not, and listen).
		holder, c := top.NewClient(t), top.NewClient(t, relock.WithoutReplicaSync())
		name := testkit.LockName(t)
		ctx := testkit.CtxTimeout(t, 10*time.Second)
		held := testkit.RWMust(t)(holder.RWMutex(name).Lock(ctx))
		const writers = 6
		done := make(chan error, writers)
		for i := 0; i < writers; i++ {
			go func() {
				l, err := c.RWMutex(name).Lock(ctx)
				if err == nil {
					err = l.Unlock(ctx)
				}
				done <- err
			}()
		}
		testkit.Eventually(t, 5*time.Second, "the writers to wait", func() bool { return c.Stats().Asleep == writers })
		if n := testkit.RWSubscribers(t, top, name); n != 0 {
			t.Fatalf("%d subscribers of the release channel behind a relock writer, want 0", n)
		}
		rdb := top.RDB(t)
		if q := rdb.ZRange(ctx, layout.Companion(layout.RWQueue, name), 0, -1).Val(); len(q) != 1 {
			t.Fatalf("queue %v, want the one writer that has its Client's turn", q)
		}
		testkit.RWUnlockAll(t, ctx, held)
		for i := 0; i < writers; i++ {
			if err := <-done; err != nil {
				t.Fatal(err)
			}
		}
		// One release message per write lock ended, each waking at most
		// the one writer whose turn it is.
		if s := c.Stats(); s.Wakeups > writers+1 || s.Channels != 0 || s.Asleep != 0 {
			t.Fatalf("stats %+v: want at most %d wake-ups and nothing left", s, writers+1)
		}
	})
}
