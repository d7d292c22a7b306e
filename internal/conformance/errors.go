package conformance

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

// QueueOfAnotherType: a string at a lock's queue key fails the
// acquisition with ErrWrongType, writing nothing, where the release would
// fail on it; so no hold is taken that cannot be released. A FairMutex
// whose waiting budgets hold a string and whose queue is empty is taken
// and released as any, since neither call reads them then.
func QueueOfAnotherType(t *testing.T) {
	type try = func(ctx context.Context, c *relock.Client, name string) (*relock.Lease, error)
	for _, tc := range []struct {
		name  string
		try   try
		queue func(name string) string
		ok    bool // taken and released
	}{
		{"mutex", func(ctx context.Context, c *relock.Client, n string) (*relock.Lease, error) {
			return c.Mutex(n).TryLock(ctx)
		}, func(n string) string { return layout.Companion(layout.LockQueue, n) }, false},
		{"mutex lock", func(ctx context.Context, c *relock.Client, n string) (*relock.Lease, error) {
			return c.Mutex(n).Lock(ctx)
		}, func(n string) string { return layout.Companion(layout.LockQueue, n) }, false},
		{"rwmutex write", func(ctx context.Context, c *relock.Client, n string) (*relock.Lease, error) {
			return c.RWMutex(n).TryLock(ctx)
		}, func(n string) string { return layout.Companion(layout.RWQueue, n) }, false},
		{"rwmutex read", func(ctx context.Context, c *relock.Client, n string) (*relock.Lease, error) {
			return c.RWMutex(n).TryRLock(ctx)
		}, func(n string) string { return layout.Companion(layout.RWQueue, n) }, false},
		{"fairmutex queue", func(ctx context.Context, c *relock.Client, n string) (*relock.Lease, error) {
			return c.FairMutex(n).TryLock(ctx)
		}, testkit.FairQueueKey, false},
		{"fairmutex budgets", func(ctx context.Context, c *relock.Client, n string) (*relock.Lease, error) {
			return c.FairMutex(n).TryLock(ctx)
		}, testkit.FairTimeoutKey, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := testkit.CtxTimeout(t, 10*time.Second)
			direct := testkit.CloseLater(t, testkit.Standalone.Client())
			c := testkit.Topologies()[0].NewClient(t)
			name := testkit.LockName(t)
			queue := tc.queue(name)
			if err := direct.Set(ctx, queue, "not a queue", 0).Err(); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { direct.Del(context.Background(), queue, name) })
			before := testkit.DumpKeys(t, direct, name)

			l, err := tc.try(ctx, c, name)
			if tc.ok {
				if err != nil {
					t.Fatal(err)
				}
				if err := l.Unlock(ctx); err != nil {
					t.Fatalf("Unlock = %v", err)
				}
				if testkit.Exists(t, direct, name) {
					t.Fatal("the lock is still there after Unlock")
				}
				return
			}
			if !errors.Is(err, relock.ErrWrongType) {
				if l != nil {
					_ = l.Unlock(ctx)
				}
				t.Fatalf("acquisition = %v, want ErrWrongType", err)
			}
			if after := testkit.DumpKeys(t, direct, name); !maps.Equal(before, after) {
				t.Fatalf("the refused acquisition wrote:\nbefore %v\nafter  %v", before, after)
			}
		})
	}
}
