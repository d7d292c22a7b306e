package relock_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/history"
	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/internal/scripts"
	"github.com/relock-go/relock/internal/testkit"
)

// syncedClient returns a relock Client on a new go-redis client of s whose
// round trips log records.
func syncedClient(t *testing.T, s *redistest.Server, log *rsLog, opts ...relock.Option) *relock.Client {
	t.Helper()
	rdb := testkit.CloseLater(t, s.Client())
	if log != nil {
		rdb.AddHook(log.hook(s.Addr))
	}
	return testkit.NewClient(t, rdb, opts...)
}

// lockTrips returns the round trips that carried lock.lua.
func lockTrips(log *rsLog) []rsTrip {
	var out []rsTrip
	for _, s := range log.all() {
		for _, c := range s.cmds {
			if (c[0] == "evalsha" && c[1] == testkit.ScriptSHA("lock.lua")) || (c[0] == "eval" && strings.HasPrefix(c[1], "-- lock.lua")) {
				out = append(out, s)
				break
			}
		}
	}
	return out
}

// TestReplicaSync runs, on one master with two replicas, replica sync's
// behaviour with every replica up, then with one killed, then restarted.
func TestReplicaSync(t *testing.T) {
	t.Parallel()
	r := redistest.NewReplicated(t, 2)
	ctx := testkit.CtxTimeout(t, time.Minute)
	dead := r.Replicas[1]
	// A replica past its first synchronisation (online) answers WAIT.
	testkit.WaitReplicasOnline(t, r.Master, 2)

	// Made before the replica dies: each has read the replica count.
	var allLog rsLog
	all := syncedClient(t, r.Master, &allLog)
	two := syncedClient(t, r.Master, nil, relock.WithReplicaSync(relock.ReplicaSync{Replicas: 2}), relock.WithWatchdogTimeout(3*time.Second))
	owner := relock.WithOwner(ctx)
	var held *relock.Lease

	if !t.Run("default on", func(t *testing.T) {
		m := all.Mutex(testkit.LockName(t))
		l, err := m.Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, rep := range r.Replicas { // acknowledged before Lock returned
			if !rsExists(t, rep, m.Name()) {
				t.Errorf("replica %s does not have the lock right after Lock", rep.Addr)
			}
		}
		// EVALSHA and WAIT, then, on a server that does not know the
		// script yet, EVAL and WAIT.
		for _, trip := range lockTrips(&allLog) {
			if got := strings.Join(trip.names(), " "); got != "evalsha wait" && got != "eval wait" {
				t.Errorf("acquisition pipeline %q, want \"evalsha wait\"", got)
			} else if w := trip.cmds[1]; w[1] != "2" || w[2] != "100" {
				t.Errorf("WAIT %v, want WAIT 2 100", w[1:])
			}
		}
		if err := l.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		held, err = two.Mutex(testkit.LockName(t)).Lock(owner) // for "renewal short" below
		if err != nil {
			t.Fatal(err)
		}
	}) {
		return
	}

	t.Run("without", func(t *testing.T) {
		var log rsLog
		c := syncedClient(t, r.Master, &log, relock.WithoutReplicaSync())
		m := c.Mutex(testkit.LockName(t))
		for range 3 {
			l, err := m.Lock(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if err := l.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
		}
		if n := log.count("wait") + log.count("info"); n != 0 {
			t.Errorf("%d WAIT or INFO commands sent with WithoutReplicaSync", n)
		}
	})

	t.Run("renewal", func(t *testing.T) {
		var log rsLog
		c := syncedClient(t, r.Master, &log, relock.WithWatchdogTimeout(600*time.Millisecond))
		l, err := c.Mutex(testkit.LockName(t)).Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		testkit.Eventually(t, 10*time.Second, "a renewal followed by WAIT", func() bool {
			for _, s := range log.all() {
				n := s.names()
				if len(n) >= 2 && n[0] == "evalsha" && s.cmds[0][1] == testkit.ScriptSHA("renew.lua") && n[len(n)-1] == "wait" {
					return true
				}
			}
			return false
		})
		if err := l.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("batched", func(t *testing.T) { syncedHammer(t, ctx, r, &allLog, all) })

	if err := dead.Kill(); err != nil {
		t.Fatal(err)
	}
	testkit.WaitReplicasOnline(t, r.Master, 1)

	t.Run("too few", func(t *testing.T) {
		m := two.Mutex(testkit.LockName(t))
		short := two.Stats().SyncShort
		for _, try := range []func(context.Context, ...relock.LockOption) (*relock.Lease, error){m.Lock, m.TryLock} {
			if _, err := try(ctx); !errors.Is(err, relock.ErrReplicaSync) {
				t.Fatalf("got %v, want ErrReplicaSync", err)
			}
			if keys := testkit.KeysOf(t, testkit.CloseLater(t, r.Master.Client()), m.Name()); len(keys) != 0 {
				t.Fatalf("keys left on the master: %v", keys)
			}
		}
		// The other locks likewise, the fair lock's queue included.
		rw, fair := two.RWMutex(testkit.LockName(t)), two.FairMutex(testkit.LockName(t))
		for name, try := range map[string]func(context.Context, ...relock.LockOption) (*relock.Lease, error){
			"RWMutex.Lock": rw.Lock, "RWMutex.RLock": rw.RLock, "FairMutex.Lock": fair.Lock,
		} {
			if _, err := try(ctx); !errors.Is(err, relock.ErrReplicaSync) {
				t.Fatalf("%s: got %v, want ErrReplicaSync", name, err)
			}
		}
		for _, name := range []string{rw.Name(), fair.Name()} {
			if keys := testkit.KeysOf(t, testkit.CloseLater(t, r.Master.Client()), name); len(keys) != 0 {
				t.Fatalf("keys left on the master: %v", keys)
			}
		}
		// A re-entry too few replicas acknowledged is undone; the hold stays.
		if _, err := two.Mutex(held.Name()).Lock(owner); !errors.Is(err, relock.ErrReplicaSync) {
			t.Fatalf("re-entry: got %v, want ErrReplicaSync", err)
		}
		if n := testkit.HoldCount(t, testkit.CloseLater(t, r.Master.Client()), held.Name()); n != 1 {
			t.Errorf("hold count %d after a failed re-entry, want 1", n)
		}
		if got := two.Stats().SyncShort - short; got != 6 {
			t.Errorf("Stats.SyncShort grew by %d, want 6", got)
		}
	})

	// A renewal too few replicas acknowledged keeps the hold on the master
	// but does not move its local deadline: the holder hears of the loss
	// by the deadline of the last renewal the replicas acknowledged, while
	// the master still has the hold.
	t.Run("renewal short", func(t *testing.T) {
		testkit.Eventually(t, 10*time.Second, "a renewal counted short", func() bool { return two.Stats().RenewSyncShort > 0 })
		if err := held.Err(); err != nil {
			t.Fatalf("a hold was declared %v at its first short renewal", err)
		}
		testkit.WaitDone(t, held, 10*time.Second)
		if !errors.Is(held.Err(), relock.ErrLockLost) {
			t.Fatalf("Err = %v, want ErrLockLost", held.Err())
		}
		if !rsExists(t, r.Master, held.Name()) {
			t.Error("the master no longer had the hold when it was declared lost")
		}
		_ = held.Unlock(ctx)
	})

	t.Run("all connected adapts", func(t *testing.T) {
		short := all.Stats().SyncShort
		m := all.Mutex(testkit.LockName(t))
		for range 2 {
			l, err := m.Lock(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if !rsExists(t, r.Replicas[0], m.Name()) {
				t.Error("the live replica does not have the lock right after Lock")
			}
			if err := l.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
		}
		if all.Stats().SyncShort != short {
			t.Error("an acquisition failed for want of the dead replica")
		}
		trips := lockTrips(&allLog)
		if w := trips[len(trips)-1].cmds[1]; w[0] != "wait" || w[1] != "1" {
			t.Errorf("last WAIT %v, want WAIT 1 after the replica died", w)
		}
	})

	t.Run("retry", func(t *testing.T) {
		c := syncedClient(t, r.Master, nil, relock.WithReplicaSync(relock.ReplicaSync{Replicas: 2, Retry: true}))
		m := c.Mutex(testkit.LockName(t))
		type result struct {
			l   *relock.Lease
			err error
		}
		done := make(chan result, 1)
		go func() {
			l, err := m.Lock(ctx)
			done <- result{l, err}
		}()
		testkit.Eventually(t, 10*time.Second, "an acquisition retried", func() bool { return c.Stats().SyncShort > 0 })
		if err := dead.Restart(); err != nil {
			t.Fatal(err)
		}
		res := <-done
		if res.err != nil {
			t.Fatalf("Lock with Retry after the replica came back: %v", res.err)
		}
		for _, rep := range r.Replicas {
			if !rsExists(t, rep, m.Name()) {
				t.Errorf("replica %s does not have the lock right after Lock", rep.Addr)
			}
		}
		if err := res.l.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	})
}

// TestReplicaSyncAllGone: with Replicas 0, a master that had replicas and
// lost them all fails acquisitions (it is the one a failover may replace
// next), while a Client that never saw a replica waits for none.
func TestReplicaSyncAllGone(t *testing.T) {
	t.Parallel()
	r := redistest.NewReplicated(t, 1)
	testkit.WaitReplicasOnline(t, r.Master, 1)
	ctx := testkit.CtxTimeout(t, 30*time.Second)
	c := syncedClient(t, r.Master, nil)
	m := c.Mutex(testkit.LockName(t))
	l, err := m.Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := r.Replicas[0].Kill(); err != nil {
		t.Fatal(err)
	}
	testkit.WaitReplicasOnline(t, r.Master, 0)
	if _, err := m.Lock(ctx); !errors.Is(err, relock.ErrReplicaSync) {
		t.Fatalf("Lock on a master that lost its replica: %v, want ErrReplicaSync", err)
	}
	l, err = syncedClient(t, r.Master, nil).Mutex(m.Name()).Lock(ctx)
	if err != nil {
		t.Fatalf("Lock of a Client that never saw a replica: %v", err)
	}
	if err := l.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}

// syncedHammer: goroutines of two clients lock their own names and contend
// for one, so that acquisitions share pipelines and releases hand locks
// over. Every pipeline carrying lock.lua ends with its one WAIT, and no two
// holds of the contended name overlap.
func syncedHammer(t *testing.T, ctx context.Context, r *redistest.Replicated, log *rsLog, c *relock.Client) {
	log.reset()
	clients := []*relock.Client{c, syncedClient(t, r.Master, log)}
	shared := testkit.LockName(t)
	rec := history.New()
	var wg sync.WaitGroup
	for i := range 24 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			own := clients[i%2].Mutex(fmt.Sprintf("%s:%d", shared, i))
			one := clients[i%2].Mutex(shared)
			for range 10 {
				for _, m := range []*relock.Mutex{own, one} {
					l, err := m.Lock(ctx)
					if err != nil {
						t.Error(err)
						return
					}
					h := rec.Begin(fmt.Sprint(i), m.Name(), l.Token())
					h.End()
					if err := l.Unlock(ctx); err != nil {
						t.Error(err)
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	for _, v := range rec.Check() {
		t.Error(v)
	}
	shared2 := 0
	for _, s := range lockTrips(log) {
		n := s.names()
		if n[len(n)-1] != "wait" || log.countIn(s, "wait") != 1 {
			t.Fatalf("pipeline %v does not end with its one WAIT", n)
		}
		if len(n) > 2 {
			shared2++
		}
	}
	t.Logf("%d pipelines carried several acquisitions and one WAIT; %d handoffs", shared2, c.Stats().Handoffs)
}

// TestReplicaSyncProbeQuiet: a server that refuses INFO and WAIT (here by
// ACL, as embedded and managed servers do) and shows no replica is no news
// to a Client that did not ask for replica sync: it logs no warning and
// locks. A Client that asked for replica sync is warned.
func TestReplicaSyncProbeQuiet(t *testing.T) {
	ctx := testkit.CtxTimeout(t, 10*time.Second)
	rules := []string{"~*", "&*", "+@all", "-info", "-wait"}
	for _, tc := range []struct {
		name string
		opts []relock.Option
		warn bool
	}{
		{"default", nil, false},
		{"asked for", []relock.Option{relock.WithReplicaSync(relock.ReplicaSync{Fallback: true})}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var sink rsSink
			c := testkit.NewClient(t, aclClient(t, testkit.Standalone, rules...), append(tc.opts, sink.logger())...)
			l, err := c.Mutex(testkit.LockName(t)).Lock(ctx)
			if err != nil {
				t.Fatalf("Lock: %v", err)
			}
			if err := l.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
			c.Close() // the probe runs in the background: wait for it
			warned := strings.Contains(sink.String(), "level=WARN")
			if warned != tc.warn {
				t.Fatalf("warned = %v, want %v; log:\n%s", warned, tc.warn, sink.String())
			}
		})
	}
}

// TestReplicaSyncUserRefused: on a master with a replica, a Redis user
// refused INFO and WAIT still lets the Client see the replica (by ROLE):
// lock calls refuse as the default setting says, with ErrReplicaSync and
// one warning naming WAIT. A user refused ROLE too leaves the Client
// blind: it locks without replica sync and says so once, at WARN, naming
// the permissions it lacks.
func TestReplicaSyncUserRefused(t *testing.T) {
	t.Parallel()
	r := redistest.NewReplicated(t, 1)
	testkit.WaitReplicasOnline(t, r.Master, 1)
	ctx := testkit.CtxTimeout(t, 20*time.Second)
	for _, tc := range []struct {
		deny   []string
		refuse bool
		warn   string
	}{
		{[]string{"-info", "-wait"}, true, "refuses WAIT"},
		{[]string{"-info", "-wait", "-role"}, false, "may not run INFO, ROLE or WAIT"},
	} {
		t.Run(strings.Join(tc.deny, ""), func(t *testing.T) {
			var sink rsSink
			rules := append([]string{"~*", "&*", "+@all"}, tc.deny...)
			c := testkit.NewClient(t, aclClient(t, r.Master, rules...), sink.logger())
			for range 2 {
				l, err := c.Mutex(testkit.LockName(t)).Lock(ctx)
				if tc.refuse {
					if !errors.Is(err, relock.ErrReplicaSync) {
						t.Fatalf("Lock = %v, want ErrReplicaSync", err)
					}
					continue
				}
				if err != nil {
					t.Fatalf("Lock: %v", err)
				}
				if err := l.Unlock(ctx); err != nil {
					t.Fatal(err)
				}
			}
			c.Close() // the probe runs in the background too: wait for it
			log := sink.String()
			if n := strings.Count(log, "level=WARN"); n != 1 || !strings.Contains(log, tc.warn) {
				t.Fatalf("%d warnings, want 1 saying %q; log:\n%s", n, tc.warn, log)
			}
		})
	}
}

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
	testkit.WaitReplicasOnline(t, f.r.Master, 1)
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
	if err := s.TryAcquire(ctx, 2); err != nil {
		t.Fatalf("TryAcquire: %v", err)
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
	rsWantUndone(t, "TryAcquire", s.TryAcquire(ctx, 1))
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
	ok, err := fresh.TrySetPermits(ctx, 2)
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
	err := f.retry.Semaphore(f.sem.Name()).TryAcquire(tctx, 1)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Semaphore.TryAcquire with Retry: %v, want the deadline's error", err)
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

// TestReplicaSyncLostWriteReply: a synced write whose reply is lost is run
// again with its request marker, followed by PEXPIRE of the marker and a
// WAIT in one pipeline, and is applied once. With the replica stopped, the
// WAIT after the call run again falls short although that call found the
// first one applied: the change is reported as not confirmed.
func TestReplicaSyncLostWriteReply(t *testing.T) {
	t.Parallel()
	r := redistest.NewReplicated(t, 1)
	testkit.WaitReplicasOnline(t, r.Master, 1)
	ctx := testkit.CtxTimeout(t, time.Minute)
	master := testkit.CloseLater(t, r.Master.Client())
	for _, tc := range []struct {
		name   string
		script *scripts.Script
		before int // the key's value before the write
		write  func(c *relock.Client, name string) error
		want   string // the key's value after one write
	}{
		{"CountDown", scripts.LatchCountDown, 5,
			func(c *relock.Client, name string) error { return c.CountDownLatch(name).CountDown(ctx) }, "4"},
		{"Release", scripts.SemRelease, 1,
			func(c *relock.Client, name string) error { return c.Semaphore(name).Release(ctx, 2) }, "3"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var log rsLog
			drop := &rsDropPiped{script: tc.script}
			rdb := testkit.CloseLater(t, r.Master.Client())
			rdb.AddHook(log.hook(r.Master.Addr))
			rdb.AddHook(drop)
			c := testkit.NewClient(t, rdb, relock.WithReplicaSync(relock.ReplicaSync{Replicas: 1}))
			// Load the script (on a name not set: nothing to count down).
			if err := tc.write(c, testkit.LockName(t)); err != nil && !errors.Is(err, relock.ErrLatchNotSet) {
				t.Fatal(err)
			}
			for _, stopped := range []bool{false, true} {
				name := testkit.LockName(t)
				if err := master.Set(ctx, name, tc.before, 0).Err(); err != nil {
					t.Fatal(err)
				}
				if stopped {
					if err := r.Replicas[0].Pause(); err != nil {
						t.Fatal(err)
					}
				}
				log.reset()
				drop.armed.Store(true)
				err := tc.write(c, name)
				if stopped {
					rsWantApplied(t, tc.name+" with a lost reply", err)
				} else if err != nil {
					t.Fatalf("%s with a lost reply: %v, want it resolved", tc.name, err)
				}
				if drop.dropped.Swap(0) != 1 {
					t.Fatal("no reply was dropped")
				}
				if got := rsGet(t, master, name); got != tc.want {
					t.Fatalf("%q on the master after a %s whose reply was lost, want %q (applied once)", got, tc.name, tc.want)
				}
				var pipes []string
				for _, trip := range rsScriptTrips(&log, tc.script) {
					pipes = append(pipes, strings.Join(trip.names(), " "))
				}
				if len(pipes) != 2 || pipes[0] != "evalsha wait" || pipes[1] != "eval pexpire wait" {
					t.Errorf("pipelines %q, want \"evalsha wait\" then \"eval pexpire wait\"", pipes)
				}
				if stopped {
					if err := r.Replicas[0].Resume(); err != nil {
						t.Fatal(err)
					}
				}
			}
		})
	}
}

// TestReplicaSyncSynchronizersPlain: without a WAIT to send (sync off on a
// master with a replica, or on by default on a server without replicas),
// every synchronizer write is the one EVALSHA it always was.
func TestReplicaSyncSynchronizersPlain(t *testing.T) {
	t.Parallel()
	r := redistest.NewReplicated(t, 1)
	testkit.WaitReplicasOnline(t, r.Master, 1)
	for _, tc := range []struct {
		name string
		srv  *redistest.Server
		opts []relock.Option
	}{
		{"off", r.Master, []relock.Option{relock.WithoutReplicaSync()}},
		{"no replicas", redistest.Standalone(t), nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var log rsLog
			c := syncedClient(t, tc.srv, &log, tc.opts...)
			ctx := testkit.CtxTimeout(t, 20*time.Second)
			if tc.opts == nil { // the Client's first reads run in the background
				testkit.Eventually(t, 5*time.Second, "the first reads", func() bool { return log.count("info") == 1 && log.count("config") == 1 })
			}
			synchronizerCalls(t, ctx, c) // loads the scripts
			log.reset()
			if n := synchronizerCalls(t, ctx, c); len(log.all()) != n {
				t.Errorf("%d round trips for %d calls, want one each", len(log.all()), n)
			}
			for _, trip := range log.all() {
				if n := trip.names(); len(n) != 1 || n[0] != "evalsha" {
					t.Errorf("round trip %v, want one EVALSHA", n)
				}
			}
		})
	}
}

// synchronizerCalls makes every synchronizer write once, on fresh names,
// and returns how many calls it made.
func synchronizerCalls(t *testing.T, ctx context.Context, c *relock.Client) int {
	t.Helper()
	n := 0
	call := func(err error) {
		t.Helper()
		n++
		if err != nil {
			t.Fatal(err)
		}
	}
	s := c.Semaphore(testkit.LockName(t))
	_, err := s.TrySetPermits(ctx, 3)
	call(err)
	call(s.TryAcquire(ctx, 1))
	call(s.Release(ctx, 1))
	call(s.AddPermits(ctx, 1))
	_, err = s.Drain(ctx)
	call(err)
	ps := c.PermitSemaphore(testkit.LockName(t))
	_, err = ps.TrySetPermits(ctx, 2)
	call(err)
	p, err := ps.TryAcquire(ctx, relock.WithLease(time.Minute))
	call(err)
	call(p.UpdateLease(ctx, time.Minute))
	call(p.Release(ctx))
	q, err := ps.TryAcquire(ctx, relock.WithLease(time.Minute))
	call(err)
	call(ps.UpdateLease(ctx, q.ID(), time.Minute))
	call(ps.Release(ctx, q.ID()))
	call(ps.AddPermits(ctx, 1))
	l := c.CountDownLatch(testkit.LockName(t))
	_, err = l.TrySetCount(ctx, 1)
	call(err)
	call(l.CountDown(ctx))
	if err := l.CountDown(ctx); !errors.Is(err, relock.ErrLatchNotSet) {
		t.Fatalf("CountDown of an open latch: %v", err)
	}
	return n + 1
}

// TestReplicaSyncSynchronizersCluster: on a cluster with replicas, the
// synchronizers' writes go with their WAIT to the master of their name's
// slot.
func TestReplicaSyncSynchronizersCluster(t *testing.T) {
	t.Parallel()
	c, cc, log := clusterWithLog(t)
	ctx := testkit.CtxTimeout(t, 20*time.Second)
	s := c.Semaphore(testkit.LockName(t))
	l := c.CountDownLatch(testkit.LockName(t))
	log.reset()
	if ok, err := s.TrySetPermits(ctx, 1); !ok || err != nil {
		t.Fatalf("TrySetPermits: %v %v", ok, err)
	}
	if err := s.Acquire(ctx, 1); err != nil {
		t.Fatal(err)
	}
	if err := s.Release(ctx, 1); err != nil {
		t.Fatal(err)
	}
	if ok, err := l.TrySetCount(ctx, 1); !ok || err != nil {
		t.Fatalf("TrySetCount: %v %v", ok, err)
	}
	if err := l.CountDown(ctx); err != nil {
		t.Fatal(err)
	}
	for _, x := range []struct {
		name   string
		script *scripts.Script
	}{
		{s.Name(), scripts.SemTrySetPermits}, {s.Name(), scripts.SemAcquire}, {s.Name(), scripts.SemRelease},
		{l.Name(), scripts.LatchTrySetCount}, {l.Name(), scripts.LatchCountDown},
	} {
		slot, err := cc.ClusterKeySlot(ctx, x.name).Result()
		if err != nil {
			t.Fatal(err)
		}
		master, err := testkit.Cluster.MasterForSlot(ctx, int(slot))
		if err != nil {
			t.Fatal(err)
		}
		trips := rsScriptTrips(log, x.script)
		if len(trips) == 0 {
			t.Errorf("%s: not sent", x.script.Name())
		}
		for _, trip := range trips {
			if got := strings.Join(trip.names(), " "); got != "evalsha wait" && got != "eval wait" || trip.node != master.Addr {
				t.Errorf("%s: %q sent to %s, want \"evalsha wait\" to the slot's master %s", x.script.Name(), got, trip.node, master.Addr)
			}
		}
	}
}

// TestReplicaSyncStandaloneOff: on a server without replicas, replica sync
// is off by default and an uncontended cycle costs exactly two calls.
func TestReplicaSyncStandaloneOff(t *testing.T) {
	t.Parallel()
	var log rsLog
	c := syncedClient(t, redistest.Standalone(t), &log)
	m := c.Mutex(testkit.LockName(t))
	ctx := testkit.CtxTimeout(t, 10*time.Second)
	// The Client's first reads of the server (INFO replication, CONFIG GET)
	// run in the background after New: wait for them, and load the scripts.
	testkit.Eventually(t, 5*time.Second, "the first reads", func() bool { return log.count("info") == 1 && log.count("config") == 1 })
	l, err := m.Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	log.reset()
	const cycles = 20
	for range cycles {
		l, err := m.Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := l.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	}
	trips := log.all()
	if len(trips) != 2*cycles {
		t.Errorf("%d round trips for %d cycles, want %d", len(trips), cycles, 2*cycles)
	}
	for _, s := range trips {
		if n := s.names(); len(n) != 1 || n[0] != "evalsha" {
			t.Fatalf("round trip %v, want one EVALSHA", n)
		}
	}
}

// TestReplicaSyncCluster: on a cluster with a replica per master, replica
// sync is on by default, each acquisition's WAIT goes to the master of its
// key's slot in the same pipeline, and locks across slots work.
func TestReplicaSyncCluster(t *testing.T) {
	t.Parallel()
	c, cc, log := clusterWithLog(t)
	ctx := testkit.CtxTimeout(t, 20*time.Second)
	var locks []relock.Locker
	masters := map[string]bool{}
	for i := range 6 {
		// Hash tags of slots 0 and 12739: the first and last master's.
		m := c.Mutex(fmt.Sprintf("%s:{%s}:%d", testkit.LockName(t), []string{"1bz", "za2"}[i%2], i))
		locks = append(locks, m)
		log.reset()
		l, err := m.Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		slot, err := cc.ClusterKeySlot(ctx, m.Name()).Result()
		if err != nil {
			t.Fatal(err)
		}
		master, err := testkit.Cluster.MasterForSlot(ctx, int(slot))
		if err != nil {
			t.Fatal(err)
		}
		masters[master.Addr] = true
		trips := lockTrips(log)
		if len(trips) == 0 {
			t.Fatal("no round trip carried lock.lua")
		}
		for _, trip := range trips {
			if got := strings.Join(trip.names(), " "); got != "evalsha wait" && got != "eval wait" || trip.node != master.Addr {
				t.Errorf("%q sent to %s, want \"evalsha wait\" to the slot's master %s", got, trip.node, master.Addr)
			}
		}
		if err := l.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if len(masters) < 2 {
		t.Fatalf("the names hashed to %d masters; pick others", len(masters))
	}
	l, err := relock.Multi(locks...).Lock(ctx)
	if err != nil {
		t.Fatalf("a MultiLock across slots: %v", err)
	}
	if err := l.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestReplicaSyncRefused: a server that refuses WAIT (renamed away, as
// managed services do) fails lock calls with ErrReplicaSync wrapping its
// error, or, with Fallback, is used without replica sync after one
// warning. WAITAOF, which Redis before 7.2 does not know, likewise.
func TestReplicaSyncRefused(t *testing.T) {
	t.Parallel()
	srv := redistest.Standalone(t, redistest.Options{Args: []string{`rename-command WAIT ""`}})
	ctx := testkit.CtxTimeout(t, 20*time.Second)
	aof := testkit.Standalone
	if major, minor := rsVersion(t, testkit.Standalone); major > 7 || major == 7 && minor >= 2 {
		aof = redistest.Standalone(t, redistest.Options{Args: []string{`rename-command WAITAOF ""`}})
	}
	for _, tc := range []struct {
		name string
		srv  *redistest.Server
		rs   relock.ReplicaSync
	}{
		{"WAIT", srv, relock.ReplicaSync{Replicas: 1}},
		{"WAITAOF", aof, relock.ReplicaSync{Replicas: 1, AOF: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var sink rsSink
			c := syncedClient(t, tc.srv, nil, relock.WithReplicaSync(tc.rs), sink.logger())
			m := c.Mutex(testkit.LockName(t))
			_, err := m.Lock(ctx)
			if !errors.Is(err, relock.ErrReplicaSync) || !strings.Contains(err.Error(), "unknown command") {
				t.Fatalf("Lock = %v, want ErrReplicaSync wrapping the server's refusal", err)
			}
			if keys := testkit.KeysOf(t, testkit.CloseLater(t, tc.srv.Client()), m.Name()); len(keys) != 0 {
				t.Fatalf("keys left behind: %v", keys)
			}

			// A sink of its own: the first Client's prober may still log.
			var fallback rsSink
			rs := tc.rs
			rs.Fallback = true
			c = syncedClient(t, tc.srv, nil, relock.WithReplicaSync(rs), fallback.logger())
			for range 2 {
				l, err := c.Mutex(testkit.LockName(t)).Lock(ctx)
				if err != nil {
					t.Fatalf("Lock with Fallback: %v", err)
				}
				if err := l.Unlock(ctx); err != nil {
					t.Fatal(err)
				}
			}
			if n := strings.Count(fallback.String(), "refuses "+tc.name); n != 1 {
				t.Errorf("%d warnings of the refusal, want 1:\n%s", n, fallback.String())
			}
		})
	}
}

// TestReplicaSyncOptions: invalid settings are refused by New.
func TestReplicaSyncOptions(t *testing.T) {
	t.Parallel()
	rdb := testkit.CloseLater(t, testkit.Standalone.Client())
	for _, opts := range [][]relock.Option{
		{relock.WithReplicaSync(relock.ReplicaSync{Replicas: -1})},
		{relock.WithReplicaSync(relock.ReplicaSync{Timeout: -time.Second})},
		{relock.WithReplicaSync(relock.ReplicaSync{Timeout: time.Microsecond})},
		{relock.WithReplicaSync(relock.ReplicaSync{Timeout: 5 * time.Second})},                                      // past the read timeout
		{relock.WithWatchdogTimeout(time.Second), relock.WithReplicaSync(relock.ReplicaSync{Timeout: time.Second})}, // past the renewal interval
	} {
		if c, err := relock.New(rdb, opts...); !errors.Is(err, relock.ErrInvalidOption) {
			if c != nil {
				_ = c.Close()
			}
			t.Errorf("New = %v, want ErrInvalidOption", err)
		}
	}
	ring := redis.NewRing(&redis.RingOptions{Addrs: map[string]string{"a": testkit.Standalone.Addr}})
	defer ring.Close()
	if _, err := relock.New(ring, relock.WithReplicaSync(relock.ReplicaSync{})); !errors.Is(err, relock.ErrUnsupportedClient) {
		t.Errorf("New(ring) = %v, want ErrUnsupportedClient", err)
	}
}
