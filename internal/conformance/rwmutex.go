package conformance

import (
	"errors"
	"testing"
	"time"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/testkit"
)

// RWMutexReadersShare: readers of two clients hold together, a writer
// is excluded until the last of them leaves, and is woken by its release.
func RWMutexReadersShare(t *testing.T) {
	testkit.ForEach(t, func(t *testing.T, top testkit.Topology) {
		a, b, w := top.NewClient(t), top.NewClient(t), top.NewClient(t)
		name := testkit.LockName(t)
		ctx := testkit.CtxTimeout(t, 10*time.Second)
		must := testkit.RWMust(t)
		ra := must(a.RWMutex(name).RLock(ctx))
		rb := must(b.RWMutex(name).TryRLock(ctx))
		rc := must(b.RWMutex(name).RLock(ctx, relock.WithLease(time.Minute)))
		readers := max(ra.Token(), rb.Token(), rc.Token())
		if locked, err := w.RWMutex(name).IsLocked(ctx); err != nil || !locked {
			t.Fatalf("IsLocked = %v, %v", locked, err)
		}
		if _, err := w.RWMutex(name).TryLock(ctx); !errors.Is(err, relock.ErrNotAcquired) {
			t.Fatalf("writer TryLock over readers: %v", err)
		}
		got := make(chan *relock.Lease, 1)
		go func() {
			l, err := w.RWMutex(name).Lock(ctx)
			if err != nil {
				t.Error(err)
			}
			got <- l
		}()
		testkit.Eventually(t, 5*time.Second, "the writer to wait", func() bool {
			return w.Stats().Asleep == 1 && testkit.RWSubscribers(t, top, name) == 1
		})
		testkit.RWUnlockAll(t, ctx, ra, rb)
		select {
		case <-got:
			t.Fatal("writer acquired while a reader holds")
		default:
		}
		testkit.RWUnlockAll(t, ctx, rc)
		wl := <-got
		if wl == nil {
			t.FailNow()
		}
		// Woken by the last reader's release, or granted the lock by it
		// (without replica sync: TestRWGrants).
		if s := w.Stats(); s.Wakeups == 0 && s.Handoffs == 0 {
			t.Fatalf("writer not woken by the readers' release: %+v", s)
		}
		if wl.Token() <= readers {
			t.Fatalf("writer's token %d, want above the readers' %d", wl.Token(), readers)
		}
		testkit.RWUnlockAll(t, ctx, wl)
		if keys := testkit.KeysOf(t, top.RDB(t), name); len(keys) > 0 {
			t.Fatalf("keys left: %v", keys)
		}
	})
}

// RWMutexWriterExcludes: a writer excludes readers and writers of
// other owners; waiting readers are all woken by its release; readers
// carry the writer's token, the next writer a greater one.
func RWMutexWriterExcludes(t *testing.T) {
	testkit.ForEach(t, func(t *testing.T, top testkit.Topology) {
		c, other := top.NewClient(t), top.NewClient(t)
		name := testkit.LockName(t)
		ctx := testkit.CtxTimeout(t, 10*time.Second)
		wl := testkit.RWMust(t)(c.RWMutex(name).Lock(ctx))
		rw := other.RWMutex(name)
		if _, err := rw.TryRLock(ctx); !errors.Is(err, relock.ErrNotAcquired) {
			t.Fatalf("TryRLock over a writer: %v", err)
		}
		if _, err := rw.TryLock(relock.WithOwner(ctx)); !errors.Is(err, relock.ErrNotAcquired) {
			t.Fatalf("TryLock over a writer: %v", err)
		}
		if _, err := c.RWMutex(name).TryLock(ctx); !errors.Is(err, relock.ErrNotAcquired) {
			t.Fatalf("a second one-shot writer of the same client: %v", err)
		}
		const readers = 3
		got := make(chan *relock.Lease, readers)
		for i := 0; i < readers; i++ {
			go func() {
				l, err := rw.RLock(ctx)
				if err != nil {
					t.Error(err)
				}
				got <- l
			}()
		}
		testkit.Eventually(t, 5*time.Second, "the readers to wait", func() bool { return other.Stats().Asleep == readers })
		testkit.RWUnlockAll(t, ctx, wl)
		var rls []*relock.Lease
		var last uint64
		for i := 0; i < readers; i++ {
			l := <-got
			if l == nil {
				t.FailNow()
			}
			if l.Token() < wl.Token() {
				t.Fatalf("reader token %d, below the last writer's %d", l.Token(), wl.Token())
			}
			last = max(last, l.Token())
			rls = append(rls, l)
		}
		testkit.RWUnlockAll(t, ctx, rls...)
		next := testkit.RWMust(t)(rw.Lock(ctx))
		if next.Token() <= last {
			t.Fatalf("next writer's token %d after the readers' %d", next.Token(), last)
		}
		testkit.RWUnlockAll(t, ctx, next)
	})
}
