package relock_test

import (
	"context"
	"errors"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/conformance"
	"github.com/relock-go/relock/internal/testkit"
)

func TestQueueOfAnotherType(t *testing.T) { conformance.QueueOfAnotherType(t) }

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
				before := testkit.DumpKeys(t, direct, name)
				if err := call.call(ctx, c, name); !errors.Is(err, tc.want) {
					t.Fatalf("%s = %v, want %v", call.name, err, tc.want)
				}
				if tc.want == relock.ErrWrongType {
					if after := testkit.DumpKeys(t, direct, name); !maps.Equal(before, after) {
						t.Fatalf("%s wrote:\nbefore %v\nafter  %v", call.name, before, after)
					}
				}
			})
		}
	}
}
