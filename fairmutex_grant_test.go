package relock_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/testkit"
)

// TestFairMutexGrants: a FairMutex release grants the lock to the head of
// the queue when it is a relock call of another Client, pushed on the
// head's channel, which the head confirms to its lease; the order is the
// queue's. A head that died after it was granted costs the next one the
// short grant and a heartbeat at most.
func TestFairMutexGrants(t *testing.T) {
	testkit.ForEach(t, func(t *testing.T, top testkit.Topology) {
		ctx := testkit.CtxTimeout(t, 30*time.Second)
		rdb := top.RDB(t)
		newClient := func() *relock.Client { return top.NewClient(t, relock.WithoutReplicaSync()) }
		lockFor := func(c *relock.Client, name string) <-chan *relock.Lease {
			got := make(chan *relock.Lease, 1)
			go func() {
				l, err := c.FairMutex(name).Lock(ctx)
				if err != nil {
					t.Error(err)
				}
				got <- l
			}()
			return got
		}
		queued := func(name string, n int64) {
			t.Helper()
			testkit.Eventually(t, 5*time.Second, "the waiters to queue", func() bool {
				return rdb.LLen(ctx, "redisson_lock_queue:{"+name+"}").Val() == n
			})
		}

		t.Run("in-order", func(t *testing.T) {
			h, a, b := newClient(), newClient(), newClient()
			name := testkit.LockName(t)
			holder, err := h.FairMutex(name).Lock(ctx)
			if err != nil {
				t.Fatal(err)
			}
			gotA := lockFor(a, name)
			queued(name, 1)
			testkit.Eventually(t, 5*time.Second, "the first waiter to sleep", func() bool { return a.Stats().Asleep == 1 })
			gotB := lockFor(b, name)
			queued(name, 2)
			if err := holder.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
			la := <-gotA
			if la == nil {
				t.FailNow()
			}
			if s := a.Stats(); s.Handoffs != 1 || s.Wakeups != 0 {
				t.Errorf("head: %d grants, %d wake-ups; want the grant pushed", s.Handoffs, s.Wakeups)
			}
			if la.Token() != holder.Token()+1 {
				t.Errorf("granted token %d after %d", la.Token(), holder.Token())
			}
			testkit.Eventually(t, 5*time.Second, "the grant to be confirmed", func() bool {
				return rdb.PTTL(ctx, name).Val() > 3*time.Second
			})
			if err := la.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
			lb := <-gotB
			if lb == nil {
				t.FailNow()
			}
			if lb.Token() != la.Token()+1 {
				t.Errorf("granted token %d after %d", lb.Token(), la.Token())
			}
			if err := lb.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
			testkit.NoKeysLeft(t, rdb, name)
		})

		t.Run("dead-grantee", func(t *testing.T) {
			h, a := newClient(), newClient()
			name := testkit.LockName(t)
			holder, err := h.FairMutex(name).Lock(ctx)
			if err != nil {
				t.Fatal(err)
			}
			// A relock waiter of a Client that has died is first in the
			// queue, alive for a minute yet, and takes grants.
			dead := "0dead:1"
			now := rdb.Time(ctx).Val().UnixMilli()
			if _, err := rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
				p.RPush(ctx, "redisson_lock_queue:{"+name+"}", dead)
				p.ZAdd(ctx, "redisson_lock_timeout:{"+name+"}", redis.Z{Score: float64(now + 400000), Member: dead})
				p.HSet(ctx, "relock_fair_alive:{"+name+"}", dead, formatAlive(now+60000, 30000))
				p.PExpire(ctx, "relock_fair_alive:{"+name+"}", time.Minute)
				return nil
			}); err != nil {
				t.Fatal(err)
			}
			got := lockFor(a, name)
			queued(name, 2)
			if err := holder.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
			la := <-got
			if la == nil {
				t.FailNow()
			}
			if la.Token() != holder.Token()+2 {
				t.Errorf("token %d after %d: want the dead waiter's grant between", la.Token(), holder.Token())
			}
			if err := la.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
			testkit.NoKeysLeft(t, rdb, name)
		})
	})
}

// formatAlive is a relock fair waiter's liveness entry.
func formatAlive(deadline int64, lease int64) string {
	return fmt.Sprintf("%d:%d", deadline, lease)
}
