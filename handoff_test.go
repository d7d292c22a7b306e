package relock_test

import (
	"testing"
	"time"

	"github.com/relock-go/relock"
)

// TestHandoff: a release passes the lock straight to a sleeping waiter of
// the same Client, unless another client waits for it too.
func TestHandoff(t *testing.T) {
	forEach(t, func(t *testing.T, top topology) {
		c := top.newClient(t)
		name := lockName(t)
		ctx := ctxTimeout(t, 10*time.Second)
		m := c.Mutex(name)
		holder, err := m.Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		got := make(chan *relock.Lease, 1)
		go func() {
			l, err := m.Lock(ctx)
			if err != nil {
				t.Error(err)
			}
			got <- l
		}()
		eventually(t, 5*time.Second, "the waiter to sleep", func() bool { return c.Stats().Asleep == 1 })
		if err := holder.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		next := <-got
		if next == nil {
			t.FailNow()
		}
		if s := c.Stats(); s.Handoffs != 1 {
			t.Fatalf("handoffs = %d, want 1", s.Handoffs)
		}
		if next.Token() != holder.Token()+1 {
			t.Fatalf("handed token %d after %d", next.Token(), holder.Token())
		}
		if n := holdCount(t, top.rdb(t), name); n != 1 {
			t.Fatalf("hold count %d", n)
		}

		// With a waiter of another client subscribed, the lock is freed and
		// announced instead.
		other := top.newClient(t)
		go func() {
			l, err := m.Lock(ctx)
			if err != nil {
				t.Error(err)
			}
			got <- l
		}()
		go func() {
			l, err := other.Mutex(name).Lock(ctx)
			if err != nil {
				t.Error(err)
			}
			got <- l
		}()
		eventually(t, 5*time.Second, "both waiters to sleep", func() bool {
			return c.Stats().Asleep == 1 && other.Stats().Asleep == 1
		})
		if err := next.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		first := <-got
		if s := c.Stats(); s.Handoffs != 1 {
			t.Fatalf("handoffs = %d with a foreign waiter, want still 1", s.Handoffs)
		}
		if err := first.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		second := <-got
		if second == nil {
			t.FailNow()
		}
		if err := second.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	})
}
