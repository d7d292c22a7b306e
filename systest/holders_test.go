package systest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/internal/testkit"
)

// TestHolderToldOfRestart: after a restart of a server without persistence
// a holder whose Client has a pub/sub connection (a call of it waits for
// another lock) hears at once that its lock is gone, as the waiters
// re-check at once: its Client's reconnect has the watchdog renew every
// hold. Its next periodic renewal is 40s after the Client was made, well
// past the bound.
func TestHolderToldOfRestart(t *testing.T) {
	srv := redistest.Standalone(t)
	a := testkit.Deployment{Addr: srv.Addr}.Open(t, relock.WithWatchdogTimeout(2*time.Minute))
	b := testkit.Deployment{Addr: srv.Addr}.Open(t)
	ctx := testkit.CtxTimeout(t, 60*time.Second)
	held, waited := testkit.LockName(t), testkit.LockName(t)
	l, err := a.Mutex(held).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Mutex(waited).Lock(ctx); err != nil {
		t.Fatal(err)
	}
	// The restart frees waited too: the waiting call takes it then.
	got := testkit.LockAsync(t, ctx, a.Mutex(waited).Lock)
	testkit.Eventually(t, 10*time.Second, "the waiter to sleep", func() bool { return a.Stats().Asleep == 1 })

	if err := srv.Restart(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-l.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the holder was not told of the restart; it would hear at its next renewal, 40s after its Client was made")
	}
	if !errors.Is(l.Err(), relock.ErrLockLost) {
		t.Fatalf("Err = %v, want ErrLockLost", l.Err())
	}
	if w := <-got; w != nil {
		_ = w.Unlock(context.Background())
	}
}
