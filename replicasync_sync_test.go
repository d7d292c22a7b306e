package relock_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/internal/scripts"
	"github.com/relock-go/relock/internal/testkit"
)

// Replica sync of the synchronizers: their acquisitions are undone when
// too few replicas acknowledge them, like the locks'; their other writes
// cannot be undone, and report a shortfall as a change applied on the
// master only.

// syncFixture is a master with one replica, a Client that waits for that
// replica (and one that retries), and synchronizers set up while
// replication worked.
type syncFixture struct {
	r       *redistest.Replicated
	log     rsLog
	c       *relock.Client // Replicas: 1
	retry   *relock.Client // Replicas: 1, Retry
	master  *redis.Client
	replica *redis.Client

	sem    *relock.Semaphore       // 3 permits
	ps     *relock.PermitSemaphore // 3 permits, p1 and p2 held
	p1, p2 *relock.Permit
	latch  *relock.CountDownLatch // count 3
}

func newSyncFixture(t *testing.T, ctx context.Context) *syncFixture {
	t.Helper()
	f := &syncFixture{r: redistest.NewReplicated(t, 1)}
	rsWaitOnline(t, f.r.Master, 1)
	one := relock.ReplicaSync{Replicas: 1}
	f.c = syncedClient(t, f.r.Master, &f.log, relock.WithReplicaSync(one))
	one.Retry = true
	f.retry = syncedClient(t, f.r.Master, nil, relock.WithReplicaSync(one))
	f.master = testkit.CloseLater(t, f.r.Master.Client())
	f.replica = testkit.CloseLater(t, f.r.Replicas[0].Client())

	f.sem = f.c.Semaphore(testkit.LockName(t))
	f.ps = f.c.PermitSemaphore(testkit.LockName(t))
	f.latch = f.c.CountDownLatch(testkit.LockName(t))
	if ok, err := f.sem.TrySetPermits(ctx, 3); !ok || err != nil {
		t.Fatalf("Semaphore.TrySetPermits: %v %v", ok, err)
	}
	if ok, err := f.ps.TrySetPermits(ctx, 3); !ok || err != nil {
		t.Fatalf("PermitSemaphore.TrySetPermits: %v %v", ok, err)
	}
	var err error
	if f.p1, err = f.ps.Acquire(ctx); err != nil {
		t.Fatal(err)
	}
	if f.p2, err = f.ps.Acquire(ctx); err != nil {
		t.Fatal(err)
	}
	if ok, err := f.latch.TrySetCount(ctx, 3); !ok || err != nil {
		t.Fatalf("TrySetCount: %v %v", ok, err)
	}
	return f
}

// pause stops the replica: it stays connected and listed, and answers
// no WAIT until resume.
func (f *syncFixture) pause(t *testing.T) {
	t.Helper()
	if err := f.r.Replicas[0].Pause(); err != nil {
		t.Fatal(err)
	}
}

// resume continues the replica stopped by pause.
func (f *syncFixture) resume(t *testing.T) {
	t.Helper()
	if err := f.r.Replicas[0].Resume(); err != nil {
		t.Fatal(err)
	}
}

// TestReplicaSyncSynchronizers runs, on a master with one replica, every
// synchronizer write with replica sync: acknowledged, then with the
// replica stopped (too few acknowledge), then with Retry while it comes
// back.
func TestReplicaSyncSynchronizers(t *testing.T) {
	t.Parallel()
	ctx := testkit.CtxTimeout(t, 2*time.Minute)
	f := newSyncFixture(t, ctx)

	if !t.Run("acknowledged", func(t *testing.T) { syncAcknowledged(t, ctx, f) }) {
		return
	}
	f.pause(t)
	t.Run("semaphore short", func(t *testing.T) { syncShortSemaphore(t, ctx, f) })
	t.Run("permit semaphore short", func(t *testing.T) { syncShortPermits(t, ctx, f) })
	t.Run("latch short", func(t *testing.T) { syncShortLatch(t, ctx, f) })
	t.Run("retry until ctx ends", func(t *testing.T) { syncRetryCtx(t, ctx, f) })
	t.Run("retry", func(t *testing.T) { syncRetry(t, ctx, f) }) // resumes the replica
}

// syncAcknowledged: every write is followed by WAIT 1 in its pipeline and
// is on the replica when the call returns; none falls short.
func syncAcknowledged(t *testing.T, ctx context.Context, f *syncFixture) {
	c := f.c
	short := c.Stats().SyncShort
	f.log.reset()
	onReplica := func(what, key, want string) {
		t.Helper()
		if got := rsGet(t, f.replica, key); got != want {
			t.Fatalf("after %s the replica has %q, want %q", what, got, want)
		}
	}

	s := c.Semaphore(testkit.LockName(t))
	if ok, err := s.TrySetPermits(ctx, 3); !ok || err != nil {
		t.Fatalf("TrySetPermits: %v %v", ok, err)
	}
	onReplica("TrySetPermits", s.Name(), "3")
	if ok, err := s.TryAcquire(ctx, 2); !ok || err != nil {
		t.Fatalf("TryAcquire: %v %v", ok, err)
	}
	onReplica("TryAcquire", s.Name(), "1")
	if err := s.Acquire(ctx, 1); err != nil {
		t.Fatal(err)
	}
	onReplica("Acquire", s.Name(), "0")
	if err := s.Release(ctx, 2); err != nil {
		t.Fatal(err)
	}
	onReplica("Release", s.Name(), "2")
	if err := s.AddPermits(ctx, 1); err != nil {
		t.Fatal(err)
	}
	onReplica("AddPermits", s.Name(), "3")
	if n, err := s.Drain(ctx); n != 3 || err != nil {
		t.Fatalf("Drain = %d, %v", n, err)
	}
	onReplica("Drain", s.Name(), "0")

	ps := c.PermitSemaphore(testkit.LockName(t))
	if ok, err := ps.TrySetPermits(ctx, 2); !ok || err != nil {
		t.Fatalf("TrySetPermits: %v %v", ok, err)
	}
	p, err := ps.TryAcquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if held := rsHeldPermits(t, f.replica, ps); len(held) != 1 || held[p.ID()] == 0 {
		t.Fatalf("the replica holds %v after TryAcquire, want %s", held, p.ID())
	}
	before := rsHeldPermits(t, f.master, ps)[p.ID()]
	if err := p.UpdateLease(ctx, time.Hour); err != nil {
		t.Fatal(err)
	}
	if got := rsHeldPermits(t, f.replica, ps)[p.ID()]; got < before+float64(30*time.Minute/time.Millisecond) {
		t.Fatalf("the replica has expiry %.0f after UpdateLease(1h), was %.0f", got, before)
	}
	if err := p.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if held := rsHeldPermits(t, f.replica, ps); len(held) != 0 || rsGet(t, f.replica, ps.Name()) != "2" {
		t.Fatalf("the replica holds %v, %s free after Release", held, rsGet(t, f.replica, ps.Name()))
	}
	q, err := ps.Acquire(ctx, relock.WithLease(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	if err := ps.UpdateLease(ctx, q.ID(), time.Hour); err != nil {
		t.Fatal(err)
	}
	if err := ps.Release(ctx, q.ID()); err != nil {
		t.Fatal(err)
	}
	if held := rsHeldPermits(t, f.replica, ps); len(held) != 0 {
		t.Fatalf("the replica holds %v after a Release by id", held)
	}
	if err := ps.AddPermits(ctx, 1); err != nil {
		t.Fatal(err)
	}
	onReplica("PermitSemaphore.AddPermits", ps.Name(), "3")

	l := c.CountDownLatch(testkit.LockName(t))
	if ok, err := l.TrySetCount(ctx, 2); !ok || err != nil {
		t.Fatalf("TrySetCount: %v %v", ok, err)
	}
	onReplica("TrySetCount", l.Name(), "2")
	for _, want := range []string{"1", ""} {
		if err := l.CountDown(ctx); err != nil {
			t.Fatal(err)
		}
		onReplica("CountDown", l.Name(), want)
	}

	for _, s := range []*scripts.Script{
		scripts.SemTrySetPermits, scripts.SemAcquire, scripts.SemRelease, scripts.SemDrain,
		scripts.PermitAcquire, scripts.PermitUpdateLease, scripts.PermitRelease,
		scripts.LatchTrySetCount, scripts.LatchCountDown,
	} {
		trips := rsScriptTrips(&f.log, s)
		if len(trips) == 0 {
			t.Errorf("%s: not sent", s.Name())
		}
		for _, trip := range trips {
			if got := strings.Join(trip.names(), " "); got != "evalsha wait" && got != "eval wait" {
				t.Errorf("%s sent in %q, want \"evalsha wait\"", s.Name(), got)
			} else if w := trip.cmds[1]; w[1] != "1" || w[2] != "100" {
				t.Errorf("%s followed by WAIT %v, want WAIT 1 100", s.Name(), w[1:])
			}
		}
	}
	if got := c.Stats().SyncShort - short; got != 0 {
		t.Errorf("Stats.SyncShort grew by %d with the replica acknowledging", got)
	}
}

// syncShortSemaphore: with the replica stopped, an acquisition is undone
// and fails; the other writes stay applied on the master and say so.
func syncShortSemaphore(t *testing.T, ctx context.Context, f *syncFixture) {
	short := f.c.Stats().SyncShort
	s := f.sem
	ok, err := s.TryAcquire(ctx, 1)
	if ok {
		t.Fatal("TryAcquire reported permits too few replicas acknowledged")
	}
	rsWantUndone(t, "TryAcquire", err)
	if got := rsGet(t, f.master, s.Name()); got != "3" {
		t.Fatalf("%s permits left on the master after an undone TryAcquire, want 3", got)
	}
	rsWantUndone(t, "Acquire", s.Acquire(ctx, 2))
	if got := rsGet(t, f.master, s.Name()); got != "3" {
		t.Fatalf("%s permits left on the master after an undone Acquire, want 3", got)
	}

	rsWantApplied(t, "Release", s.Release(ctx, 1))
	if got := rsGet(t, f.master, s.Name()); got != "4" {
		t.Fatalf("%s permits on the master after a short Release, want 4", got)
	}
	rsWantApplied(t, "AddPermits", s.AddPermits(ctx, 1))
	n, err := s.Drain(ctx)
	rsWantApplied(t, "Drain", err)
	if n != 5 || rsGet(t, f.master, s.Name()) != "0" {
		t.Fatalf("a short Drain took %d permits and left %s, want 5 and 0", n, rsGet(t, f.master, s.Name()))
	}
	fresh := f.c.Semaphore(testkit.LockName(t))
	ok, err = fresh.TrySetPermits(ctx, 2)
	rsWantApplied(t, "TrySetPermits", err)
	if !ok || rsGet(t, f.master, fresh.Name()) != "2" {
		t.Fatalf("a short TrySetPermits reported %v and set %q on the master, want true and 2", ok, rsGet(t, f.master, fresh.Name()))
	}
	if got := f.c.Stats().SyncShort - short; got != 6 {
		t.Errorf("Stats.SyncShort grew by %d, want 6", got)
	}
}

// syncShortPermits: the same for a PermitSemaphore and its Permits.
func syncShortPermits(t *testing.T, ctx context.Context, f *syncFixture) {
	short := f.c.Stats().SyncShort
	ps := f.ps
	p, err := ps.TryAcquire(ctx)
	if p != nil {
		t.Fatal("TryAcquire returned a permit too few replicas acknowledged")
	}
	rsWantUndone(t, "TryAcquire", err)
	p, err = ps.Acquire(ctx)
	if p != nil {
		t.Fatal("Acquire returned a permit too few replicas acknowledged")
	}
	rsWantUndone(t, "Acquire", err)
	if held := rsHeldPermits(t, f.master, ps); len(held) != 2 || rsGet(t, f.master, ps.Name()) != "1" {
		t.Fatalf("the master holds %v with %s free after undone acquisitions, want p1 and p2 with 1", held, rsGet(t, f.master, ps.Name()))
	}

	before := rsHeldPermits(t, f.master, ps)
	rsWantApplied(t, "Permit.UpdateLease", f.p1.UpdateLease(ctx, time.Hour))
	if after := rsHeldPermits(t, f.master, ps)[f.p1.ID()]; after < before[f.p1.ID()]+float64(30*time.Minute/time.Millisecond) {
		t.Fatalf("a short UpdateLease(1h) left expiry %.0f on the master, was %.0f", after, before[f.p1.ID()])
	}
	if err := f.p1.Err(); err != nil {
		t.Fatalf("Err = %v after a short UpdateLease, want the permit still held", err)
	}
	rsWantApplied(t, "Permit.Release", f.p1.Release(ctx))
	if _, ok := rsHeldPermits(t, f.master, ps)[f.p1.ID()]; ok || rsGet(t, f.master, ps.Name()) != "2" {
		t.Fatalf("a short Release left the permit held on the master (%s free)", rsGet(t, f.master, ps.Name()))
	}
	if err := f.p1.Err(); !errors.Is(err, relock.ErrReleased) {
		t.Fatalf("Err = %v after a short Release, want ErrReleased", err)
	}
	if err := f.p1.Release(ctx); !errors.Is(err, relock.ErrNotHeld) {
		t.Fatalf("a second Release: %v, want ErrNotHeld", err)
	}

	rsWantApplied(t, "UpdateLease by id", ps.UpdateLease(ctx, f.p2.ID(), time.Hour))
	rsWantApplied(t, "Release by id", ps.Release(ctx, f.p2.ID()))
	if held := rsHeldPermits(t, f.master, ps); len(held) != 0 {
		t.Fatalf("a short Release by id left %v held on the master", held)
	}
	rsWantApplied(t, "AddPermits", ps.AddPermits(ctx, 1))
	if got := rsGet(t, f.master, ps.Name()); got != "4" {
		t.Fatalf("%s free on the master after the short writes, want 4", got)
	}
	if got := f.c.Stats().SyncShort - short; got != 7 {
		t.Errorf("Stats.SyncShort grew by %d, want 7", got)
	}
}

// syncShortLatch: a short CountDown or TrySetCount stays applied on the
// master; a CountDown that changes nothing is not a shortfall.
func syncShortLatch(t *testing.T, ctx context.Context, f *syncFixture) {
	short := f.c.Stats().SyncShort
	rsWantApplied(t, "CountDown", f.latch.CountDown(ctx))
	if got := rsGet(t, f.master, f.latch.Name()); got != "2" {
		t.Fatalf("count %q on the master after a short CountDown, want 2", got)
	}
	fresh := f.c.CountDownLatch(testkit.LockName(t))
	ok, err := fresh.TrySetCount(ctx, 2)
	rsWantApplied(t, "TrySetCount", err)
	if !ok || rsGet(t, f.master, fresh.Name()) != "2" {
		t.Fatalf("a short TrySetCount reported %v and set %q on the master, want true and 2", ok, rsGet(t, f.master, fresh.Name()))
	}
	unset := f.c.CountDownLatch(testkit.LockName(t))
	if err := unset.CountDown(ctx); !errors.Is(err, relock.ErrLatchNotSet) || errors.Is(err, relock.ErrReplicaSync) {
		t.Fatalf("CountDown of a latch not set: %v, want ErrLatchNotSet alone", err)
	}
	if got := f.c.Stats().SyncShort - short; got != 2 {
		t.Errorf("Stats.SyncShort grew by %d, want 2", got)
	}
}

// syncRetryCtx: with Retry, acquisitions too few replicas acknowledge are
// undone and tried again until ctx ends, and leave nothing taken.
func syncRetryCtx(t *testing.T, ctx context.Context, f *syncFixture) {
	rsWantApplied(t, "Release", f.sem.Release(ctx, 2)) // something to take
	if got := rsGet(t, f.master, f.sem.Name()); got != "2" {
		t.Fatalf("%s permits on the master, want 2", got)
	}
	short := f.retry.Stats().SyncShort
	tctx, cancel := context.WithTimeout(ctx, 600*time.Millisecond)
	defer cancel()
	ok, err := f.retry.Semaphore(f.sem.Name()).TryAcquire(tctx, 1)
	if ok || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Semaphore.TryAcquire with Retry: %v %v, want the deadline's error", ok, err)
	}
	pctx, cancel := context.WithTimeout(ctx, 600*time.Millisecond)
	defer cancel()
	if _, err := f.retry.PermitSemaphore(f.ps.Name()).Acquire(pctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("PermitSemaphore.Acquire with Retry: %v, want the deadline's error", err)
	}
	if got := f.retry.Stats().SyncShort - short; got < 2 {
		t.Errorf("Stats.SyncShort grew by %d in 1.2s of retries, want at least one per call", got)
	}
	if got := rsGet(t, f.master, f.sem.Name()); got != "2" {
		t.Errorf("%s permits on the master after retries ran out, want 2", got)
	}
	if held := rsHeldPermits(t, f.master, f.ps); len(held) != 0 {
		t.Errorf("retries that ran out left %v held", held)
	}
}

// syncRetry: with Retry, acquisitions started while the replica is
// stopped succeed once it is back, and take one grant each.
func syncRetry(t *testing.T, ctx context.Context, f *syncFixture) {
	short := f.retry.Stats().SyncShort
	semDone := make(chan error, 1)
	go func() { semDone <- f.retry.Semaphore(f.sem.Name()).Acquire(ctx, 1) }()
	type permit struct {
		p   *relock.Permit
		err error
	}
	psDone := make(chan permit, 1)
	go func() {
		p, err := f.retry.PermitSemaphore(f.ps.Name()).Acquire(ctx)
		psDone <- permit{p, err}
	}()
	testkit.Eventually(t, 10*time.Second, "acquisitions retried", func() bool { return f.retry.Stats().SyncShort-short >= 2 })
	f.resume(t)
	if err := <-semDone; err != nil {
		t.Fatalf("Semaphore.Acquire with Retry after the replica came back: %v", err)
	}
	res := <-psDone
	if res.err != nil {
		t.Fatalf("PermitSemaphore.Acquire with Retry after the replica came back: %v", res.err)
	}
	for _, rdb := range []*redis.Client{f.master, f.replica} {
		if got := rsGet(t, rdb, f.sem.Name()); got != "1" {
			t.Errorf("%s has %s permits after one retried Acquire of 2, want 1", rdb.Options().Addr, got)
		}
		if held := rsHeldPermits(t, rdb, f.ps); len(held) != 1 || held[res.p.ID()] == 0 {
			t.Errorf("%s holds %v after one retried Acquire, want %s", rdb.Options().Addr, held, res.p.ID())
		}
	}
	if err := res.p.Release(ctx); err != nil {
		t.Fatal(err)
	}
}
