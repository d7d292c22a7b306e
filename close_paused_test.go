package relock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/internal/testkit"
)

// TestCloseWithServerPaused: with the server stopped (SIGSTOP), Close
// ends the calls of its Client within the cleanup timeout, with
// ErrClosed: the Lock calls waiting for a held lock (Mutex and FairMutex),
// which leave its queue on the way out, and the TryLock calls in flight
// in the batcher's pipelines, whose replies will not come. Only a call
// sent on its own, the one in flight while no other was, waits for the
// Redis client's read timeout.
func TestCloseWithServerPaused(t *testing.T) {
	const cleanup = 500 * time.Millisecond
	ctx := context.Background()
	srv := redistest.Standalone(t)
	name := testkit.LockName(t)
	holder := testkit.NewClient(t, testkit.CloseLater(t, srv.Client()))
	if _, err := holder.FairMutex(name + "-fair").TryLock(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := holder.Mutex(name).TryLock(ctx); err != nil {
		t.Fatal(err)
	}
	// A read timeout far from the cleanup timeout tells the two apart.
	rdb := testkit.CloseLater(t, redis.NewClient(&redis.Options{Addr: srv.Addr, ReadTimeout: 8 * time.Second}))
	c, err := relock.New(rdb, relock.WithCleanupTimeout(cleanup))
	if err != nil {
		t.Fatal(err)
	}
	const waiters, inFlight = 10, 5
	errs := make(chan error, 2*waiters+inFlight)
	for range waiters {
		go func() { _, err := c.FairMutex(name + "-fair").Lock(ctx); errs <- err }()
		go func() { _, err := c.Mutex(name).Lock(ctx); errs <- err }()
	}
	testkit.WaitQueued(t, rdb, name+"-fair", waiters)
	testkit.Eventually(t, 5*time.Second, "every waiter asleep", func() bool { return c.Stats().Asleep == 2*waiters })
	if err := srv.Pause(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = srv.Resume() }()
	started := make(chan struct{}, inFlight)
	for i := range inFlight {
		go func() {
			started <- struct{}{}
			_, err := c.Mutex(name + string(rune('a'+i))).TryLock(ctx)
			errs <- err
		}()
	}
	for range inFlight {
		<-started
	}
	begun := time.Now()
	go func() { _ = c.Close() }()
	timeout := time.After(6 * cleanup) // generous: only so that a call held longer fails the test
	for range 2*waiters + inFlight - 1 {
		select {
		case err := <-errs:
			if !errors.Is(err, relock.ErrClosed) {
				t.Errorf("call cut short by Close = %v, want ErrClosed", err)
			}
		case <-timeout:
			t.Fatalf("calls still running %v after Close began", time.Since(begun))
		}
	}
	if err := srv.Resume(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-errs: // the call sent on its own, which the server answers now
	case <-time.After(tryBound):
		t.Fatalf("the call sent on its own still running %v after Close began", time.Since(begun))
	}
}
