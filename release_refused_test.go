package relock_test

import (
	"context"
	"errors"
	"maps"
	"testing"
	"time"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/layout"
	"github.com/relock-go/relock/internal/testkit"
)

// readmeACLWithoutTime is the README's ACL line for relock's user (after "ACL
// SETUSER relock on >change-me"), without +time.
var readmeACLWithoutTime = append([]string{"~*"}, append(publishPatterns,
	"-@all", "+@read", "+@write", "+@pubsub", "+@connection", "-@dangerous", "+eval", "+evalsha",
	"+info", "+cluster|slots", "+cluster|shards", "+cluster|nodes", "+cluster|info", "+readonly")...)

// TestReleaseRefusedWritesNothing: a user the README's ACL line grants all
// but TIME gets ErrNoPermission from a release that would grant the lock
// to another Client's waiting writer (which reads the server's clock), and
// the release has written nothing: the holder's hold is still there, as it
// was, and the waiter has not been granted the lock. Redis does not undo
// the writes of a script that fails, so every script calls what may fail
// before its first write.
func TestReleaseRefusedWritesNothing(t *testing.T) {
	type lock = func(ctx context.Context, c *relock.Client, name string) (*relock.Lease, error)
	var (
		rlock lock = func(ctx context.Context, c *relock.Client, n string) (*relock.Lease, error) {
			return c.RWMutex(n).RLock(ctx)
		}
		wlock lock = func(ctx context.Context, c *relock.Client, n string) (*relock.Lease, error) {
			return c.RWMutex(n).Lock(ctx)
		}
		mlock lock = func(ctx context.Context, c *relock.Client, n string) (*relock.Lease, error) {
			return c.Mutex(n).Lock(ctx)
		}
	)
	rwQueue := func(n string) string { return layout.Companion(layout.RWQueue, n) }
	lockQueue := func(n string) string { return layout.Companion(layout.LockQueue, n) }
	for _, tc := range []struct {
		name string
		// hold takes the hold of the user without TIME; wait is the other
		// Client's call that waits for it.
		hold, wait lock
		// queue is the key of the lock's queue of relock waiters.
		queue func(name string) string
		// wake is the lock's release channel when the waiter joins the
		// queue only once woken to attempt again (see below).
		wake func(name string) string
	}{
		{"rwmutex read unlock", rlock, wlock, rwQueue, testkit.RWChannel},
		{"rwmutex write unlock", wlock, wlock, rwQueue, nil},
		{"mutex unlock", mlock, mlock, lockQueue, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := testkit.CtxTimeout(t, 20*time.Second)
			direct := testkit.CloseLater(t, testkit.Standalone.Client())
			name := testkit.LockName(t)
			t.Cleanup(func() { direct.Del(context.Background(), name) })

			// Without replica sync, whose calls never queue for a grant.
			holder := testkit.NewClient(t, aclClient(t, testkit.Standalone, readmeACLWithoutTime...), relock.WithoutReplicaSync())
			other := testkit.NewClient(t, testkit.Standalone.Client(), relock.WithoutReplicaSync())
			l, err := tc.hold(ctx, holder, name)
			if err != nil {
				t.Fatal(err)
			}
			waitCtx, stopWaiting := context.WithCancel(ctx)
			waited := make(chan error, 1)
			go func() {
				l, err := tc.wait(waitCtx, other, name)
				if err == nil {
					err = errors.New("the waiter got the lock")
					_ = l.Unlock(context.Background())
				}
				waited <- err
			}()
			// A writer that waits for readers joins the queue at its first
			// attempt once it listens on the release channel: a message
			// there (which the holder's Client does not take for a
			// release of its own) wakes it to attempt.
			testkit.Eventually(t, 10*time.Second, "the writer to queue", func() bool {
				if direct.ZCard(ctx, tc.queue(name)).Val() > 0 {
					return true
				}
				if tc.wake != nil {
					direct.Publish(ctx, tc.wake(name), "1")
				}
				return false
			})
			before := testkit.DumpKeys(t, direct, name)

			err = l.Unlock(ctx)
			if !errors.Is(err, relock.ErrNoPermission) {
				t.Fatalf("Unlock = %v, want ErrNoPermission\nbefore %v\nafter %v", err, before, testkit.DumpKeys(t, direct, name))
			}
			if after := testkit.DumpKeys(t, direct, name); !maps.Equal(before, after) {
				t.Fatalf("the refused release wrote:\nbefore %v\nafter  %v", before, after)
			}
			stopWaiting()
			if err := <-waited; !errors.Is(err, context.Canceled) {
				t.Fatalf("the waiter's Lock = %v, want context.Canceled", err)
			}
		})
	}
}
