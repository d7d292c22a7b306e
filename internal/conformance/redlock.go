package conformance

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/internal/testkit"
)

// RedLockQuorum: with k of 5 nodes held by another owner, for every
// subset of nodes, a RedLock is acquired iff 5-k >= 3; it takes exactly
// the free nodes, leaves the others alone, and a failed attempt leaves
// nothing behind.
func RedLockQuorum(t *testing.T) {
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

// RedLockWaits: with three of five nodes held by another owner, every
// round of Lock takes the two free nodes and gives them back; a Lock that
// gives up leaves nothing on any node, and one that waits gets the lock
// once the other owner lets go.
func RedLockWaits(t *testing.T) {
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
