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
	"github.com/relock-go/relock/internal/history"
	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/internal/testkit"
)

// TestRedLockQuorum: with k of 5 nodes held by another owner, for every
// subset of nodes, a RedLock is acquired iff 5-k >= 3; it takes exactly
// the free nodes, leaves the others alone, and a failed attempt leaves
// nothing behind.
func TestRedLockQuorum(t *testing.T) {
	t.Parallel()
	ms := redistest.NewMasters(t, 5)
	ours, theirs, rdbs := testkit.Nodes(t, ms), testkit.Nodes(t, ms), testkit.Direct(t, ms)
	for subset := range 1 << 5 {
		t.Run(fmt.Sprintf("held=%05b", subset), func(t *testing.T) {
			t.Parallel()
			name := testkit.LockName(t)
			ctx := testkit.CtxTimeout(t, 10*time.Second)
			k := 0
			for i := range 5 {
				if subset>>i&1 == 1 {
					k++
					if _, err := theirs[i].Mutex(name).TryLock(ctx, relock.WithLease(time.Minute)); err != nil {
						t.Fatal(err)
					}
				}
			}
			rl := relock.NewRedLock(name, ours, relock.WithAttemptTimeout(5*time.Second))
			l, err := rl.TryLock(ctx)
			if 5-k < rl.Quorum() {
				if !errors.Is(err, relock.ErrNotAcquired) {
					t.Fatalf("TryLock with %d nodes held: %v, want ErrNotAcquired", k, err)
				}
			} else {
				if err != nil {
					t.Fatalf("TryLock with %d nodes held: %v", k, err)
				}
				tokens := l.Tokens()
				for i := range 5 {
					if held := subset>>i&1 == 1; held == (tokens[i] != 0) {
						t.Fatalf("node %d: pre-held %v, token %d", i, held, tokens[i])
					}
				}
				if l.Token() != 0 {
					t.Fatalf("Token() = %d, want 0", l.Token())
				}
				if err := l.Unlock(ctx); err != nil {
					t.Fatal(err)
				}
			}
			for i := range 5 {
				if held := subset>>i&1 == 1; testkit.Exists(t, rdbs[i], name) != held {
					t.Fatalf("node %d: pre-held %v, key exists %v", i, held, !held)
				}
			}
		})
	}
}

// TestRedLockWaits: with three of five nodes held by another owner, every
// round of Lock takes the two free nodes and gives them back; a Lock that
// gives up leaves nothing on any node, and one that waits gets the lock
// once the other owner lets go.
func TestRedLockWaits(t *testing.T) {
	t.Parallel()
	ms := redistest.NewMasters(t, 5)
	ours, theirs, rdbs := testkit.Nodes(t, ms), testkit.Nodes(t, ms), testkit.Direct(t, ms)
	name := testkit.LockName(t)
	ctx := testkit.CtxTimeout(t, 20*time.Second)
	var busy []*relock.Lease
	for i := range 3 {
		b, err := theirs[i].Mutex(name).Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		busy = append(busy, b)
	}
	rl := relock.NewRedLock(name, ours)
	short, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	if _, err := rl.Lock(short); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Lock while held: %v, want DeadlineExceeded", err)
	}
	for i := range 5 {
		want := 0
		if i < 3 {
			want = 1 // the other owner's
		}
		if n := testkit.HoldCount(t, rdbs[i], name); n != want {
			t.Fatalf("node %d: hold count %d after a cancelled Lock, want %d", i, n, want)
		}
	}
	testkit.Idle(t, ours...)

	got := make(chan error, 1)
	go func() {
		l, err := rl.Lock(ctx)
		if err == nil {
			err = l.Unlock(ctx)
		}
		got <- err
	}()
	for _, b := range busy {
		if err := b.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if err := <-got; err != nil {
		t.Fatal(err)
	}
	for i := range rdbs {
		if keys := testkit.KeysOf(t, rdbs[i], name); len(keys) > 0 {
			t.Fatalf("node %d: keys left behind: %v", i, keys)
		}
	}
	testkit.Idle(t, ours...)
}

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
