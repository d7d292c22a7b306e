package relock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/layout"
	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/internal/testkit"
)

// TestFailedLeaveSentByNextCall: a waiter that gives up while the server
// does not answer cannot leave the lock's queue; its entry is taken out by
// the Client's next call on the lock, not left to hold the queue up until
// it expires.
func TestFailedLeaveSentByNextCall(t *testing.T) {
	srv := redistest.Standalone(t)
	rdb := testkit.CloseLater(t, redis.NewClient(&redis.Options{Addr: srv.Addr, ReadTimeout: 300 * time.Millisecond}))
	holder := testkit.NewClient(t, rdb, relock.WithoutReplicaSync())
	c := testkit.NewClient(t, rdb, relock.WithCleanupTimeout(200*time.Millisecond), relock.WithoutReplicaSync())
	ctx := testkit.CtxTimeout(t, 20*time.Second)
	queueLen := func(kind, name string) int64 {
		if kind == "fair" {
			return int64(len(testkit.Queued(t, rdb, name)))
		}
		n, err := rdb.ZCard(ctx, layout.Companion(layout.LockQueue, name)).Result()
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	for _, kind := range []string{"mutex", "fair"} {
		t.Run(kind, func(t *testing.T) {
			name := testkit.LockName(t)
			var lock, try func(*relock.Client) func(context.Context, ...relock.LockOption) (*relock.Lease, error)
			if kind == "fair" {
				lock = func(c *relock.Client) func(context.Context, ...relock.LockOption) (*relock.Lease, error) {
					return c.FairMutex(name).Lock
				}
				try = func(c *relock.Client) func(context.Context, ...relock.LockOption) (*relock.Lease, error) {
					return c.FairMutex(name).TryLock
				}
			} else {
				lock = func(c *relock.Client) func(context.Context, ...relock.LockOption) (*relock.Lease, error) {
					return c.Mutex(name).Lock
				}
				try = func(c *relock.Client) func(context.Context, ...relock.LockOption) (*relock.Lease, error) {
					return c.Mutex(name).TryLock
				}
			}
			held, err := lock(holder)(ctx)
			if err != nil {
				t.Fatal(err)
			}
			wctx, cancel := context.WithCancel(ctx)
			done := make(chan error, 1)
			go func() {
				_, err := lock(c)(wctx)
				done <- err
			}()
			testkit.Eventually(t, 5*time.Second, "the waiter to queue", func() bool {
				return c.Stats().Asleep == 1 && queueLen(kind, name) == 1
			})
			if err := srv.Pause(); err != nil {
				t.Fatal(err)
			}
			cancel()
			if err := <-done; !errors.Is(err, context.Canceled) {
				t.Fatalf("Lock = %v, want context.Canceled", err)
			}
			if err := srv.Resume(); err != nil {
				t.Fatal(err)
			}
			if n := queueLen(kind, name); n != 1 {
				t.Fatalf("%d entries queued after a leave the server did not answer, want the waiter's 1", n)
			}
			// The next call on the lock sends the leave first.
			if _, err := try(c)(ctx); !errors.Is(err, relock.ErrNotAcquired) {
				t.Fatalf("TryLock = %v, want ErrNotAcquired", err)
			}
			if n := queueLen(kind, name); n != 0 {
				t.Fatalf("%d entries queued after the Client's next call, want 0", n)
			}
			if err := held.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
		})
	}
}
