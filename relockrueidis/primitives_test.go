package relockrueidis

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/testkit"
)

// outcome is what a call made in the background returned.
type outcome[T any] struct {
	val T
	err error
}

// async runs f in the background; its outcome arrives on the channel.
func async[T any](f func() (T, error)) <-chan outcome[T] {
	ch := make(chan outcome[T], 1)
	go func() {
		v, err := f()
		ch <- outcome[T]{v, err}
	}()
	return ch
}

// await returns the outcome of a background call, failing the test when
// it fails or when ctx ends first.
func await[T any](t *testing.T, ctx context.Context, ch <-chan outcome[T], what string) T {
	t.Helper()
	select {
	case o := <-ch:
		if o.err != nil {
			t.Fatalf("%s: %v", what, o.err)
		}
		return o.val
	case <-ctx.Done():
		t.Fatalf("%s: still waiting", what)
	}
	var zero T
	return zero
}

// pending fails the test if the background call has returned already.
func pending[T any](t *testing.T, ch <-chan outcome[T], what string) {
	t.Helper()
	select {
	case o := <-ch:
		t.Fatalf("%s returned (%v) while it should wait", what, o.err)
	default:
	}
}

// TestPrimitives: on a standalone server and on a cluster, every
// primitive's waiting call is woken when another Client frees what it
// waits for: FairMutex, RWMutex (a writer after two readers), Semaphore,
// PermitSemaphore, CountDownLatch and Election.
func TestPrimitives(t *testing.T) {
	deployments := map[string]func() testkit.Deployment{
		"standalone": func() testkit.Deployment { return testkit.Deployment{Addr: testkit.Standalone.Addr} },
		"cluster":    func() testkit.Deployment { return testkit.Deployment{Addrs: testkit.Cluster.Addrs()} },
	}
	for top, d := range deployments {
		t.Run(top, func(t *testing.T) {
			t.Parallel()
			a, b := newLocks(t, d()), newLocks(t, d())
			ctx := testkit.CtxTimeout(t, 60*time.Second)

			t.Run("FairMutex", func(t *testing.T) {
				name := testkit.LockName(t)
				held, err := a.FairMutex(name).Lock(ctx)
				if err != nil {
					t.Fatal(err)
				}
				next := async(func() (*relock.Lease, error) { return b.FairMutex(name).Lock(ctx) })
				testkit.WaitQueued(t, testkit.CloseLater(t, rdbOf(top)), name, 1)
				pending(t, next, "the second Lock")
				if err := held.Unlock(ctx); err != nil {
					t.Fatal(err)
				}
				if err := await(t, ctx, next, "the second Lock").Unlock(ctx); err != nil {
					t.Fatal(err)
				}
			})

			t.Run("RWMutex", func(t *testing.T) {
				name := testkit.LockName(t)
				r1, err := a.RWMutex(name).RLock(ctx)
				if err != nil {
					t.Fatal(err)
				}
				r2, err := b.RWMutex(name).RLock(ctx)
				if err != nil {
					t.Fatal(err)
				}
				if _, err := a.RWMutex(name).TryLock(ctx); !errors.Is(err, relock.ErrNotAcquired) {
					t.Fatalf("TryLock with readers in: %v, want ErrNotAcquired", err)
				}
				w := async(func() (*relock.Lease, error) { return b.RWMutex(name).Lock(ctx) })
				if err := r1.Unlock(ctx); err != nil {
					t.Fatal(err)
				}
				pending(t, w, "the writer's Lock with a reader in")
				if err := r2.Unlock(ctx); err != nil {
					t.Fatal(err)
				}
				if err := await(t, ctx, w, "the writer's Lock").Unlock(ctx); err != nil {
					t.Fatal(err)
				}
			})

			t.Run("Semaphore", func(t *testing.T) {
				name := testkit.LockName(t)
				got := async(func() (struct{}, error) { return struct{}{}, b.Semaphore(name).Acquire(ctx, 2) })
				if err := a.Semaphore(name).Release(ctx, 1); err != nil {
					t.Fatal(err)
				}
				pending(t, got, "Acquire of 2 with 1 available")
				if err := a.Semaphore(name).Release(ctx, 1); err != nil {
					t.Fatal(err)
				}
				await(t, ctx, got, "Acquire of 2")
				if n, err := a.Semaphore(name).Available(ctx); err != nil || n != 0 {
					t.Fatalf("available after the acquisition: %d, %v; want 0", n, err)
				}
			})

			t.Run("PermitSemaphore", func(t *testing.T) {
				ps := testkit.NewPermits(t, a, 1)
				p, err := ps.Acquire(ctx)
				if err != nil {
					t.Fatal(err)
				}
				next := async(func() (*relock.Permit, error) { return b.PermitSemaphore(ps.Name()).Acquire(ctx) })
				if err := ps.Release(ctx, p.ID()); err != nil {
					t.Fatal(err)
				}
				q := await(t, ctx, next, "the second Acquire")
				if err := b.PermitSemaphore(ps.Name()).Release(ctx, q.ID()); err != nil {
					t.Fatal(err)
				}
			})

			t.Run("CountDownLatch", func(t *testing.T) {
				name := testkit.LockName(t)
				if ok, err := a.CountDownLatch(name).TrySetCount(ctx, 1); !ok || err != nil {
					t.Fatalf("TrySetCount: %v, %v", ok, err)
				}
				done := async(func() (struct{}, error) { return struct{}{}, b.CountDownLatch(name).Await(ctx) })
				if err := a.CountDownLatch(name).CountDown(ctx); err != nil {
					t.Fatal(err)
				}
				await(t, ctx, done, "Await")
			})

			t.Run("Election", func(t *testing.T) {
				name := testkit.LockName(t)
				lead, err := a.Election(name).Campaign(ctx, "a")
				if err != nil {
					t.Fatal(err)
				}
				if l, err := b.Election(name).Leader(ctx); err != nil || l.Value != "a" {
					t.Fatalf("leader %+v, %v; want a", l, err)
				}
				next := async(func() (*relock.Leadership, error) { return b.Election(name).Campaign(ctx, "b") })
				if err := lead.Resign(ctx); err != nil {
					t.Fatal(err)
				}
				nl := await(t, ctx, next, "the second Campaign")
				if nl.Term() <= lead.Term() {
					t.Fatalf("the next term %d is not above %d", nl.Term(), lead.Term())
				}
				if err := nl.Resign(ctx); err != nil {
					t.Fatal(err)
				}
			})
		})
	}
}

// rdbOf returns a go-redis client of the shared deployment top names, to
// look at the server's state.
func rdbOf(top string) redis.UniversalClient {
	if top == "cluster" {
		return testkit.Cluster.Client()
	}
	return testkit.Standalone.Client()
}
