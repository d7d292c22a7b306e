package relock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/testkit"
)

// TestLeaseCheck: Check finds a force-unlocked hold gone at once, without
// waiting for the watchdog's renewal (30s away here), and leaves a hold
// still in place held.
func TestLeaseCheck(t *testing.T) {
	ctx := testkit.CtxTimeout(t, 10*time.Second)
	a := testkit.NewClient(t, testkit.CloseLater(t, testkit.Standalone.Client()))
	b := testkit.NewClient(t, testkit.CloseLater(t, testkit.Standalone.Client()))
	type kind struct {
		name  string
		lock  func(c *relock.Client, name string) (*relock.Lease, error)
		force func(c *relock.Client, name string) (bool, error)
	}
	for _, k := range []kind{
		{"Mutex",
			func(c *relock.Client, n string) (*relock.Lease, error) { return c.Mutex(n).Lock(ctx) },
			func(c *relock.Client, n string) (bool, error) { return c.Mutex(n).ForceUnlock(ctx) }},
		{"FairMutex",
			func(c *relock.Client, n string) (*relock.Lease, error) { return c.FairMutex(n).Lock(ctx) },
			func(c *relock.Client, n string) (bool, error) { return c.FairMutex(n).ForceUnlock(ctx) }},
		{"RWMutex write",
			func(c *relock.Client, n string) (*relock.Lease, error) { return c.RWMutex(n).Lock(ctx) },
			func(c *relock.Client, n string) (bool, error) { return c.RWMutex(n).ForceUnlock(ctx) }},
		{"RWMutex read",
			func(c *relock.Client, n string) (*relock.Lease, error) { return c.RWMutex(n).RLock(ctx) },
			func(c *relock.Client, n string) (bool, error) { return c.RWMutex(n).ForceUnlock(ctx) }},
		{"fixed lease",
			func(c *relock.Client, n string) (*relock.Lease, error) {
				return c.Mutex(n).Lock(ctx, relock.WithLease(time.Minute))
			},
			func(c *relock.Client, n string) (bool, error) { return c.Mutex(n).ForceUnlock(ctx) }},
	} {
		t.Run(k.name, func(t *testing.T) {
			name := testkit.LockName(t)
			l, err := k.lock(a, name)
			if err != nil {
				t.Fatal(err)
			}
			if err := l.Check(ctx); err != nil {
				t.Fatalf("Check of a held lease = %v, want nil", err)
			}
			if held, err := k.force(b, name); err != nil || !held {
				t.Fatalf("ForceUnlock = %v, %v", held, err)
			}
			if err := l.Check(ctx); !errors.Is(err, relock.ErrLockLost) {
				t.Fatalf("Check after a force-unlock = %v, want ErrLockLost", err)
			}
			select {
			case <-l.Done():
			default:
				t.Fatal("Done is open after Check found the hold gone")
			}
		})
	}

	l, err := a.Mutex(testkit.LockName(t)).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := l.Check(ctx); !errors.Is(err, relock.ErrReleased) {
		t.Fatalf("Check after Unlock = %v, want ErrReleased", err)
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	l, err = a.Mutex(testkit.LockName(t)).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Check(cancelled); !errors.Is(err, context.Canceled) || l.Err() != nil {
		t.Fatalf("Check with a cancelled ctx = %v (Err %v), want context.Canceled and the hold kept", err, l.Err())
	}
	if err := l.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestLeaseCheckAfterCompositeLoss: a MultiLock lease whose member was
// force-unlocked is lost; a Check after that, with a ctx that never ends,
// returns the loss at once, though the surviving member's hold is no
// longer watched (it expires with its lease) and never ends on its own.
func TestLeaseCheckAfterCompositeLoss(t *testing.T) {
	ctx := testkit.CtxTimeout(t, 10*time.Second)
	c := testkit.NewClient(t, testkit.CloseLater(t, testkit.Standalone.Client()))
	base := testkit.LockName(t)
	l, err := relock.Multi(c.Mutex(base+":a"), c.Mutex(base+":b")).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if held, err := c.Mutex(base + ":a").ForceUnlock(ctx); err != nil || !held {
		t.Fatalf("ForceUnlock = %v, %v", held, err)
	}
	if err := l.Check(ctx); !errors.Is(err, relock.ErrLockLost) {
		t.Fatalf("Check after a member's force unlock = %v, want ErrLockLost", err)
	}
	done := make(chan error, 1)
	go func() { done <- l.Check(context.Background()) }()
	select {
	case err := <-done:
		if !errors.Is(err, relock.ErrLockLost) {
			t.Fatalf("second Check = %v, want ErrLockLost", err)
		}
	case <-ctx.Done():
		t.Fatal("Check with a ctx that never ends did not return after the loss")
	}
	if _, err := c.Mutex(base + ":b").ForceUnlock(ctx); err != nil {
		t.Fatal(err)
	}
}
