package relock_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/internal/testkit"
)

// TestExtend: Extend lengthens a fixed lease of every kind of lock in
// Redis and moves the lease's lost-lock signal with it, while a lease
// taken at the same time and not extended ends at its own deadline.
func TestExtend(t *testing.T) {
	type locker interface {
		TryLock(context.Context, ...relock.LockOption) (*relock.Lease, error)
	}
	testkit.ForEach(t, func(t *testing.T, top testkit.Topology) {
		c := top.NewClient(t)
		rdb := top.RDB(t)
		name := testkit.LockName(t)
		for _, tc := range []struct {
			kind string
			l    func(string) locker
		}{
			{"mutex", func(n string) locker { return c.Mutex(n) }},
			{"fair", func(n string) locker { return c.FairMutex(n) }},
			{"read", func(n string) locker { return c.RWMutex(n).RLocker() }},
			{"write", func(n string) locker { return c.RWMutex(n).WLocker() }},
		} {
			t.Run(tc.kind, func(t *testing.T) {
				ctx := testkit.CtxTimeout(t, 20*time.Second)
				const short = 300 * time.Millisecond
				long, err := tc.l(name+":"+tc.kind).TryLock(ctx, relock.WithLease(short))
				if err != nil {
					t.Fatal(err)
				}
				other, err := tc.l(name+":"+tc.kind+":other").TryLock(ctx, relock.WithLease(short))
				if err != nil {
					t.Fatal(err)
				}
				if err := long.Extend(ctx, time.Minute); err != nil {
					t.Fatalf("Extend: %v", err)
				}
				if ttl := rdb.PTTL(ctx, long.Name()).Val(); ttl < 30*time.Second {
					t.Fatalf("PTTL after Extend(1m) = %v", ttl)
				}
				// The lease not extended ends at its deadline; the
				// extended one, taken together with it, does not.
				testkit.WaitDone(t, other, 10*time.Second)
				if !errors.Is(other.Err(), relock.ErrLockLost) {
					t.Fatalf("the lease not extended: Err = %v, want ErrLockLost", other.Err())
				}
				select {
				case <-long.Done():
					t.Fatalf("the extended lease ended: %v", long.Err())
				case <-time.After(short):
				}
				if err := long.Err(); err != nil {
					t.Fatalf("Err after Extend = %v", err)
				}
				if err := long.Unlock(ctx); err != nil {
					t.Fatal(err)
				}
			})
		}
	})
}

// TestExtendErrors: Extend refuses what it cannot extend with typed
// errors.
func TestExtendErrors(t *testing.T) {
	c := testkit.NewClient(t, testkit.CloseLater(t, testkit.Standalone.Client()))
	ctx := testkit.CtxTimeout(t, 10*time.Second)
	name := testkit.LockName(t)

	l, err := c.Mutex(name).TryLock(ctx, relock.WithLease(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range []time.Duration{0, -time.Second, time.Microsecond} {
		if err := l.Extend(ctx, d); !errors.Is(err, relock.ErrInvalidOption) {
			t.Errorf("Extend(%v) = %v, want ErrInvalidOption", d, err)
		}
	}
	if err := l.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := l.Extend(ctx, time.Minute); !errors.Is(err, relock.ErrNotHeld) {
		t.Errorf("Extend after Unlock = %v, want ErrNotHeld", err)
	}

	w, err := c.Mutex(name + ":w").TryLock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Extend(ctx, time.Minute); !errors.Is(err, relock.ErrInvalidOption) {
		t.Errorf("Extend of a watchdog lease = %v, want ErrInvalidOption", err)
	}
	wo, err := c.Mutex(name + ":wo").TryLock(relock.WithOwner(ctx))
	if err != nil {
		t.Fatal(err)
	}
	if err := wo.Extend(ctx, time.Minute); !errors.Is(err, relock.ErrInvalidOption) {
		t.Errorf("Extend of a reentrant watchdog lease = %v, want ErrInvalidOption", err)
	}
	if err := w.Err(); err != nil {
		t.Fatalf("a refused Extend disturbed the lease: %v", err)
	}

	gone, err := c.Mutex(name+":gone").TryLock(ctx, relock.WithLease(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	// Deleted behind relock's back: a ForceUnlock would have the holder's
	// Client renew, and find it gone, before Extend does.
	rdb := testkit.CloseLater(t, testkit.Standalone.Client())
	if n, err := rdb.Del(ctx, gone.Name()).Result(); n != 1 || err != nil {
		t.Fatalf("DEL = %v, %v", n, err)
	}
	if err := gone.Extend(ctx, time.Minute); !errors.Is(err, relock.ErrNotHeld) {
		t.Errorf("Extend of a deleted hold = %v, want ErrNotHeld", err)
	}
	if !errors.Is(gone.Err(), relock.ErrLockLost) {
		t.Errorf("Err after Extend found the hold gone = %v, want ErrLockLost", gone.Err())
	}
	if err := gone.Extend(ctx, time.Minute); !errors.Is(err, relock.ErrLockLost) {
		t.Errorf("Extend of a lost lease = %v, want ErrLockLost", err)
	}
}

// TestExtendComposite: the lease of a MultiLock or RedLock extends every
// member's fixed lease.
func TestExtendComposite(t *testing.T) {
	ms := redistest.NewMasters(t, 3)
	nodes, direct := testkit.Nodes(t, ms), testkit.Direct(t, ms)
	c := testkit.NewClient(t, testkit.CloseLater(t, testkit.Standalone.Client()))
	rdb := testkit.CloseLater(t, testkit.Standalone.Client())
	ctx := testkit.CtxTimeout(t, 10*time.Second)
	name := testkit.LockName(t)

	check := func(t *testing.T, l *relock.Lease, rdbs []redis.UniversalClient, keys []string) {
		t.Helper()
		if err := l.Extend(ctx, time.Minute); err != nil {
			t.Fatalf("Extend: %v", err)
		}
		for i, key := range keys {
			if ttl := rdbs[i].PTTL(ctx, key).Val(); ttl < 30*time.Second {
				t.Errorf("member %d: PTTL after Extend(1m) = %v", i, ttl)
			}
		}
		if err := l.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	}
	t.Run("multi", func(t *testing.T) {
		keys := []string{name + ":a", name + ":b"}
		l, err := relock.Multi(c.Mutex(keys[0]), c.FairMutex(keys[1])).TryLock(ctx, relock.WithLease(time.Second))
		if err != nil {
			t.Fatal(err)
		}
		check(t, l, []redis.UniversalClient{rdb, rdb}, keys)
	})
	t.Run("redlock", func(t *testing.T) {
		l, err := relock.NewRedLock(name+":rl", nodes).TryLock(ctx, relock.WithLease(time.Second))
		if err != nil {
			t.Fatal(err)
		}
		keys := make([]string, len(direct))
		for i := range keys {
			keys[i] = name + ":rl"
		}
		check(t, l, direct, keys)
	})
	t.Run("watchdog member", func(t *testing.T) {
		l, err := relock.Multi(c.Mutex(name + ":c")).TryLock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := l.Extend(ctx, time.Minute); !errors.Is(err, relock.ErrInvalidOption) {
			t.Fatalf("Extend of watchdog members = %v, want ErrInvalidOption", err)
		}
		if err := l.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	})
}

// ExampleLease_Extend lengthens a fixed lease while the work under it goes
// on longer than planned.
func ExampleLease_Extend() {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr})
	defer rdb.Close()
	locks, err := relock.New(rdb)
	if err != nil {
		panic(err)
	}
	defer locks.Close()

	lease, err := locks.Mutex("example:extend").Lock(ctx, relock.WithLease(10*time.Second))
	if err != nil {
		panic(err)
	}
	defer lease.Unlock(ctx)

	// The job needs more time: a minute from now.
	if err := lease.Extend(ctx, time.Minute); err != nil {
		panic(err)
	}
	ttl, _ := locks.Mutex("example:extend").TTL(ctx)
	fmt.Println(ttl > 50*time.Second, lease.Err())

	// A lease the watchdog keeps needs no Extend.
	kept, err := locks.Mutex("example:extend:kept").Lock(ctx)
	if err != nil {
		panic(err)
	}
	defer kept.Unlock(ctx)
	fmt.Println(errors.Is(kept.Extend(ctx, time.Minute), relock.ErrInvalidOption))
	// Output:
	// true <nil>
	// true
}
