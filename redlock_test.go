package relock_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/conformance"
	"github.com/relock-go/relock/internal/history"
	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/internal/testkit"
)

func TestRedLockQuorum(t *testing.T) { conformance.RedLockQuorum(t) }

func TestRedLockWaits(t *testing.T) { conformance.RedLockWaits(t) }

// TestRedLockReentrant: with an owner, a RedLock re-enters its node holds.
func TestRedLockReentrant(t *testing.T) {
	t.Parallel()
	ms := redistest.NewMasters(t, 5)
	ours, theirs, rdbs := testkit.Nodes(t, ms), testkit.Nodes(t, ms), testkit.Direct(t, ms)
	name := testkit.LockName(t)
	ctx := testkit.CtxTimeout(t, 10*time.Second)
	// Another owner holds node 4: the RedLock holds nodes 0 to 3.
	if _, err := theirs[4].Mutex(name).Lock(ctx); err != nil {
		t.Fatal(err)
	}
	owner := relock.WithOwner(ctx)
	rl := relock.NewRedLock(name, ours)
	first, err := rl.Lock(owner)
	if err != nil {
		t.Fatal(err)
	}
	second, err := rl.TryLock(owner)
	if err != nil {
		t.Fatalf("re-entry: %v", err)
	}
	if _, err := rl.TryLock(relock.WithOwner(ctx)); !errors.Is(err, relock.ErrNotAcquired) {
		t.Fatalf("another owner's TryLock: %v, want ErrNotAcquired", err)
	}
	if _, err := rl.TryLock(ctx); !errors.Is(err, relock.ErrNotAcquired) {
		t.Fatalf("plain context TryLock: %v, want ErrNotAcquired", err)
	}
	for i := range 4 {
		if n := testkit.HoldCount(t, rdbs[i], name); n != 2 {
			t.Fatalf("node %d hold count %d, want 2", i, n)
		}
	}
	if err := second.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := first.Err(); err != nil {
		t.Fatalf("first lease after the second's Unlock: %v", err)
	}
	for i := range 4 {
		if n := testkit.HoldCount(t, rdbs[i], name); n != 1 {
			t.Fatalf("node %d hold count %d, want 1", i, n)
		}
	}
	if err := first.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	for i := range 4 {
		if testkit.Exists(t, rdbs[i], name) {
			t.Fatalf("node %d still locked", i)
		}
	}
}

// TestRedLockFixedLease: WithLease gives every node hold that lease, and
// the RedLock's lease ends when they expire.
func TestRedLockFixedLease(t *testing.T) {
	t.Parallel()
	ms := redistest.NewMasters(t, 3)
	ours := testkit.Nodes(t, ms)
	name := testkit.LockName(t)
	ctx := testkit.CtxTimeout(t, 10*time.Second)
	l, err := relock.NewRedLock(name, ours).Lock(ctx, relock.WithLease(300*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	testkit.WaitDone(t, l, 5*time.Second)
	if !errors.Is(l.Err(), relock.ErrLockLost) {
		t.Fatalf("Err() = %v, want ErrLockLost", l.Err())
	}
	testkit.Idle(t, ours...)
}

// TestRedLockHammerWithCancellation: RedLocks on two sets of Clients over
// the same five masters, some giving up at random points, never overlap
// and leave nothing behind on any node.
func TestRedLockHammerWithCancellation(t *testing.T) {
	t.Parallel()
	ms := redistest.NewMasters(t, 5)
	sets := [][]*relock.Client{testkit.Nodes(t, ms), testkit.Nodes(t, ms)}
	rdbs := testkit.Direct(t, ms)
	name := testkit.LockName(t)
	rec := history.New()
	ctx := testkit.CtxTimeout(t, time.Minute)
	var acquired, gaveUp atomic.Int64
	var wg sync.WaitGroup
	for i := range 6 {
		rl := relock.NewRedLock(name, sets[i%2])
		wg.Add(1)
		go func(seed int64) {
			defer wg.Done()
			rnd := rand.New(rand.NewSource(seed))
			for range 10 {
				wctx, cancel := testkit.GivingUp(ctx, seed%2 == 1, time.Duration(rnd.Intn(20000))*time.Microsecond)
				l, err := rl.Lock(wctx)
				cancel()
				if err != nil {
					if !errors.Is(err, context.DeadlineExceeded) {
						t.Error(err)
						return
					}
					gaveUp.Add(1)
					continue
				}
				acquired.Add(1)
				h := rec.Begin(fmt.Sprint(seed), name, 0)
				runtime.Gosched()
				h.End()
				if err := l.Unlock(ctx); err != nil {
					t.Error(err)
					return
				}
			}
		}(int64(i))
	}
	wg.Wait()
	if v := rec.Check(); len(v) > 0 {
		t.Fatalf("%d violations, first: %+v", len(v), v[0])
	}
	if acquired.Load() < 30 || gaveUp.Load() == 0 {
		t.Fatalf("acquired %d, gave up %d: the test exercised one path only", acquired.Load(), gaveUp.Load())
	}
	for i := range rdbs {
		if keys := testkit.KeysOf(t, rdbs[i], name); len(keys) > 0 {
			t.Fatalf("node %d: keys left behind: %v", i, keys)
		}
	}
	for _, set := range sets {
		testkit.Idle(t, set...)
	}
}

func TestRedLockBadInput(t *testing.T) {
	t.Parallel()
	ms := redistest.NewMasters(t, 3)
	cs := testkit.Nodes(t, ms)
	ctx := testkit.CtxTimeout(t, 10*time.Second)
	name := testkit.LockName(t)
	for _, tc := range []struct {
		what string
		rl   *relock.RedLock
		opts []relock.LockOption
		want error
	}{
		{"no clients", relock.NewRedLock(name, nil), nil, relock.ErrInvalidOption},
		{"nil client", relock.NewRedLock(name, []*relock.Client{cs[0], nil, cs[2]}), nil, relock.ErrInvalidOption},
		{"client twice", relock.NewRedLock(name, []*relock.Client{cs[0], cs[1], cs[0]}), nil, relock.ErrInvalidOption},
		{"empty name", relock.NewRedLock("", cs), nil, relock.ErrInvalidName},
		{"zero attempt timeout", relock.NewRedLock(name, cs, relock.WithAttemptTimeout(0)), nil, relock.ErrInvalidOption},
		{"zero lease", relock.NewRedLock(name, cs), []relock.LockOption{relock.WithLease(0)}, relock.ErrInvalidOption},
	} {
		t.Run(tc.what, func(t *testing.T) {
			if _, err := tc.rl.Lock(ctx, tc.opts...); !errors.Is(err, tc.want) {
				t.Fatalf("Lock: %v, want %v", err, tc.want)
			}
			if _, err := tc.rl.TryLock(ctx, tc.opts...); !errors.Is(err, tc.want) {
				t.Fatalf("TryLock: %v, want %v", err, tc.want)
			}
		})
	}
	closed := testkit.NewClient(t, testkit.CloseLater(t, ms[1].Client()))
	_ = closed.Close()
	if _, err := relock.NewRedLock(name, []*relock.Client{cs[0], closed, cs[2]}).TryLock(ctx); !errors.Is(err, relock.ErrClosed) {
		t.Fatalf("TryLock with a closed Client: %v, want ErrClosed", err)
	}
	if got := relock.NewRedLock(name, cs).Quorum(); got != 2 {
		t.Fatalf("Quorum() of 3 = %d, want 2", got)
	}
	for _, rdb := range testkit.Direct(t, ms) {
		if testkit.Exists(t, rdb, name) {
			t.Fatal("bad input left a key")
		}
	}
}
