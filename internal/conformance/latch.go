package conformance

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/testkit"
)

// LatchReleasesAll: 24 awaiters over four Clients all return once the
// count reaches zero, woken by the zero message, and none returns before
// the last CountDown.
func LatchReleasesAll(t *testing.T) {
	testkit.ForEach(t, func(t *testing.T, top testkit.Topology) {
		const awaiters = 24
		clients := []*relock.Client{top.NewClient(t), top.NewClient(t), top.NewClient(t), top.NewClient(t)}
		name := testkit.LockName(t)
		ctx := testkit.CtxTimeout(t, 20*time.Second)
		l := clients[0].CountDownLatch(name)
		if ok, err := l.TrySetCount(ctx, 3); !ok || err != nil {
			t.Fatalf("TrySetCount: %v %v", ok, err)
		}
		var last atomic.Bool // set just before the last CountDown
		var early atomic.Int32
		var wg sync.WaitGroup
		for i := 0; i < awaiters; i++ {
			l := clients[i%len(clients)].CountDownLatch(name)
			wg.Add(1)
			go func() {
				defer wg.Done()
				if err := l.Await(ctx); err != nil {
					t.Error(err)
				}
				if !last.Load() {
					early.Add(1)
				}
			}()
		}
		sum := func(f func(relock.Stats) int64) (n int64) {
			for _, c := range clients {
				n += f(c.Stats())
			}
			return n
		}
		testkit.Eventually(t, 10*time.Second, "every awaiter to sleep", func() bool {
			return sum(func(s relock.Stats) int64 { return s.Asleep }) == awaiters
		})
		for i := 0; i < 2; i++ {
			if err := clients[i+1].CountDownLatch(name).CountDown(ctx); err != nil {
				t.Fatal(err)
			}
		}
		if n, err := l.Count(ctx); n != 1 || err != nil {
			t.Fatalf("Count = %d, %v; want 1", n, err)
		}
		last.Store(true)
		if err := clients[3].CountDownLatch(name).CountDown(ctx); err != nil {
			t.Fatal(err)
		}
		wg.Wait()
		if n := early.Load(); n > 0 {
			t.Fatalf("%d awaiters returned before the last CountDown", n)
		}
		if woken := sum(func(s relock.Stats) int64 { return int64(s.Wakeups) }); woken < awaiters {
			t.Fatalf("%d wake-ups by message for %d awaiters", woken, awaiters)
		}
		for _, c := range clients {
			if s := c.Stats(); s.Channels != 0 || s.Asleep != 0 {
				t.Fatalf("state left behind: %+v", s)
			}
		}
		if n := top.RDB(t).Exists(ctx, name).Val(); n != 0 {
			t.Fatal("the latch's key outlived its zero")
		}
	})
}
