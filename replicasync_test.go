package relock_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/history"
	"github.com/relock-go/relock/internal/redistest"
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
	rsWaitOnline(t, r.Master, 2)

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
	rsWaitOnline(t, r.Master, 1)

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
	rsWaitOnline(t, r.Master, 1)
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
	rsWaitOnline(t, r.Master, 0)
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
