package relock_test

import (
	"context"
	"testing"
	"time"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/testkit"
)

// TestLeaseDeadline: a hold's Deadline is the moment it is lost without a
// renewal: a fixed lease's lies within the lease, and the lease is lost
// (Done) not before it; a watchdog hold's moves later with each confirmed
// renewal.
func TestLeaseDeadline(t *testing.T) {
	top := testkit.Topologies()[0]
	c := top.NewClient(t, relock.WithWatchdogTimeout(300*time.Millisecond))
	ctx := context.Background()

	start := time.Now()
	fixed, err := c.Mutex(testkit.LockName(t)).Lock(ctx, relock.WithLease(200*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	end := time.Now()
	// The deadline counts the lease, less a margin for clock drift, from
	// when the lock call was sent: after start, before end.
	d := fixed.Deadline()
	if d.Before(start.Add(150*time.Millisecond)) || d.After(end.Add(200*time.Millisecond)) {
		t.Fatalf("fixed lease's deadline %v after its Lock began, which took %v; want within its 200ms lease of the call",
			d.Sub(start), end.Sub(start))
	}
	testkit.WaitDone(t, fixed, 10*time.Second)
	if time.Now().Before(d) {
		t.Fatalf("fixed lease lost %v before its deadline", time.Until(d))
	}

	renewed, err := c.Mutex(testkit.LockName(t)).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer renewed.Unlock(ctx)
	first := renewed.Deadline()
	testkit.Eventually(t, 10*time.Second, "a renewal to move the deadline", func() bool {
		return renewed.Deadline().After(first)
	})
	if err := renewed.Err(); err != nil {
		t.Fatalf("renewed lease: %v", err)
	}
}
