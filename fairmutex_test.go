package relock_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/conformance"
	"github.com/relock-go/relock/internal/layout"
	"github.com/relock-go/relock/internal/testkit"
)

func TestFairMutexOrder(t *testing.T) { conformance.FairMutexOrder(t) }

// TestFairMutexCancelInQueue: waiters that give up in the middle of the
// queue (cancelled, or past their deadline) leave it before Lock returns,
// and the others keep their order.
func TestFairMutexCancelInQueue(t *testing.T) {
	testkit.ForEach(t, func(t *testing.T, top testkit.Topology) {
		rdb := top.RDB(t)
		a, b := top.NewClient(t), top.NewClient(t)
		name := testkit.LockName(t)
		ctx := testkit.CtxTimeout(t, 30*time.Second)
		holder, err := a.FairMutex(name).Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		const waiters = 8
		cancels := make([]context.CancelFunc, waiters)
		errs := make([]chan error, waiters)
		var mu sync.Mutex
		var order []int
		for i := 0; i < waiters; i++ {
			wctx, cancel := context.WithCancel(ctx)
			if i == 5 {
				wctx, cancel = context.WithTimeout(ctx, 300*time.Millisecond)
			}
			cancels[i], errs[i] = cancel, make(chan error, 1)
			m := []*relock.Client{a, b}[i%2].FairMutex(name)
			go func() {
				l, err := m.Lock(wctx)
				if err == nil {
					mu.Lock()
					order = append(order, i)
					mu.Unlock()
					err = l.Unlock(ctx)
				}
				errs[i] <- err
			}()
			testkit.WaitQueued(t, rdb, name, i+1)
		}
		q := testkit.Queued(t, rdb, name)
		cancels[2]()
		if err := <-errs[2]; !errors.Is(err, context.Canceled) {
			t.Fatalf("cancelled waiter: %v", err)
		}
		if got := testkit.Queued(t, rdb, name); len(got) != waiters-1 || testkit.Contains(got, q[2]) {
			t.Fatalf("queue %v after waiter 2 of %v left", got, q)
		}
		if err := <-errs[5]; !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("timed-out waiter: %v", err)
		}
		if got := testkit.Queued(t, rdb, name); len(got) != waiters-2 || testkit.Contains(got, q[5]) {
			t.Fatalf("queue %v after waiter 5 of %v left", got, q)
		}
		if err := holder.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		for i := 0; i < waiters; i++ {
			if i != 2 && i != 5 {
				if err := <-errs[i]; err != nil {
					t.Fatal(err)
				}
			}
			cancels[i]()
		}
		if fmt.Sprint(order) != "[0 1 3 4 6 7]" {
			t.Fatalf("acquisition order %v, want [0 1 3 4 6 7]", order)
		}
		for _, c := range []*relock.Client{a, b} {
			if s := c.Stats(); s.Held != 0 || s.Asleep != 0 || s.Channels != 0 {
				t.Fatalf("state left behind: %+v", s)
			}
		}
		testkit.NoKeysLeft(t, rdb, name)
	})
}

func TestFairMutexHammer(t *testing.T) { conformance.FairMutexHammer(t) }

func TestFairMutexReentrancy(t *testing.T) {
	testkit.ForEach(t, func(t *testing.T, top testkit.Topology) {
		rdb := top.RDB(t)
		c, other := top.NewClient(t), top.NewClient(t)
		name := testkit.LockName(t)
		m := c.FairMutex(name)
		ctx := testkit.CtxTimeout(t, 10*time.Second)
		owner := relock.WithOwner(ctx)
		first, err := m.Lock(owner)
		if err != nil {
			t.Fatal(err)
		}
		got := make(chan *relock.Lease, 1)
		go func() {
			l, err := other.FairMutex(name).Lock(ctx)
			if err != nil {
				t.Error(err)
			}
			got <- l
		}()
		testkit.WaitQueued(t, rdb, name, 1)
		// Re-entry does not wait behind the queue.
		second, err := m.TryLock(owner)
		if err != nil {
			t.Fatalf("re-entry past a queue: %v", err)
		}
		third, err := m.Lock(owner)
		if err != nil {
			t.Fatal(err)
		}
		if second.Token() != first.Token() || third.Token() != first.Token() {
			t.Fatalf("re-entry tokens %d, %d; holder's %d", second.Token(), third.Token(), first.Token())
		}
		if n := testkit.HoldCount(t, rdb, name); n != 3 {
			t.Fatalf("hold count %d, want 3", n)
		}
		if _, err := m.TryLock(ctx); !errors.Is(err, relock.ErrNotAcquired) {
			t.Fatalf("plain context TryLock: %v", err)
		}
		if _, err := m.TryLock(relock.WithOwner(ctx)); !errors.Is(err, relock.ErrNotAcquired) {
			t.Fatalf("other owner TryLock: %v", err)
		}
		for _, l := range []*relock.Lease{third, second} {
			if err := l.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
		}
		if err := second.Unlock(ctx); !errors.Is(err, relock.ErrNotHeld) {
			t.Fatalf("second Unlock of a lease: %v", err)
		}
		if n := testkit.HoldCount(t, rdb, name); n != 1 {
			t.Fatalf("hold count %d, want 1", n)
		}
		if q := testkit.Queued(t, rdb, name); len(q) != 1 {
			t.Fatalf("queue %v while a hold remains", q)
		}
		if err := first.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		l := <-got
		if l == nil {
			t.FailNow()
		}
		if l.Token() <= first.Token() {
			t.Fatalf("token %d after %d", l.Token(), first.Token())
		}
		if err := l.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		testkit.NoKeysLeft(t, rdb, name)
	})
}

func TestFairMutexBadInput(t *testing.T) {
	testkit.ForEach(t, func(t *testing.T, top testkit.Topology) {
		rdb := top.RDB(t)
		c := top.NewClient(t)
		ctx := testkit.CtxTimeout(t, 10*time.Second)
		for _, name := range []string{"", string(make([]byte, relock.MaxNameLen+1)), "a}b", "a{}b", "a{b"} {
			m := c.FairMutex(name)
			if _, err := m.Lock(ctx); !errors.Is(err, relock.ErrInvalidName) {
				t.Fatalf("Lock(%.10q): %v", name, err)
			}
			if _, err := m.TryLock(ctx); !errors.Is(err, relock.ErrInvalidName) {
				t.Fatalf("TryLock(%.10q): %v", name, err)
			}
			if _, err := m.IsLocked(ctx); !errors.Is(err, relock.ErrInvalidName) {
				t.Fatalf("IsLocked(%.10q): %v", name, err)
			}
			if _, err := m.TTL(ctx); !errors.Is(err, relock.ErrInvalidName) {
				t.Fatalf("TTL(%.10q): %v", name, err)
			}
			if _, err := m.ForceUnlock(ctx); !errors.Is(err, relock.ErrInvalidName) {
				t.Fatalf("ForceUnlock(%.10q): %v", name, err)
			}
		}
		// The limit is MaxNameLen bytes exactly, and the error names the
		// length given.
		name := testkit.LockName(t)
		name += strings.Repeat("n", relock.MaxNameLen-len(name))
		l, err := c.FairMutex(name).TryLock(ctx)
		if err != nil {
			t.Fatalf("TryLock with a name of %d bytes: %v", len(name), err)
		}
		if err := l.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		if _, err := c.FairMutex(name + "n").TryLock(ctx); !errors.Is(err, relock.ErrInvalidName) || !strings.Contains(err.Error(), fmt.Sprintf(" %d bytes", relock.MaxNameLen+1)) {
			t.Fatalf("TryLock with a name of %d bytes: %v; want ErrInvalidName naming its length", relock.MaxNameLen+1, err)
		}
		name = testkit.LockName(t)
		for _, d := range []time.Duration{0, -time.Second, time.Millisecond} {
			if _, err := c.FairMutex(name, relock.WithWaiterTimeout(d)).Lock(ctx); !errors.Is(err, relock.ErrInvalidOption) {
				t.Fatalf("WithWaiterTimeout(%v): %v", d, err)
			}
		}
		if _, err := c.FairMutex(name).Lock(ctx, relock.WithLease(0)); !errors.Is(err, relock.ErrInvalidOption) {
			t.Fatalf("WithLease(0): %v", err)
		}
		if _, err := c.FairMutex(name).Lock(ctx, relock.WithSpin(0, 0)); !errors.Is(err, relock.ErrInvalidOption) {
			t.Fatalf("WithSpin(0, 0): %v", err)
		}
		// Keys of another type.
		for _, key := range []string{name, testkit.FairQueueKey(name)} {
			if err := rdb.Set(ctx, key, "x", 0).Err(); err != nil {
				t.Fatal(err)
			}
			if _, err := c.FairMutex(name).TryLock(ctx); !errors.Is(err, relock.ErrWrongType) {
				t.Fatalf("TryLock with %s a string: %v", key, err)
			}
			if _, err := c.FairMutex(name).Lock(ctx); !errors.Is(err, relock.ErrWrongType) {
				t.Fatalf("Lock with %s a string: %v", key, err)
			}
			rdb.Del(ctx, key)
		}
		rdb.Set(ctx, name, "x", 0)
		if _, err := c.FairMutex(name).ForceUnlock(ctx); !errors.Is(err, relock.ErrWrongType) {
			t.Fatalf("ForceUnlock of a string: %v", err)
		}
		rdb.Del(ctx, name)
		testkit.NoKeysLeft(t, rdb, name)
		// A closed client.
		closed := top.NewClient(t)
		_ = closed.Close()
		if _, err := closed.FairMutex(name).Lock(ctx); !errors.Is(err, relock.ErrClosed) {
			t.Fatalf("Lock on a closed client: %v", err)
		}
	})
}

// TestFairMutexTryLockRespectsQueue: TryLock never goes past a live
// waiter, even while the lock is free, and Lock queues behind it; once the
// waiter's deadline passes it is skipped.
func TestFairMutexTryLockRespectsQueue(t *testing.T) {
	testkit.ForEach(t, func(t *testing.T, top testkit.Topology) {
		rdb := top.RDB(t)
		c := top.NewClient(t)
		name := testkit.LockName(t)
		m := c.FairMutex(name, relock.WithWaiterTimeout(300*time.Millisecond))
		ctx := testkit.CtxTimeout(t, 10*time.Second)
		// A waiter of another process, queued while the lock is free: its
		// deadline is 500ms away on the server's clock.
		now, err := rdb.Time(ctx).Result()
		if err != nil {
			t.Fatal(err)
		}
		ghost := "00000000-0000-4000-8000-000000000000:1"
		rdb.ZAdd(ctx, testkit.FairTimeoutKey(name), redis.Z{Score: float64(now.UnixMilli() + 500), Member: ghost})
		rdb.RPush(ctx, testkit.FairQueueKey(name), ghost)
		if _, err := m.TryLock(ctx); !errors.Is(err, relock.ErrNotAcquired) {
			t.Fatalf("TryLock past a live waiter: %v", err)
		}
		if q := testkit.Queued(t, rdb, name); len(q) != 1 {
			t.Fatalf("TryLock joined the queue: %v", q)
		}
		l, err := m.Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if q := testkit.Queued(t, rdb, name); len(q) != 0 {
			t.Fatalf("queue %v after the dead waiter was skipped", q)
		}
		if err := l.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		testkit.NoKeysLeft(t, rdb, name)
	})
}

// TestFairMutexFixedLease: a WithLease hold expires and the first waiter,
// told by nobody, takes the lock when the holder's TTL runs out.
func TestFairMutexFixedLease(t *testing.T) {
	testkit.ForEach(t, func(t *testing.T, top testkit.Topology) {
		a, b := top.NewClient(t), top.NewClient(t)
		name := testkit.LockName(t)
		ctx := testkit.CtxTimeout(t, 10*time.Second)
		stale, err := a.FairMutex(name).Lock(ctx, relock.WithLease(150*time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		next, err := b.FairMutex(name).Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if !errors.Is(stale.Err(), relock.ErrLockLost) {
			t.Fatalf("expired lease Err = %v", stale.Err())
		}
		if next.Token() <= stale.Token() {
			t.Fatalf("token %d after %d", next.Token(), stale.Token())
		}
		if err := stale.Unlock(ctx); !errors.Is(err, relock.ErrNotHeld) {
			t.Fatalf("stale Unlock: %v", err)
		}
		if ttl, err := b.FairMutex(name).TTL(ctx); err != nil || ttl <= 0 {
			t.Fatalf("TTL %v, %v", ttl, err)
		}
		if err := next.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		if locked, err := b.FairMutex(name).IsLocked(ctx); err != nil || locked {
			t.Fatalf("IsLocked after Unlock: %v, %v", locked, err)
		}
		testkit.NoKeysLeft(t, top.RDB(t), name)
	})
}

// TestFairMutexSpin: waiters that poll (WithSpin) keep the order too.
func TestFairMutexSpin(t *testing.T) {
	testkit.ForEach(t, func(t *testing.T, top testkit.Topology) {
		rdb := top.RDB(t)
		c := top.NewClient(t)
		name := testkit.LockName(t)
		ctx := testkit.CtxTimeout(t, 20*time.Second)
		holder, err := c.FairMutex(name).Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		const waiters = 5
		done := make(chan int, waiters)
		var wg sync.WaitGroup
		for i := 0; i < waiters; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				l, err := c.FairMutex(name).Lock(ctx, relock.WithSpin(time.Millisecond, 20*time.Millisecond))
				if err != nil {
					t.Error(err)
					done <- -1
					return
				}
				done <- i
				if err := l.Unlock(ctx); err != nil {
					t.Error(err)
				}
			}()
			testkit.WaitQueued(t, rdb, name, i+1)
		}
		if s := c.Stats(); s.Channels != 0 {
			t.Fatalf("spinning waiters subscribed: %+v", s)
		}
		if err := holder.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		for i := 0; i < waiters; i++ {
			if got := <-done; got != i {
				t.Fatalf("waiter %d acquired as %d", got, i)
			}
		}
		wg.Wait()
		testkit.NoKeysLeft(t, rdb, name)
	})
}

// TestFairMutexHeartbeat: waiters queued for several waiter timeouts keep
// their places by refreshing them.
func TestFairMutexHeartbeat(t *testing.T) {
	testkit.ForEach(t, func(t *testing.T, top testkit.Topology) {
		const timeout = 150 * time.Millisecond
		rdb := top.RDB(t)
		a, b := top.NewClient(t), top.NewClient(t)
		name := testkit.LockName(t)
		ctx := testkit.CtxTimeout(t, 10*time.Second)
		holder, err := a.FairMutex(name).Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		const waiters = 3
		done := make(chan int, waiters)
		var wg sync.WaitGroup
		for i := 0; i < waiters; i++ {
			m := []*relock.Client{a, b}[i%2].FairMutex(name, relock.WithWaiterTimeout(timeout))
			wg.Add(1)
			go func() {
				defer wg.Done()
				l, err := m.Lock(ctx)
				if err != nil {
					t.Error(err)
					done <- -1
					return
				}
				done <- i
				if err := l.Unlock(ctx); err != nil {
					t.Error(err)
				}
			}()
			testkit.WaitQueued(t, rdb, name, i+1)
		}
		q := testkit.Queued(t, rdb, name)
		time.Sleep(4 * timeout) // the passing of time is what is tested
		if got := testkit.Queued(t, rdb, name); fmt.Sprint(got) != fmt.Sprint(q) {
			t.Fatalf("queue %v after %v, was %v", got, 4*timeout, q)
		}
		if err := holder.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		for i := 0; i < waiters; i++ {
			if got := <-done; got != i {
				t.Fatalf("waiter %d acquired as %d", got, i)
			}
		}
		wg.Wait()
		testkit.NoKeysLeft(t, rdb, name)
	})
}

// TestFairMutexDeadWaiterWhileIdle: a waiter cut off from Redis, as one
// whose process was killed, holds up the queue for its waiter timeout at
// most, however long nobody calls on the lock meanwhile: after a long
// quiet the release skips it, and a new caller is served at once.
func TestFairMutexDeadWaiterWhileIdle(t *testing.T) {
	testkit.ForEach(t, func(t *testing.T, top testkit.Topology) {
		const timeout = 100 * time.Millisecond
		rdb := top.RDB(t)
		a, b := top.NewClient(t), top.NewClient(t)
		cut := &cutOff{}
		drdb := top.RDB(t)
		drdb.AddHook(cut)
		d := testkit.NewClient(t, drdb, relock.WithoutReplicaSync())
		name := testkit.LockName(t)
		ctx := testkit.CtxTimeout(t, 20*time.Second)
		holder, err := a.FairMutex(name).Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		dctx, dcancel := context.WithCancel(ctx)
		dead := make(chan struct{})
		go func() {
			defer close(dead)
			_, _ = d.FairMutex(name, relock.WithWaiterTimeout(timeout)).Lock(dctx)
		}()
		defer func() { dcancel(); <-dead }()
		testkit.WaitQueued(t, rdb, name, 1)
		cut.on.Store(true)
		time.Sleep(20 * timeout) // the quiet is what is tested
		if err := holder.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		// The dead waiter's score is over five minutes away: a bound of
		// seconds tells whether it was skipped by its waiter timeout.
		bctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		l, err := b.FairMutex(name).Lock(bctx)
		if err != nil {
			t.Fatalf("Lock behind a waiter dead for %v: %v (queue %v)", 20*timeout, err, testkit.Queued(t, rdb, name))
		}
		if err := l.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		testkit.NoKeysLeft(t, rdb, name)
	})
}

// cutOff is a go-redis hook that, once on, fails every command without
// sending it, as for a process cut off from Redis.
type cutOff struct{ on atomic.Bool }

var errCutOff = errors.New("cut off by the test")

func (c *cutOff) DialHook(next redis.DialHook) redis.DialHook { return next }
func (c *cutOff) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if c.on.Load() {
			cmd.SetErr(errCutOff)
			return errCutOff
		}
		return next(ctx, cmd)
	}
}
func (c *cutOff) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if c.on.Load() {
			for _, cmd := range cmds {
				cmd.SetErr(errCutOff)
			}
			return errCutOff
		}
		return next(ctx, cmds)
	}
}

// TestFairMutexGrants: a FairMutex release grants the lock to the head of
// the queue when it is a relock call of another Client, pushed on that
// Client's grant channel, which the head confirms to its lease; the order is the
// queue's. A head that died after it was granted costs the next one the
// short grant and a heartbeat at most.
func TestFairMutexGrants(t *testing.T) {
	testkit.ForEach(t, func(t *testing.T, top testkit.Topology) {
		ctx := testkit.CtxTimeout(t, 30*time.Second)
		rdb := top.RDB(t)
		newClient := func() *relock.Client { return top.NewClient(t, relock.WithoutReplicaSync()) }
		lockFor := func(c *relock.Client, name string) <-chan *relock.Lease {
			return testkit.LockAsync(t, ctx, c.FairMutex(name).Lock)
		}
		queued := func(name string, n int64) {
			t.Helper()
			testkit.Eventually(t, 5*time.Second, "the waiters to queue", func() bool {
				return rdb.LLen(ctx, layout.Companion(layout.FairQueue, name)).Val() == n
			})
		}

		t.Run("in-order", func(t *testing.T) {
			h, a, b := newClient(), newClient(), newClient()
			name := testkit.LockName(t)
			holder, err := h.FairMutex(name).Lock(ctx)
			if err != nil {
				t.Fatal(err)
			}
			gotA := lockFor(a, name)
			queued(name, 1)
			testkit.Eventually(t, 5*time.Second, "the first waiter to sleep", func() bool { return a.Stats().Asleep == 1 })
			gotB := lockFor(b, name)
			queued(name, 2)
			if err := holder.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
			la := <-gotA
			if la == nil {
				t.FailNow()
			}
			if s := a.Stats(); s.Handoffs != 1 || s.Wakeups != 0 {
				t.Errorf("head: %d grants, %d wake-ups; want the grant pushed", s.Handoffs, s.Wakeups)
			}
			if la.Token() != holder.Token()+1 {
				t.Errorf("granted token %d after %d", la.Token(), holder.Token())
			}
			testkit.Eventually(t, 5*time.Second, "the grant to be confirmed", func() bool {
				return rdb.PTTL(ctx, name).Val() > 3*time.Second
			})
			if err := la.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
			lb := <-gotB
			if lb == nil {
				t.FailNow()
			}
			if lb.Token() != la.Token()+1 {
				t.Errorf("granted token %d after %d", lb.Token(), la.Token())
			}
			if err := lb.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
			testkit.NoKeysLeft(t, rdb, name)
		})

		t.Run("one-subscription", func(t *testing.T) {
			// A Client's waiting calls listen on its grant channel, one
			// subscription for all: the first call attempts once more
			// when it is confirmed; a call that comes while another
			// waits finds it confirmed already, and sleeps after its one
			// attempt. Neither subscribes to a channel of its own.
			a, attempts := top.CountingClient(t, "fair_lock", relock.WithoutReplicaSync())
			h := newClient()
			name := testkit.LockName(t)
			holder, err := h.FairMutex(name).Lock(ctx)
			if err != nil {
				t.Fatal(err)
			}
			got1 := lockFor(a, name)
			queued(name, 1)
			testkit.Eventually(t, 5*time.Second, "the first waiter to sleep", func() bool { return a.Stats().Asleep == 1 })
			if n := attempts.N.Load(); n != 2 {
				t.Fatalf("the first waiter attempted %d times, want 2", n)
			}
			got2 := lockFor(a, name)
			queued(name, 2)
			testkit.Eventually(t, 5*time.Second, "the second waiter to sleep", func() bool { return a.Stats().Asleep == 2 })
			if n := attempts.N.Load(); n != 3 {
				t.Errorf("the second waiter attempted %d times, want 1", n-2)
			}
			if s := a.Stats(); s.Channels != 1 {
				t.Errorf("%d channels subscribed by two waiting calls, want 1 (the grant channel)", s.Channels)
			}
			ls := takeInTurn(t, ctx, holder, got1, got2)
			if ls[0].Token() != holder.Token()+1 || ls[1].Token() != ls[0].Token()+1 {
				t.Errorf("tokens %d, %d after %d: want the queue's order", ls[0].Token(), ls[1].Token(), holder.Token())
			}
			testkit.NoKeysLeft(t, rdb, name)
			if s := a.Stats(); s.Channels != 0 {
				t.Errorf("%d channels still subscribed", s.Channels)
			}
		})

		t.Run("stale-grant-refused", func(t *testing.T) {
			// A grant that ran out before it reached its waiter is not
			// taken, however recently the waiter refreshed its entry: its
			// age counts from when the entry was made.
			h := newClient()
			a := top.NewClient(t, relock.WithoutReplicaSync())
			name := testkit.LockName(t)
			holder, err := h.FairMutex(name).Lock(ctx)
			if err != nil {
				t.Fatal(err)
			}
			m := a.FairMutex(name, relock.WithWaiterTimeout(600*time.Millisecond))
			got := testkit.LockAsync(t, ctx, m.Lock)
			queued(name, 1)
			owner := rdb.LIndex(ctx, layout.Companion(layout.FairQueue, name), 0).Val()
			alive := layout.Companion(layout.FairAlive, name)
			first := rdb.HGet(ctx, alive, owner).Val()
			// Wait for heartbeats to refresh the entry.
			testkit.Eventually(t, 5*time.Second, "the entry to be refreshed", func() bool {
				v := rdb.HGet(ctx, alive, owner).Val()
				return v != "" && v != first
			})
			// A grant made as the entry was made, for 1ms: run out since
			// (a heartbeat came a third of the waiter timeout later).
			const fake = 1 << 40
			channel := grantChannelOf(top, name, owner)
			msg := fmt.Sprintf("fg:%d:1:0:%s", int64(fake), owner)
			if n, err := rdb.Do(ctx, javaPublish(top), channel, msg).Int64(); err != nil || n != 1 {
				t.Errorf("the grant reached %d subscribers (%v), want 1", n, err)
			}
			if err := holder.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
			la := <-got
			if la == nil {
				t.FailNow()
			}
			if la.Token() == fake || la.Token() != holder.Token()+1 {
				t.Errorf("token %d after %d: the stale grant was taken", la.Token(), holder.Token())
			}
			if err := la.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
			testkit.NoKeysLeft(t, rdb, name)
		})

		t.Run("dead-grantee", func(t *testing.T) {
			h, a := newClient(), newClient()
			name := testkit.LockName(t)
			holder, err := h.FairMutex(name).Lock(ctx)
			if err != nil {
				t.Fatal(err)
			}
			// A relock waiter of a Client that has died is first in the
			// queue, alive for a minute yet, and takes grants.
			dead := "0dead:1"
			now := rdb.Time(ctx).Val().UnixMilli()
			if _, err := rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
				p.RPush(ctx, layout.Companion(layout.FairQueue, name), dead)
				p.ZAdd(ctx, layout.Companion(layout.FairTimeout, name), redis.Z{Score: float64(now + 400000), Member: dead})
				p.HSet(ctx, layout.Companion(layout.FairAlive, name), dead, formatAlive(now+60000, 30000, now))
				p.PExpire(ctx, layout.Companion(layout.FairAlive, name), time.Minute)
				return nil
			}); err != nil {
				t.Fatal(err)
			}
			got := lockFor(a, name)
			queued(name, 2)
			if err := holder.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
			la := <-got
			if la == nil {
				t.FailNow()
			}
			if la.Token() != holder.Token()+2 {
				t.Errorf("token %d after %d: want the dead waiter's grant between", la.Token(), holder.Token())
			}
			if err := la.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
			testkit.NoKeysLeft(t, rdb, name)
		})
	})
}

// takeInTurn unlocks holder, then takes each lease of gots in turn and
// unlocks it, and returns them.
func takeInTurn(t *testing.T, ctx context.Context, holder *relock.Lease, gots ...<-chan *relock.Lease) []*relock.Lease {
	t.Helper()
	if err := holder.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	var ls []*relock.Lease
	for _, got := range gots {
		l := <-got
		if l == nil {
			t.FailNow()
		}
		if err := l.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		ls = append(ls, l)
	}
	return ls
}

// formatAlive is a relock fair waiter's liveness entry.
func formatAlive(deadline, lease, joined int64) string {
	return fmt.Sprintf("%d:%d:%d", deadline, lease, joined)
}

// javaFair acts on a fair lock name the way Redisson's RFairLock does,
// written for these tests from Redisson's source: the RLock hash, the
// queue list and the timeout zset scored with the client's clock. Every
// call first drops the queue's head while its score has passed (and
// changes no other score). A free lock goes to a caller when the queue is
// empty or starts with it, and then every remaining score is lowered by
// the caller's wait time (300000ms by default). A caller already queued
// learns the lock's PTTL; a new one is queued with the score of the last
// entry (or now + the lock's PTTL) plus its wait time. A release tells
// the queue's head "0" on its own channel, with Redisson's unlock latch.
type javaFair struct {
	java    *javaLock
	queue   string
	timeout string
	wait    time.Duration // Redisson's fairLockWaitTimeout
}

const javaFairPurge = `
while true do
    local first = redis.call('lindex', KEYS[2], 0)
    if not first then break end
    local score = redis.call('zscore', KEYS[3], first)
    if not score or tonumber(score) > tonumber(ARGV[4]) then break end
    redis.call('zrem', KEYS[3], first)
    redis.call('lpop', KEYS[2])
end
`

// javaFairAcquire: KEYS lock, queue, timeouts; ARGV lease ms, thread's
// lock name, wait ms, client time ms.
const javaFairAcquire = javaFairPurge + `
local held = redis.call('exists', KEYS[1]) == 1
if not held and (redis.call('exists', KEYS[2]) == 0 or redis.call('lindex', KEYS[2], 0) == ARGV[2]) then
    redis.call('lpop', KEYS[2])
    redis.call('zrem', KEYS[3], ARGV[2])
    for _, w in ipairs(redis.call('zrange', KEYS[3], 0, -1)) do
        redis.call('zincrby', KEYS[3], -tonumber(ARGV[3]), w)
    end
    redis.call('hset', KEYS[1], ARGV[2], 1)
    redis.call('pexpire', KEYS[1], ARGV[1])
    return nil
end
if redis.call('hexists', KEYS[1], ARGV[2]) == 1 then
    redis.call('hincrby', KEYS[1], ARGV[2], 1)
    redis.call('pexpire', KEYS[1], ARGV[1])
    return nil
end
if redis.call('zscore', KEYS[3], ARGV[2]) then
    return math.max(0, redis.call('pttl', KEYS[1]))
end
local last = redis.call('lindex', KEYS[2], -1)
local ttl
if last and last ~= ARGV[2] and redis.call('zscore', KEYS[3], last) then
    ttl = tonumber(redis.call('zscore', KEYS[3], last)) - tonumber(ARGV[4])
else
    ttl = redis.call('pttl', KEYS[1])
end
if redis.call('zadd', KEYS[3], ttl + tonumber(ARGV[3]) + tonumber(ARGV[4]), ARGV[2]) == 1 then
    redis.call('rpush', KEYS[2], ARGV[2])
end
return ttl`

// javaFairUnlock: KEYS lock, queue, timeouts, channel, unlock latch; ARGV
// message, lease ms, thread's lock name, client time ms, publish command,
// latch PX.
const javaFairUnlock = `
local done = redis.call('get', KEYS[5])
if done then
    return tonumber(done)
end
` + javaFairPurge + `
if redis.call('exists', KEYS[1]) == 0 then
    local first = redis.call('lindex', KEYS[2], 0)
    if first then
        redis.call(ARGV[5], KEYS[4] .. ':' .. first, ARGV[1])
    end
    redis.call('set', KEYS[5], 1, 'px', ARGV[6])
    return 1
end
if redis.call('hexists', KEYS[1], ARGV[3]) == 0 then
    return nil
end
if redis.call('hincrby', KEYS[1], ARGV[3], -1) > 0 then
    redis.call('pexpire', KEYS[1], ARGV[2])
    redis.call('set', KEYS[5], 0, 'px', ARGV[6])
    return 0
end
redis.call('del', KEYS[1])
redis.call('set', KEYS[5], 1, 'px', ARGV[6])
local first = redis.call('lindex', KEYS[2], 0)
if first then
    redis.call(ARGV[5], KEYS[4] .. ':' .. first, ARGV[1])
end
return 1`

func newJavaFair(rdb redis.UniversalClient, name string, sharded bool) *javaFair {
	return &javaFair{java: newJavaLock(rdb, name, sharded), queue: testkit.FairQueueKey(name), timeout: testkit.FairTimeoutKey(name), wait: 5 * time.Minute}
}

// thread returns the same lock as used by another Java thread.
func (j *javaFair) thread(n int) *javaFair {
	t := *j
	java := *j.java
	java.field = java.field[:len(java.field)-1] + strconv.Itoa(n)
	t.java = &java
	return &t
}

// tryLock returns 0 when acquired, else a positive wait.
func (j *javaFair) tryLock(ctx context.Context, lease time.Duration) (int64, error) {
	v, err := j.java.rdb.Eval(ctx, javaFairAcquire, []string{j.java.name, j.queue, j.timeout}, lease.Milliseconds(), j.java.field,
		j.wait.Milliseconds(), time.Now().UnixMilli()).Result()
	if errors.Is(err, redis.Nil) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	return max(v.(int64), 1), nil
}

func (j *javaFair) unlock(ctx context.Context) error {
	latch := javaUnlockLatch(j.java.name, javaRequestID())
	err := j.java.rdb.Eval(ctx, javaFairUnlock, []string{j.java.name, j.queue, j.timeout, j.java.channel, latch},
		"0", 30000, j.java.field, time.Now().UnixMilli(), j.java.publish(), 10000).Err()
	if errors.Is(err, redis.Nil) {
		return errors.New("java unlock: not held")
	}
	if err != nil {
		return err
	}
	return j.java.rdb.Del(ctx, latch).Err()
}

// subscribe subscribes to the Java thread's own channel and waits for the
// confirmation.
func (j *javaFair) subscribe(t *testing.T, ctx context.Context) *redis.PubSub {
	t.Helper()
	channel := j.java.channel + ":" + j.java.field
	var ps *redis.PubSub
	if j.java.sharded {
		ps = j.java.rdb.SSubscribe(ctx, channel)
	} else {
		ps = j.java.rdb.Subscribe(ctx, channel)
	}
	t.Cleanup(func() { _ = ps.Close() })
	if _, err := ps.Receive(ctx); err != nil {
		t.Fatal(err)
	}
	return ps
}

func TestFairMutexRedissonInterop(t *testing.T) {
	testkit.ForEach(t, func(t *testing.T, top testkit.Topology) {
		rdb := top.RDB(t)
		a, b := top.NewClient(t), top.NewClient(t)
		name := testkit.LockName(t)
		java := newJavaFair(rdb, name, top.Name == "cluster")
		ctx := testkit.CtxTimeout(t, 10*time.Second)
		lock := func(c *relock.Client) <-chan *relock.Lease {
			got := make(chan *relock.Lease, 1)
			go func() {
				l, err := c.FairMutex(name).Lock(ctx)
				if err != nil {
					t.Error(err)
				}
				got <- l
			}()
			return got
		}

		// Java holds: relock is excluded, queues, and is woken on its own
		// channel by Java's release.
		if w, err := java.tryLock(ctx, 30*time.Second); err != nil || w != 0 {
			t.Fatalf("java tryLock: %v %v", w, err)
		}
		if _, err := a.FairMutex(name).TryLock(ctx); !errors.Is(err, relock.ErrNotAcquired) {
			t.Fatalf("relock TryLock over a Java hold: %v", err)
		}
		first := lock(a)
		testkit.WaitQueued(t, rdb, name, 1)
		testkit.Eventually(t, 5*time.Second, "relock to sleep", func() bool { return a.Stats().Asleep == 1 })
		if err := java.unlock(ctx); err != nil {
			t.Fatal(err)
		}
		l := <-first
		if l == nil {
			t.FailNow()
		}
		if a.Stats().Wakeups == 0 {
			t.Fatal("relock was not woken by Java's release")
		}

		// relock holds: Java is excluded and queues; a relock waiter queues
		// behind Java. relock's release tells Java alone, on its channel.
		if w, err := java.tryLock(ctx, 30*time.Second); err != nil || w <= 0 {
			t.Fatalf("java tryLock over a relock hold: %v %v", w, err)
		}
		ps := java.subscribe(t, ctx)
		second := lock(b)
		testkit.WaitQueued(t, rdb, name, 2)
		if q := testkit.Queued(t, rdb, name); q[0] != java.java.field {
			t.Fatalf("queue %v: Java is not first", q)
		}
		// Asleep once its own channel is confirmed: Java's release, below,
		// cannot come before it listens.
		testkit.Eventually(t, 5*time.Second, "the relock waiter behind Java to sleep", func() bool { return b.Stats().Asleep == 1 })
		if err := l.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		msg, err := ps.ReceiveMessage(ctx)
		if err != nil || msg.Payload != "0" || msg.Channel != java.java.channel+":"+java.java.field {
			t.Fatalf("java heard %+v, %v", msg, err)
		}
		if _, err := a.FairMutex(name).TryLock(ctx); !errors.Is(err, relock.ErrNotAcquired) {
			t.Fatalf("relock TryLock past Java, first in the queue: %v", err)
		}
		if w, err := java.tryLock(ctx, 30*time.Second); err != nil || w != 0 {
			t.Fatalf("java tryLock as the first waiter: %v %v", w, err)
		}
		if b.Stats().Wakeups != 0 {
			t.Fatal("a waiter behind the first was woken")
		}
		if err := java.unlock(ctx); err != nil {
			t.Fatal(err)
		}
		l = <-second
		if l == nil {
			t.FailNow()
		}
		// Its attempt found Java ahead: it listened on its own channel,
		// where Java's release told it (not its next timed attempt).
		if b.Stats().Wakeups == 0 {
			t.Fatal("the relock waiter behind Java was not woken by Java's release")
		}
		if err := l.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		testkit.NoKeysLeft(t, rdb, name)
	})
}

// TestFairMutexRedissonMixedQueue: the queue [Redisson R1, relock W2,
// Redisson R3] behind a Redisson holder. When R1 takes the lock, Redisson
// lowers every queued score by its wait time (5 minutes): W2 must keep its
// place, be told by R1's release, and be served before R3, whose turn
// comes at W2's release. The shared queue keys never get a TTL.
func TestFairMutexRedissonMixedQueue(t *testing.T) {
	testkit.ForEach(t, func(t *testing.T, top testkit.Topology) {
		rdb := top.RDB(t)
		c := top.NewClient(t)
		name := testkit.LockName(t)
		r0 := newJavaFair(rdb, name, top.Name == "cluster")
		r1, r3 := r0.thread(2), r0.thread(3)
		ctx := testkit.CtxTimeout(t, 20*time.Second)
		if w, err := r0.tryLock(ctx, 30*time.Second); err != nil || w != 0 {
			t.Fatalf("R0 tryLock: %v %v", w, err)
		}
		if w, err := r1.tryLock(ctx, 30*time.Second); err != nil || w == 0 {
			t.Fatalf("R1 tryLock over R0: %v %v", w, err)
		}
		got := make(chan *relock.Lease, 1)
		go func() {
			l, err := c.FairMutex(name).Lock(ctx)
			if err != nil {
				t.Error(err)
			}
			got <- l
		}()
		testkit.WaitQueued(t, rdb, name, 2)
		testkit.Eventually(t, 5*time.Second, "relock to sleep", func() bool { return c.Stats().Asleep == 1 })
		if w, err := r3.tryLock(ctx, 30*time.Second); err != nil || w == 0 {
			t.Fatalf("R3 tryLock: %v %v", w, err)
		}
		ps := r3.subscribe(t, ctx)
		for _, key := range []string{r0.queue, r0.timeout} {
			if ttl := rdb.PTTL(ctx, key).Val(); ttl != -1 {
				t.Fatalf("shared key %s has TTL %v", key, ttl)
			}
		}

		if err := r0.unlock(ctx); err != nil {
			t.Fatal(err)
		}
		if w, err := r1.tryLock(ctx, 30*time.Second); err != nil || w != 0 {
			t.Fatalf("R1 tryLock as the head: %v %v", w, err)
		}
		if q := testkit.Queued(t, rdb, name); len(q) != 2 || q[1] != r3.java.field {
			t.Fatalf("queue after R1's grant %v, want [relock waiter, R3]", q)
		}
		if err := r1.unlock(ctx); err != nil {
			t.Fatal(err)
		}
		l := <-got
		if l == nil {
			t.FailNow()
		}
		if c.Stats().Wakeups == 0 {
			t.Fatal("relock was not woken by R1's release")
		}
		// R1's release told relock, not R3: the first message R3 hears is
		// one published after relock was granted the lock.
		channel := r3.java.channel + ":" + r3.java.field
		if err := rdb.Do(ctx, r3.java.publish(), channel, "mark").Err(); err != nil {
			t.Fatal(err)
		}
		if msg, err := ps.ReceiveMessage(ctx); err != nil || msg.Payload != "mark" {
			t.Fatalf("R3 heard %+v, %v before relock's release", msg, err)
		}
		if w, err := r3.tryLock(ctx, 30*time.Second); err != nil || w == 0 {
			t.Fatalf("R3 tryLock over relock's hold: %v %v", w, err)
		}
		if err := l.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		msg, err := ps.ReceiveMessage(ctx)
		if err != nil || msg.Payload != "0" {
			t.Fatalf("R3 heard %+v, %v", msg, err)
		}
		if w, err := r3.tryLock(ctx, 30*time.Second); err != nil || w != 0 {
			t.Fatalf("R3 tryLock as the head: %v %v", w, err)
		}
		if err := r3.unlock(ctx); err != nil {
			t.Fatal(err)
		}
		testkit.NoKeysLeft(t, rdb, name)
	})
}

// TestFairMutexWithoutPubSub: a Client whose user may not subscribe to
// any channel still takes a fair lock in turn, by its attempts. A call
// that comes while another call of its Client waits does not wait for a
// subscription that is never confirmed before its first attempt.
func TestFairMutexWithoutPubSub(t *testing.T) {
	ctx := testkit.CtxTimeout(t, 20*time.Second)
	admin := testkit.CloseLater(t, testkit.Standalone.Client())
	user := "nopubsub-" + strconv.Itoa(os.Getpid())
	if err := admin.Do(ctx, "acl", "setuser", user, "on", ">pw", "~*", "&*", "+@all", "-subscribe", "-ssubscribe").Err(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { admin.Do(context.Background(), "acl", "deluser", user) })
	rdb := testkit.CloseLater(t, redis.NewClient(&redis.Options{Addr: testkit.Standalone.Addr, Username: user, Password: "pw"}))
	probe := rdb.Subscribe(ctx, "probe")
	if _, err := probe.ReceiveTimeout(ctx, 5*time.Second); err == nil || !strings.Contains(err.Error(), "NOPERM") {
		t.Fatalf("the user's subscription: %v, want NOPERM", err)
	}
	probe.Close()
	h := testkit.NewClient(t, admin, relock.WithoutReplicaSync())
	n := testkit.NewClient(t, rdb, relock.WithoutReplicaSync())
	name := testkit.LockName(t)
	holder, err := h.FairMutex(name).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got1 := testkit.LockAsync(t, ctx, n.FairMutex(name).Lock)
	testkit.Eventually(t, 5*time.Second, "the first call to queue and wait", func() bool {
		s := n.Stats()
		return admin.LLen(ctx, testkit.FairQueueKey(name)).Val() == 1 && s.Waits == 1 && s.Channels == 1
	})
	got2 := testkit.LockAsync(t, ctx, n.FairMutex(name).Lock)
	testkit.Eventually(t, 5*time.Second, "the second call to queue", func() bool {
		return admin.LLen(ctx, testkit.FairQueueKey(name)).Val() == 2
	})
	ls := takeInTurn(t, ctx, holder, got1, got2)
	if ls[0].Token() <= holder.Token() || ls[1].Token() <= ls[0].Token() {
		t.Errorf("tokens %d, %d after %d: want the queue's order", ls[0].Token(), ls[1].Token(), holder.Token())
	}
	testkit.NoKeysLeft(t, admin, name)
}
