package relock_test

import (
	"errors"
	"testing"
	"time"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/redistest"
)

// TestSentinel: the Mutex works through a Sentinel failover client, and
// after the master is killed and a replica promoted, locks work again.
func TestSentinel(t *testing.T) {
	t.Parallel()
	s := redistest.NewSentinel(t)
	c := newClient(t, closeLater(t, s.FailoverClient()), relock.WithWatchdogTimeout(time.Second))
	other := newClient(t, closeLater(t, s.FailoverClient()))
	name := lockName(t)
	ctx := ctxTimeout(t, 60*time.Second)

	l, err := c.Mutex(name).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := other.Mutex(name).TryLock(ctx); !errors.Is(err, relock.ErrNotAcquired) {
		t.Fatalf("TryLock of a held lock: %v", err)
	}
	if err := l.Unlock(ctx); err != nil {
		t.Fatal(err)
	}

	old, err := s.CurrentMaster(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := old.Kill(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.WaitForNewMaster(ctx, old); err != nil {
		t.Fatal(err)
	}
	// The failover client reconnects to the new master; the first calls
	// after the switch may fail while it does.
	var nl *relock.Lease
	eventually(t, 30*time.Second, "a lock on the new master", func() bool {
		nl, err = c.Mutex(name).TryLock(ctx)
		return err == nil
	})
	if err := nl.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}
