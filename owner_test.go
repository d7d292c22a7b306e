package relock_test

import (
	"errors"
	"testing"
	"time"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/testkit"
)

// TestSharedOwnerLetsBothIn: the owner is the context's, not a
// goroutine's: two goroutines locking with one WithOwner context are both
// in the critical section at once, as WithOwner's doc says, while a call
// without that owner is kept out.
func TestSharedOwnerLetsBothIn(t *testing.T) {
	testkit.ForEach(t, func(t *testing.T, top testkit.Topology) {
		c := top.NewClient(t)
		m := c.Mutex(testkit.LockName(t))
		ctx := testkit.CtxTimeout(t, 10*time.Second)
		owner := relock.WithOwner(ctx)

		first, second := make(chan *relock.Lease, 1), make(chan *relock.Lease, 1)
		errs := make(chan error, 2)
		go func() {
			l, err := m.Lock(owner)
			if err != nil {
				errs <- err
				return
			}
			first <- l
		}()
		var a *relock.Lease
		select {
		case a = <-first:
		case err := <-errs:
			t.Fatal(err)
		}
		go func() {
			// Lock, not TryLock: it would block if the owner were the
			// goroutine's.
			l, err := m.Lock(owner)
			if err != nil {
				errs <- err
				return
			}
			second <- l
		}()
		var b *relock.Lease
		select {
		case b = <-second:
		case err := <-errs:
			t.Fatalf("the second goroutine with the same owner: %v", err)
		}
		if a.Err() != nil || b.Err() != nil {
			t.Fatalf("both should hold at once: %v, %v", a.Err(), b.Err())
		}
		if _, err := m.TryLock(ctx); !errors.Is(err, relock.ErrNotAcquired) {
			t.Fatalf("TryLock without the owner = %v, want ErrNotAcquired", err)
		}
		testkit.RWUnlockAll(t, ctx, a, b)
	})
}
