package relock_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/internal/testkit"
)

// ended returns a context that has been cancelled, as a request's is once
// its client went away.
func ended() context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return ctx
}

// TestUnlockWithEndedContext: `defer lease.Unlock(r.Context())` frees the
// lock after the request's context was cancelled: the release goes out,
// and another Client takes the lock at once.
func TestUnlockWithEndedContext(t *testing.T) {
	type locker interface {
		TryLock(context.Context, ...relock.LockOption) (*relock.Lease, error)
	}
	ms := redistest.NewMasters(t, 3)
	ours, theirs := testkit.Nodes(t, ms), testkit.Nodes(t, ms)
	testkit.ForEach(t, func(t *testing.T, top testkit.Topology) {
		a, b := top.NewClient(t), top.NewClient(t)
		name := testkit.LockName(t)
		cases := []struct {
			kind       string
			ours, them locker
			owner      bool // lock with WithOwner: a shared reentrant hold
		}{
			{"mutex", a.Mutex(name + ":m"), b.Mutex(name + ":m"), false},
			{"mutex reentrant", a.Mutex(name + ":mr"), b.Mutex(name + ":mr"), true},
			{"fair", a.FairMutex(name + ":f"), b.FairMutex(name + ":f"), false},
			{"read", a.RWMutex(name + ":r").RLocker(), b.RWMutex(name + ":r").WLocker(), false},
			{"read reentrant", a.RWMutex(name + ":rr").RLocker(), b.RWMutex(name + ":rr").WLocker(), true},
			{"write", a.RWMutex(name + ":w").WLocker(), b.RWMutex(name + ":w").WLocker(), false},
			{"multi", relock.Multi(a.Mutex(name+":x"), a.FairMutex(name+":y")), relock.Multi(b.Mutex(name+":x"), b.FairMutex(name+":y")), false},
			{"redlock", relock.NewRedLock(name+":rl", ours), relock.NewRedLock(name+":rl", theirs), false},
		}
		for _, tc := range cases {
			t.Run(tc.kind, func(t *testing.T) {
				ctx := testkit.CtxTimeout(t, 10*time.Second)
				lctx := ctx
				if tc.owner {
					lctx = relock.WithOwner(ctx)
				}
				l, err := tc.ours.TryLock(lctx)
				if err != nil {
					t.Fatal(err)
				}
				if err := l.Unlock(ended()); err != nil {
					t.Fatalf("Unlock with an ended context: %v", err)
				}
				if !errors.Is(l.Err(), relock.ErrReleased) {
					t.Fatalf("Err = %v, want ErrReleased", l.Err())
				}
				other, err := tc.them.TryLock(ctx)
				if err != nil {
					t.Fatalf("another Client's TryLock after the Unlock: %v", err)
				}
				if err := other.Unlock(ctx); err != nil {
					t.Fatal(err)
				}
			})
		}
	})
}

// TestReleaseWithEndedContext: a permit, semaphore permits and a
// leadership come back when released with an ended context.
func TestReleaseWithEndedContext(t *testing.T) {
	testkit.ForEach(t, func(t *testing.T, top testkit.Topology) {
		ctx := testkit.CtxTimeout(t, 10*time.Second)
		a, b := top.NewClient(t), top.NewClient(t)
		name := testkit.LockName(t)

		t.Run("permit", func(t *testing.T) {
			ps := testkit.NewPermits(t, a, 1)
			p, err := ps.TryAcquire(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if err := p.Release(ended()); err != nil {
				t.Fatalf("Release with an ended context: %v", err)
			}
			if _, err := b.PermitSemaphore(ps.Name()).TryAcquire(ctx); err != nil {
				t.Fatalf("another Client's TryAcquire after the Release: %v", err)
			}
		})

		t.Run("permit by id", func(t *testing.T) {
			ps := testkit.NewPermits(t, a, 1)
			p, err := ps.TryAcquire(ctx, relock.WithLease(time.Minute))
			if err != nil {
				t.Fatal(err)
			}
			if err := b.PermitSemaphore(ps.Name()).Release(ended(), p.ID()); err != nil {
				t.Fatalf("Release by id with an ended context: %v", err)
			}
			if n, err := ps.Available(ctx); err != nil || n != 1 {
				t.Fatalf("Available = %d, %v; want 1", n, err)
			}
		})

		t.Run("semaphore", func(t *testing.T) {
			s := a.Semaphore(name + ":s")
			if ok, err := s.TrySetPermits(ctx, 1); !ok || err != nil {
				t.Fatalf("TrySetPermits = %v, %v", ok, err)
			}
			if err := s.TryAcquire(ctx, 1); err != nil {
				t.Fatal(err)
			}
			if err := s.Release(ended(), 1); err != nil {
				t.Fatalf("Release with an ended context: %v", err)
			}
			if err := b.Semaphore(s.Name()).TryAcquire(ctx, 1); err != nil {
				t.Fatalf("another Client's TryAcquire after the Release: %v", err)
			}
		})

		t.Run("leadership", func(t *testing.T) {
			l, err := a.Election(name+":e").Campaign(ctx, "a")
			if err != nil {
				t.Fatal(err)
			}
			if err := l.Resign(ended()); err != nil {
				t.Fatalf("Resign with an ended context: %v", err)
			}
			if !errors.Is(l.Err(), relock.ErrReleased) {
				t.Fatalf("Err = %v, want ErrReleased", l.Err())
			}
			// The lock is free: another campaigner is elected without
			// waiting for it to expire.
			cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			defer cancel()
			lb, err := b.Election(name+":e").Campaign(cctx, "b")
			if err != nil {
				t.Fatalf("another Campaign after the Resign: %v", err)
			}
			if err := lb.Resign(ctx); err != nil {
				t.Fatal(err)
			}
		})
	})
}

// TestFailedReleaseStopsRenewal: a release the server refuses (here the
// Redis user may no longer touch the lock's companion keys, which the
// release script names, while the renewal, which names the lock's own key
// only, is still allowed) says so, and the hold is no longer renewed: it
// expires within its lease, and its lease reports the loss.
func TestFailedReleaseStopsRenewal(t *testing.T) {
	for _, reentrant := range []bool{false, true} {
		t.Run(map[bool]string{false: "one-shot", true: "reentrant"}[reentrant], func(t *testing.T) {
			t.Parallel()
			ctx := testkit.CtxTimeout(t, 20*time.Second)
			user := aclUser(t, []*redistest.Server{testkit.Standalone}, "~*", "&*", "+@all")
			rdb := testkit.CloseLater(t, redis.NewClient(&redis.Options{Addr: testkit.Standalone.Addr, Username: user, Password: "pw"}))
			c := testkit.NewClient(t, rdb, relock.WithWatchdogTimeout(time.Second))
			name := testkit.LockName(t)
			lctx := ctx
			if reentrant {
				lctx = relock.WithOwner(ctx)
			}
			l, err := c.Mutex(name).Lock(lctx)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := testkit.Standalone.Do(ctx, "ACL", "SETUSER", user, "resetkeys", "~"+name); err != nil {
				t.Fatal(err)
			}
			err = l.Unlock(ctx)
			if !errors.Is(err, relock.ErrNoPermission) || !strings.Contains(err.Error(), "refused") ||
				!strings.Contains(err.Error(), "no longer renewed") {
				t.Fatalf("Unlock = %v, want a refusal that says the hold is no longer renewed", err)
			}
			testkit.WaitDone(t, l, 10*time.Second)
			if !errors.Is(l.Err(), relock.ErrLockLost) {
				t.Fatalf("Err = %v, want ErrLockLost", l.Err())
			}
			admin := testkit.CloseLater(t, testkit.Standalone.Client())
			testkit.Eventually(t, 10*time.Second, "the lock to expire", func() bool {
				return admin.Exists(ctx, name).Val() == 0
			})
		})
	}
}

// TestFailedPermitReleaseStopsRenewal: as TestFailedReleaseStopsRenewal,
// for a Permit: the renewal names the held permits' key only, the release
// the free count too, which the user may no longer touch.
func TestFailedPermitReleaseStopsRenewal(t *testing.T) {
	t.Parallel()
	ctx := testkit.CtxTimeout(t, 20*time.Second)
	user := aclUser(t, []*redistest.Server{testkit.Standalone}, "~*", "&*", "+@all")
	rdb := testkit.CloseLater(t, redis.NewClient(&redis.Options{Addr: testkit.Standalone.Addr, Username: user, Password: "pw"}))
	c := testkit.NewClient(t, rdb, relock.WithWatchdogTimeout(time.Second))
	ps := testkit.NewPermits(t, c, 1)
	p, err := ps.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	held := "{" + ps.Name() + "}:timeout"
	if _, err := testkit.Standalone.Do(ctx, "ACL", "SETUSER", user, "resetkeys", "~"+held); err != nil {
		t.Fatal(err)
	}
	err = p.Release(ctx)
	if !errors.Is(err, relock.ErrNoPermission) || !strings.Contains(err.Error(), "no longer renewed") {
		t.Fatalf("Release = %v, want a refusal that says the permit is no longer renewed", err)
	}
	select {
	case <-p.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the permit was still held 10s after its release failed")
	}
	if !errors.Is(p.Err(), relock.ErrLockLost) {
		t.Fatalf("Err = %v, want ErrLockLost", p.Err())
	}
	// Its lease ran out: another Client takes it.
	other := testkit.NewClient(t, testkit.CloseLater(t, testkit.Standalone.Client()))
	testkit.Eventually(t, 10*time.Second, "the permit to come back", func() bool {
		_, err := other.PermitSemaphore(ps.Name()).TryAcquire(ctx, relock.WithLease(time.Minute))
		return err == nil
	})
}

// TestFailedReleaseOfSharedHold: a reentrant owner's hold is renewed while
// one of its leases has not failed a release, and no longer once the last
// of them is unlocked: the count the failed release left then expires.
func TestFailedReleaseOfSharedHold(t *testing.T) {
	t.Parallel()
	ctx := testkit.CtxTimeout(t, 20*time.Second)
	user := aclUser(t, []*redistest.Server{testkit.Standalone}, "~*", "&*", "+@all")
	rdb := testkit.CloseLater(t, redis.NewClient(&redis.Options{Addr: testkit.Standalone.Addr, Username: user, Password: "pw"}))
	c := testkit.NewClient(t, rdb, relock.WithWatchdogTimeout(time.Second))
	m := c.Mutex(testkit.LockName(t))
	owner := relock.WithOwner(ctx)
	a, err := m.Lock(owner)
	if err != nil {
		t.Fatal(err)
	}
	b, err := m.Lock(owner)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := testkit.Standalone.Do(ctx, "ACL", "SETUSER", user, "resetkeys", "~"+m.Name()); err != nil {
		t.Fatal(err)
	}
	if err := a.Unlock(ctx); !errors.Is(err, relock.ErrNoPermission) {
		t.Fatalf("Unlock = %v, want ErrNoPermission", err)
	}
	// b still holds, and the watchdog keeps renewing the hold for it.
	admin := testkit.CloseLater(t, testkit.Standalone.Client())
	renewed(t, admin, m.Name())
	if err := a.Err(); err != nil {
		t.Fatalf("the shared hold ended while b holds it: %v", err)
	}
	if _, err := testkit.Standalone.Do(ctx, "ACL", "SETUSER", user, "allkeys"); err != nil {
		t.Fatal(err)
	}
	if err := b.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	// The count a's release left is no longer renewed: it expires.
	testkit.WaitDone(t, a, 10*time.Second)
	if !errors.Is(a.Err(), relock.ErrLockLost) {
		t.Fatalf("Err = %v, want ErrLockLost", a.Err())
	}
	testkit.Eventually(t, 10*time.Second, "the lock to expire", func() bool {
		return admin.Exists(ctx, m.Name()).Val() == 0
	})
	// The owner takes it afresh, renewed again.
	l, err := m.Lock(owner)
	if err != nil {
		t.Fatal(err)
	}
	renewed(t, admin, m.Name())
	if err := l.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}

// renewed waits until the watchdog renews key: its PTTL, read again and
// again, goes up.
func renewed(t *testing.T, rdb redis.UniversalClient, key string) {
	t.Helper()
	ctx := testkit.CtxTimeout(t, 10*time.Second)
	last := rdb.PTTL(ctx, key).Val()
	testkit.Eventually(t, 10*time.Second, "a renewal of "+key, func() bool {
		ttl := rdb.PTTL(ctx, key).Val()
		up := ttl > last
		last = ttl
		return up
	})
}
