package relock_test

import (
	"context"
	"errors"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/layout"
	"github.com/relock-go/relock/internal/testkit"
)

// TestQueueOfAnotherType: a string at a lock's queue key fails the
// acquisition with ErrWrongType, writing nothing, where the release would
// fail on it; so no hold is taken that cannot be released. A FairMutex
// whose waiting budgets hold a string and whose queue is empty is taken
// and released as any, since neither call reads them then.
func TestQueueOfAnotherType(t *testing.T) {
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
			c := testkit.NewClient(t, testkit.Standalone.Client())
			name := testkit.LockName(t)
			queue := tc.queue(name)
			if err := direct.Set(ctx, queue, "not a queue", 0).Err(); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { direct.Del(context.Background(), queue, name) })
			before := dumpKeys(t, direct, name)

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
			if after := dumpKeys(t, direct, name); !maps.Equal(before, after) {
				t.Fatalf("the refused acquisition wrote:\nbefore %v\nafter  %v", before, after)
			}
		})
	}
}

// TestApplicationHashIsNoLock: a hash without a TTL whose fields are not
// a lock's (an application's record: name, email) fails every lock call
// on it with ErrWrongType at once, writing nothing, where it would wait
// for ever as for a lock held by others. A hash that may be a lock (every
// value an integer, as a Redisson lock's hold counts), or one with a TTL,
// is a lock held by others: TryLock returns ErrNotAcquired.
func TestApplicationHashIsNoLock(t *testing.T) {
	type try = func(ctx context.Context, c *relock.Client, name string) error
	calls := []struct {
		name string
		call try
	}{
		{"Mutex.Lock", func(ctx context.Context, c *relock.Client, n string) error {
			_, err := c.Mutex(n).Lock(ctx)
			return err
		}},
		{"Mutex.TryLock", func(ctx context.Context, c *relock.Client, n string) error {
			_, err := c.Mutex(n).TryLock(ctx)
			return err
		}},
		{"FairMutex.Lock", func(ctx context.Context, c *relock.Client, n string) error {
			_, err := c.FairMutex(n).Lock(ctx)
			return err
		}},
		{"FairMutex.TryLock", func(ctx context.Context, c *relock.Client, n string) error {
			_, err := c.FairMutex(n).TryLock(ctx)
			return err
		}},
		{"RWMutex.Lock", func(ctx context.Context, c *relock.Client, n string) error {
			_, err := c.RWMutex(n).Lock(ctx)
			return err
		}},
		{"RWMutex.RLock", func(ctx context.Context, c *relock.Client, n string) error {
			_, err := c.RWMutex(n).RLock(ctx)
			return err
		}},
		{"RWMutex.TryRLock", func(ctx context.Context, c *relock.Client, n string) error {
			_, err := c.RWMutex(n).TryRLock(ctx)
			return err
		}},
	}
	for _, tc := range []struct {
		name   string
		fields []any
		ttl    time.Duration
		want   error
	}{
		{"application hash", []any{"name", "Ann", "email", "ann@example.com"}, 0, relock.ErrWrongType},
		{"application hash with a TTL", []any{"name", "Ann", "email", "ann@example.com"}, time.Minute, relock.ErrNotAcquired},
		{"lock hash without a TTL", []any{"6f1f5a5e-8a2b-4a44-9d7e-3c1b1d1e2f3a:1", "1"}, 0, relock.ErrNotAcquired},
	} {
		for _, call := range calls {
			blocking := !strings.Contains(call.name, "Try")
			if tc.want == relock.ErrNotAcquired && blocking {
				continue // it would wait for the holder
			}
			t.Run(tc.name+"/"+call.name, func(t *testing.T) {
				ctx := testkit.CtxTimeout(t, 10*time.Second)
				direct := testkit.CloseLater(t, testkit.Standalone.Client())
				c := testkit.NewClient(t, testkit.Standalone.Client(), relock.WithoutReplicaSync())
				name := testkit.LockName(t)
				if err := direct.HSet(ctx, name, tc.fields...).Err(); err != nil {
					t.Fatal(err)
				}
				if tc.ttl > 0 {
					direct.PExpire(ctx, name, tc.ttl)
				}
				t.Cleanup(func() {
					for _, k := range testkit.KeysOf(t, direct, name) {
						direct.Del(context.Background(), k)
					}
				})
				before := dumpKeys(t, direct, name)
				if err := call.call(ctx, c, name); !errors.Is(err, tc.want) {
					t.Fatalf("%s = %v, want %v", call.name, err, tc.want)
				}
				if tc.want == relock.ErrWrongType {
					if after := dumpKeys(t, direct, name); !maps.Equal(before, after) {
						t.Fatalf("%s wrote:\nbefore %v\nafter  %v", call.name, before, after)
					}
				}
			})
		}
	}
}
