package relock_test

import (
	"context"
	"errors"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/layout"
	"github.com/relock-go/relock/internal/testkit"
)

// wrongValue is a value of a key that a synchronizer cannot work with.
type wrongValue struct {
	name  string
	write func(ctx context.Context, rdb *redis.Client, key string) error
}

var (
	notANumber = wrongValue{"string", func(ctx context.Context, rdb *redis.Client, key string) error {
		return rdb.Set(ctx, key, "not a number", 0).Err()
	}}
	appHash = wrongValue{"hash", func(ctx context.Context, rdb *redis.Client, key string) error {
		return rdb.HSet(ctx, key, "name", "Ann", "email", "ann@example.com").Err()
	}}
	appList = wrongValue{"list", func(ctx context.Context, rdb *redis.Client, key string) error {
		return rdb.RPush(ctx, key, "a", "b").Err()
	}}
)

// syncCall is a call of a synchronizer on the name given.
type syncCall struct {
	name string
	call func(ctx context.Context, c *relock.Client, name string) error
}

// TestSynchronizersRefuseWrongValues: every call of Semaphore,
// PermitSemaphore, CountDownLatch and Election on a key of another type,
// or a string that is no number where a number belongs, returns an error
// matching ErrWrongType and writes nothing: the keys of the name are as
// they were, values and TTLs included (and no fencing token is drawn).
func TestSynchronizersRefuseWrongValues(t *testing.T) {
	permitsKey := func(n string) string { return n }
	heldKey := layout.PermitTimeouts
	electionLock := func(n string) string { return layout.Companion(layout.Election, n) }
	electionLog := func(n string) string { return layout.Companion(layout.ElectionLog, n) }

	semaphore := []syncCall{
		{"TrySetPermits", func(ctx context.Context, c *relock.Client, n string) error {
			_, err := c.Semaphore(n).TrySetPermits(ctx, 1)
			return err
		}},
		{"AddPermits", func(ctx context.Context, c *relock.Client, n string) error {
			return c.Semaphore(n).AddPermits(ctx, 1)
		}},
		{"Release", func(ctx context.Context, c *relock.Client, n string) error {
			return c.Semaphore(n).Release(ctx, 1)
		}},
		{"TryAcquire", func(ctx context.Context, c *relock.Client, n string) error {
			return c.Semaphore(n).TryAcquire(ctx, 1)
		}},
		{"Acquire", func(ctx context.Context, c *relock.Client, n string) error {
			return c.Semaphore(n).Acquire(ctx, 1)
		}},
		{"Available", func(ctx context.Context, c *relock.Client, n string) error {
			_, err := c.Semaphore(n).Available(ctx)
			return err
		}},
		{"Drain", func(ctx context.Context, c *relock.Client, n string) error {
			_, err := c.Semaphore(n).Drain(ctx)
			return err
		}},
	}
	latch := []syncCall{
		{"TrySetCount", func(ctx context.Context, c *relock.Client, n string) error {
			_, err := c.CountDownLatch(n).TrySetCount(ctx, 1)
			return err
		}},
		{"CountDown", func(ctx context.Context, c *relock.Client, n string) error {
			return c.CountDownLatch(n).CountDown(ctx)
		}},
		{"Count", func(ctx context.Context, c *relock.Client, n string) error {
			_, err := c.CountDownLatch(n).Count(ctx)
			return err
		}},
		{"Await", func(ctx context.Context, c *relock.Client, n string) error {
			return c.CountDownLatch(n).Await(ctx)
		}},
	}
	// A permit id of the test's own, held by no one.
	const noPermit = "00112233445566778899aabbccddeeff0011223344556677"
	permitSem := []syncCall{
		{"TrySetPermits", func(ctx context.Context, c *relock.Client, n string) error {
			_, err := c.PermitSemaphore(n).TrySetPermits(ctx, 1)
			return err
		}},
		{"AddPermits", func(ctx context.Context, c *relock.Client, n string) error {
			return c.PermitSemaphore(n).AddPermits(ctx, 1)
		}},
		{"TryAcquire", func(ctx context.Context, c *relock.Client, n string) error {
			p, err := c.PermitSemaphore(n).TryAcquire(ctx)
			if err == nil {
				_ = p.Release(ctx)
			}
			return err
		}},
		{"Acquire", func(ctx context.Context, c *relock.Client, n string) error {
			p, err := c.PermitSemaphore(n).Acquire(ctx)
			if err == nil {
				_ = p.Release(ctx)
			}
			return err
		}},
		{"Available", func(ctx context.Context, c *relock.Client, n string) error {
			_, err := c.PermitSemaphore(n).Available(ctx)
			return err
		}},
		{"Release unknown id", func(ctx context.Context, c *relock.Client, n string) error {
			return c.PermitSemaphore(n).Release(ctx, noPermit)
		}},
		{"UpdateLease unknown id", func(ctx context.Context, c *relock.Client, n string) error {
			return c.PermitSemaphore(n).UpdateLease(ctx, noPermit, time.Minute)
		}},
	}
	election := []syncCall{
		{"Campaign", func(ctx context.Context, c *relock.Client, n string) error {
			l, err := c.Election(n).Campaign(ctx, "me")
			if err == nil {
				_ = l.Resign(ctx)
			}
			return err
		}},
		{"Leader", func(ctx context.Context, c *relock.Client, n string) error {
			_, err := c.Election(n).Leader(ctx)
			return err
		}},
	}

	type keyed struct {
		key    func(name string) string
		values []wrongValue
		calls  []syncCall
	}
	for _, p := range []struct {
		primitive string
		keys      []keyed
	}{
		{"Semaphore", []keyed{{permitsKey, []wrongValue{notANumber, appHash}, semaphore}}},
		{"CountDownLatch", []keyed{{permitsKey, []wrongValue{notANumber, appHash}, latch}}},
		{"PermitSemaphore", []keyed{
			{permitsKey, []wrongValue{notANumber, appHash}, permitSem},
			{heldKey, []wrongValue{notANumber, appHash}, permitSem},
		}},
		{"Election", []keyed{
			{electionLog, []wrongValue{notANumber, appHash}, election},
			{electionLock, []wrongValue{notANumber, appList}, election},
		}},
	} {
		for _, k := range p.keys {
			for _, v := range k.values {
				for _, call := range k.calls {
					keyName := strings.TrimPrefix(k.key("N"), "N")
					if keyName == "" {
						keyName = "name"
					}
					t.Run(p.primitive+"/"+call.name+"/"+v.name+" at "+keyName, func(t *testing.T) {
						wrongValueCall(t, k.key, v, call)
					})
				}
			}
		}
	}
}

// wrongValueCall writes v at the key of a fresh name, runs call on it, and
// checks that it returned ErrWrongType and changed no key of the name.
func wrongValueCall(t *testing.T, key func(string) string, v wrongValue, call syncCall) {
	ctx := testkit.CtxTimeout(t, 10*time.Second)
	direct := testkit.CloseLater(t, testkit.Standalone.Client())
	c := testkit.NewClient(t, testkit.Standalone.Client(), relock.WithoutReplicaSync())
	name := testkit.LockName(t)
	if err := v.write(ctx, direct, key(name)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, k := range testkit.KeysOf(t, direct, name) {
			direct.Del(context.Background(), k)
		}
	})
	before := testkit.DumpKeys(t, direct, name)
	// A call that waited for what never comes would end with this ctx.
	callCtx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	err := call.call(callCtx, c, name)
	if !errors.Is(err, relock.ErrWrongType) {
		t.Errorf("%s = %v, want ErrWrongType", call.name, err)
	}
	if after := testkit.DumpKeys(t, direct, name); !maps.Equal(before, after) {
		t.Errorf("%s wrote:\nbefore %v\nafter  %v", call.name, before, after)
	}
}
