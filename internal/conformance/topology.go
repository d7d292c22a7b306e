package conformance

import (
	"errors"
	"testing"
	"time"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/layout"
	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/internal/testkit"
)

// Sentinel: the Mutex works through a Sentinel failover client, and
// after the master is killed and a replica promoted, locks work again.
func Sentinel(t *testing.T) {
	t.Parallel()
	s := redistest.NewSentinel(t)
	d := testkit.Deployment{MasterName: s.MasterName, Sentinels: s.SentinelAddrs()}
	c := d.Open(t, relock.WithWatchdogTimeout(time.Second))
	other := d.Open(t)
	name := testkit.LockName(t)
	ctx := testkit.CtxTimeout(t, 60*time.Second)

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

	// A latch name with its own hash tag uses Redisson's channel, braces
	// around the whole name, where Redisson runs: a Redisson awaiter hears
	// relock's messages.
	latch := "{" + name + "}:done"
	ps := testkit.CloseLater(t, s.FailoverClient()).Subscribe(ctx, layout.LatchChannel(latch, false))
	defer ps.Close()
	if _, err := ps.Receive(ctx); err != nil {
		t.Fatal(err)
	}
	if ok, err := c.CountDownLatch(latch).TrySetCount(ctx, 1); !ok || err != nil {
		t.Fatal(ok, err)
	}
	if err := other.CountDownLatch(latch).CountDown(ctx); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"1", "0"} {
		if msg, err := ps.ReceiveMessage(ctx); err != nil || msg.Payload != want {
			t.Fatalf("Redisson's channel carried %v, %v; want %q", msg, err, want)
		}
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
	testkit.Eventually(t, 30*time.Second, "a lock on the new master", func() bool {
		nl, err = c.Mutex(name).TryLock(ctx)
		return err == nil
	})
	if err := nl.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}
