package relock_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/faultproxy"
	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/internal/testkit"
)

// TestNewTypedNil: a nil *redis.Client or *redis.ClusterClient in the
// interface is refused with ErrInvalidOption, not a panic.
func TestNewTypedNil(t *testing.T) {
	for _, rdb := range []redis.UniversalClient{(*redis.Client)(nil), (*redis.ClusterClient)(nil)} {
		c, err := relock.New(rdb)
		if !errors.Is(err, relock.ErrInvalidOption) {
			t.Errorf("New(%T(nil)): %v, want ErrInvalidOption", rdb, err)
		}
		if c != nil {
			t.Errorf("New(%T(nil)) returned a Client", rdb)
		}
	}
}

// TestMultiInvalidMemberNoIO: a MultiLock with an invalid member fails with
// ErrInvalidName at once, without waiting for or taking its valid members.
func TestMultiInvalidMemberNoIO(t *testing.T) {
	testkit.ForEach(t, func(t *testing.T, top testkit.Topology) {
		c := top.NewClient(t)
		other := top.NewClient(t)
		ctx := testkit.CtxTimeout(t, 10*time.Second)
		good := testkit.LockName(t)
		for _, bad := range []string{"{}", "", "x{y"} {
			// Free: nothing may be taken, so no fencing token moves.
			ml := relock.Multi(c.Mutex(good), c.Mutex(bad))
			if _, err := ml.TryLock(ctx); !errors.Is(err, relock.ErrInvalidName) {
				t.Fatalf("TryLock with member %q: %v, want ErrInvalidName", bad, err)
			}
			if _, err := ml.Lock(ctx); !errors.Is(err, relock.ErrInvalidName) {
				t.Fatalf("Lock with member %q: %v, want ErrInvalidName", bad, err)
			}
			if s := c.Stats(); s.Acquired != 0 || s.Waits != 0 {
				t.Fatalf("Multi with member %q did I/O: %+v", bad, s)
			}
		}
		// Held elsewhere: the call must not wait for the valid member.
		held, err := other.Mutex(good).Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer held.Unlock(ctx)
		nested := relock.Multi(c.Mutex(good), relock.Multi(c.Mutex(good+":2"), c.RWMutex("{}").WLocker()))
		short, cancel := context.WithTimeout(ctx, 3*time.Second)
		defer cancel()
		if _, err := nested.Lock(short); !errors.Is(err, relock.ErrInvalidName) {
			t.Fatalf("Lock with a nested invalid member: %v, want ErrInvalidName", err)
		}
		if short.Err() != nil {
			t.Fatal("Lock with an invalid member waited for a valid one")
		}
		if s := c.Stats(); s.Acquired != 0 || s.Waits != 0 {
			t.Fatalf("Multi with a nested invalid member did I/O: %+v", s)
		}
	})
}

// TestCallsAfterClose: after Close every call returns an error matching
// ErrClosed and sends nothing: holds stay in Redis until their lease ends,
// as Close's doc says, however many calls race.
func TestCallsAfterClose(t *testing.T) {
	testkit.ForEach(t, func(t *testing.T, top testkit.Topology) {
		c := top.NewClient(t)
		other := top.NewClient(t)
		ctx := testkit.CtxTimeout(t, 10*time.Second)
		name := testkit.LockName(t)
		var leases []*relock.Lease
		for i := range 20 {
			l, err := c.Mutex(name + ":" + string(rune('a'+i))).Lock(ctx)
			if err != nil {
				t.Fatal(err)
			}
			leases = append(leases, l)
		}
		ps := c.PermitSemaphore(name + ":permits")
		if _, err := ps.TrySetPermits(ctx, 2); err != nil {
			t.Fatal(err)
		}
		permit, err := ps.Acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		sem := c.Semaphore(name + ":sem")
		if _, err := sem.TrySetPermits(ctx, 2); err != nil {
			t.Fatal(err)
		}
		if err := sem.Acquire(ctx, 1); err != nil {
			t.Fatal(err)
		}
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
		// A lone Unlock, then 19 at once.
		if err := leases[0].Unlock(ctx); !errors.Is(err, relock.ErrClosed) {
			t.Errorf("lone Unlock after Close: %v, want ErrClosed", err)
		}
		var wg sync.WaitGroup
		errs := make([]error, len(leases))
		for i, l := range leases[1:] {
			wg.Add(1)
			go func() {
				defer wg.Done()
				errs[i+1] = l.Unlock(ctx)
			}()
		}
		wg.Wait()
		for i, err := range errs[1:] {
			if !errors.Is(err, relock.ErrClosed) {
				t.Errorf("concurrent Unlock %d after Close: %v, want ErrClosed", i+1, err)
			}
		}
		if err := permit.Release(ctx); !errors.Is(err, relock.ErrClosed) {
			t.Errorf("Permit.Release after Close: %v, want ErrClosed", err)
		}
		if err := sem.Release(ctx, 1); !errors.Is(err, relock.ErrClosed) {
			t.Errorf("Semaphore.Release after Close: %v, want ErrClosed", err)
		}
		for _, err := range []error{
			errOf(c.Mutex(name).Lock(ctx)),
			errOf(c.Mutex(name).IsLocked(ctx)),
			errOf(c.Mutex(name).ForceUnlock(ctx)),
			errOf(ps.Acquire(ctx)),
			errOf(sem.Available(ctx)),
			errOf(c.CountDownLatch(name+":latch").TrySetCount(ctx, 1)),
		} {
			if !errors.Is(err, relock.ErrClosed) || strings.Contains(err.Error(), "batch") {
				t.Errorf("call after Close: %v, want ErrClosed", err)
			}
		}
		// Nothing was released in Redis.
		for _, l := range leases {
			if locked, err := other.Mutex(l.Name()).IsLocked(ctx); err != nil || !locked {
				t.Errorf("%s after Close and Unlock: locked %v, %v; want still held until its lease ends", l.Name(), locked, err)
			}
		}
		if n, err := other.Semaphore(name + ":sem").Available(ctx); err != nil || n != 1 {
			t.Errorf("semaphore after Close and Release: %d available, %v; want 1", n, err)
		}
		for _, l := range leases {
			_, _ = other.Mutex(l.Name()).ForceUnlock(context.Background())
		}
	})
}

func errOf[T any](_ T, err error) error { return err }

// TestCtxEndsDuringFirstCall: calls whose ctx ends while the server does
// not answer (here the first calls of a Client, which probe the server)
// return errors that match the ctx's error, whatever go-redis reports.
func TestCtxEndsDuringFirstCall(t *testing.T) {
	proxy, err := faultproxy.New(testkit.Standalone.Addr)
	if err != nil {
		t.Fatal(err)
	}
	defer proxy.Close()
	rdb := testkit.CloseLater(t, redis.NewClient(&redis.Options{Addr: proxy.Addr(), ContextTimeoutEnabled: true}))
	c := testkit.NewClient(t, rdb, relock.WithCleanupTimeout(200*time.Millisecond))
	proxy.Stall()
	defer proxy.Resume()
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	name := testkit.LockName(t)
	errs := make([]error, 20)
	var wg sync.WaitGroup
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = c.Mutex(name).Lock(ctx)
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("Lock %d: %v, want an error matching context.DeadlineExceeded", i, err)
		}
	}
}

// TestCleanupBoundWhileServerStopped: with the server stopped (SIGSTOP),
// New and Close return within the cleanup timeout (plus scheduling
// slack), though go-redis would wait for its read timeout (10s here).
func TestCleanupBoundWhileServerStopped(t *testing.T) {
	srv := redistest.Standalone(t)
	rdb := testkit.CloseLater(t, redis.NewClient(&redis.Options{Addr: srv.Addr, ReadTimeout: 10 * time.Second, WriteTimeout: 10 * time.Second}))
	const cleanup = 300 * time.Millisecond
	const bound = cleanup + 700*time.Millisecond
	held, err := relock.New(rdb, relock.WithCleanupTimeout(cleanup))
	if err != nil {
		t.Fatal(err)
	}
	ctx := testkit.CtxTimeout(t, 10*time.Second)
	if _, err := held.Mutex(testkit.LockName(t)).Lock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := srv.Pause(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := srv.Resume(); err != nil {
			t.Error(err)
		}
	}()
	start := time.Now()
	made, err := relock.New(rdb, relock.WithCleanupTimeout(cleanup))
	if took := time.Since(start); took > bound {
		t.Errorf("New took %v with the server stopped, want at most %v", took, bound)
	}
	if err != nil {
		t.Fatalf("New with the server stopped: %v", err)
	}
	for name, c := range map[string]*relock.Client{"a Client holding a lock": held, "a Client made meanwhile": made} {
		start := time.Now()
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
		if took := time.Since(start); took > bound {
			t.Errorf("Close of %s took %v with the server stopped, want at most %v", name, took, bound)
		}
	}
}
