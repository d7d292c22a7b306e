package conformance

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime/pprof"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/history"
	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/internal/slots"
	"github.com/relock-go/relock/internal/testkit"
)

// FaultClusterResharding runs 3 Clients x 4 goroutines on 20 names of every
// kind (Mutex, FairMutex, RWMutex readers and writers, a 2-permit
// Semaphore) on a cluster of its own while the names' slots are migrated
// to other masters the way redis-cli --cluster reshard moves them (held
// half-migrated a while, keys moved one by one), and a master fails over.
// Every hold goes to the history checker. Replica sync retries a
// shortfall of an acquisition (a failover's new master has no replica in
// sync for a moment); a Semaphore Release then applied on the master only
// (ErrUnconfirmed) is counted, not failed.
// No call may fail while the cluster is healthy: a MOVED, ASK or TRYAGAIN
// never reaches a caller, and no lease reports a loss after an Unlock that
// returned nil. A hold whose renewals could not get through for a whole
// lease is lost, and signalled: counted in the report, and checked, as
// every hold, for overlaps. Throughput, the longest wait and the
// holds of each phase go to the safety report.
func FaultClusterResharding(t *testing.T) {
	t.Parallel()
	c := redistest.NewCluster(t, 3, 1)
	ctx := testkit.CtxTimeout(t, 5*time.Minute)
	var clients []*relock.Client
	for range 3 {
		// Retry: a failover's new master has no replica in sync for a
		// moment, which fails acquisitions without it.
		clients = append(clients, testkit.Deployment{Addrs: c.Addrs()}.Open(t, relock.WithWatchdogTimeout(2*time.Second),
			relock.WithReplicaSync(relock.ReplicaSync{Retry: true})))
	}
	base := testkit.LockName(t)
	w := newReshardWorkload(base)
	for _, s := range w.sems {
		if _, err := clients[0].Semaphore(s).TrySetPermits(ctx, 2); err != nil {
			t.Fatal(err)
		}
	}

	run, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for i, cl := range clients {
		for g := range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				w.worker(run, cl, fmt.Sprintf("c%d-g%d", i, g), rand.New(rand.NewPCG(uint64(i), uint64(g))))
			}()
		}
	}

	phase := func(d time.Duration) float64 {
		before, start := w.holds.Load(), time.Now()
		select {
		case <-time.After(d):
		case <-ctx.Done():
		}
		return float64(w.holds.Load()-before) / time.Since(start).Seconds()
	}
	beforeRate := phase(time.Second)

	moving := time.Now()
	movesBefore := w.holds.Load()
	moved := 0
	var order []int
	for range testkit.Rounds(1, 3) { // there and on, several times in the soak
		order = append(order, w.slots()...)
	}
	for _, slot := range order {
		from, err := c.MasterForSlot(ctx, slot)
		if err != nil {
			t.Fatal(err)
		}
		to := c.Masters[0]
		for _, m := range c.Masters {
			if m != from {
				to = m
				break
			}
		}
		m, err := c.BeginMigration(ctx, slot, to)
		if err != nil {
			t.Fatal(err)
		}
		// Half-migrated: a key at a time, under traffic.
		for range 3 {
			if _, err := m.MoveKeys(ctx, 1); err != nil {
				t.Fatal(err)
			}
			time.Sleep(100 * time.Millisecond) // traffic meanwhile: the point of the scenario
		}
		if err := m.Finish(ctx); err != nil {
			t.Fatal(err)
		}
		moved++
	}
	if err := c.Failover(ctx, c.Masters[1]); err != nil {
		t.Fatal(err)
	}
	during := float64(w.holds.Load()-movesBefore) / time.Since(moving).Seconds()
	settled := time.Now()
	phase(time.Second) // the second in which it must recover
	afterRate := phase(2 * time.Second)
	if afterRate == 0 {
		w.dump(t, testkit.CloseLater(t, c.Client()), clients)
	}
	stop()
	wg.Wait()

	for _, v := range w.rec.Check() {
		t.Errorf("history: %v", v)
	}
	errs := w.errors()
	for _, e := range errs[:min(len(errs), 10)] {
		t.Errorf("surfaced: %v", e)
	}
	if len(errs) > 0 {
		t.Errorf("%d errors reached callers while slots moved", len(errs))
	}
	if afterRate == 0 {
		t.Errorf("no hold in the 2s after the moves settled: throughput did not recover")
	}
	testkit.Safety(t, "cluster-resharding", "slot moves", moved, "failovers", 1,
		"holds/s before", int(beforeRate), "during", int(during), "after", int(afterRate),
		"longest wait", w.longest(), "longest wait after", w.longestSince(settled),
		"holds", w.holds.Load(), "lost", w.lost.Load(), "releases unconfirmed", w.unconfirmed.Load(),
		"errors surfaced", len(errs))
}

// reshardWorkload is the names and records of TestFaultClusterResharding.
type reshardWorkload struct {
	mutexes, fairs, rws, sems []string
	rec                       *history.Recorder
	holds, lost, unconfirmed  atomic.Int64

	mu    sync.Mutex
	errs  []error
	waits []wait
}

type wait struct {
	kind  string
	start time.Time
	d     time.Duration
}

func newReshardWorkload(base string) *reshardWorkload {
	w := &reshardWorkload{rec: history.New()}
	for i := range 6 {
		w.mutexes = append(w.mutexes, fmt.Sprintf("%s:m%d", base, i))
		w.fairs = append(w.fairs, fmt.Sprintf("%s:f%d", base, i))
		w.rws = append(w.rws, fmt.Sprintf("%s:rw%d", base, i))
	}
	w.sems = []string{base + ":s0", base + ":s1"}
	return w
}

// slots returns the distinct slots of the workload's names.
func (w *reshardWorkload) slots() []int {
	seen := map[int]bool{}
	var out []int
	for _, names := range [][]string{w.mutexes, w.fairs, w.rws, w.sems} {
		for _, n := range names {
			if s := slots.Of(n); !seen[s] {
				seen[s] = true
				out = append(out, s)
			}
		}
	}
	sort.Ints(out)
	return out
}

// worker takes a random lock of a random kind, holds it a moment and
// lets it go, until ctx ends.
func (w *reshardWorkload) worker(ctx context.Context, c *relock.Client, who string, r *rand.Rand) {
	for ctx.Err() == nil {
		start := time.Now()
		var err error
		switch k := r.IntN(5); k {
		case 0:
			err = w.hold(ctx, who, "mutex", c.Mutex(w.mutexes[r.IntN(len(w.mutexes))]).Lock, false)
		case 1:
			err = w.hold(ctx, who, "fair", c.FairMutex(w.fairs[r.IntN(len(w.fairs))]).Lock, false)
		case 2:
			err = w.hold(ctx, who, "write", c.RWMutex(w.rws[r.IntN(len(w.rws))]).Lock, false)
		case 3:
			err = w.hold(ctx, who, "read", c.RWMutex(w.rws[r.IntN(len(w.rws))]).RLock, true)
		case 4:
			s := c.Semaphore(w.sems[r.IntN(len(w.sems))])
			if err = s.Acquire(ctx, 1); err == nil {
				w.waited("semaphore", start)
				time.Sleep(time.Millisecond)
				err = s.Release(context.WithoutCancel(ctx), 1)
				if errors.Is(err, relock.ErrUnconfirmed) {
					// Released on a master whose replica has not caught
					// up (after the failover): the documented outcome of
					// a write that cannot be undone, not an error.
					w.unconfirmed.Add(1)
					err = nil
				}
				w.holds.Add(1)
			}
		}
		if err != nil && ctx.Err() == nil {
			w.mu.Lock()
			w.errs = append(w.errs, err)
			w.mu.Unlock()
		}
	}
}

// hold takes a lock with lock, records the hold, and releases it.
func (w *reshardWorkload) hold(ctx context.Context, who, kind string, lock func(context.Context, ...relock.LockOption) (*relock.Lease, error), shared bool) error {
	start := time.Now()
	l, err := lock(ctx)
	if err != nil {
		return err
	}
	w.waited(kind, start)
	var h *history.Hold
	if shared {
		h = w.rec.BeginShared(who, l.Name(), l.Token())
	} else {
		h = w.rec.Begin(who, l.Name(), l.Token())
	}
	time.Sleep(time.Millisecond)
	if l.Err() != nil {
		h.Lost() // signalled: counted, and checked for overlap
		w.lost.Add(1)
		return nil
	}
	h.End()
	w.holds.Add(1)
	err = l.Unlock(context.WithoutCancel(ctx))
	if errors.Is(err, relock.ErrNotHeld) && errors.Is(l.Err(), relock.ErrLockLost) {
		w.lost.Add(1) // lost after the check above, and signalled
		return nil
	}
	if err != nil {
		return err
	}
	if err := l.Err(); !errors.Is(err, relock.ErrReleased) {
		return fmt.Errorf("%s lease after an Unlock that returned nil: %w", kind, err)
	}
	return nil
}

func (w *reshardWorkload) waited(kind string, start time.Time) {
	w.mu.Lock()
	w.waits = append(w.waits, wait{kind, start, time.Since(start)})
	w.mu.Unlock()
}

func (w *reshardWorkload) errors() []error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]error(nil), w.errs...)
}

func (w *reshardWorkload) longest() wait { return w.longestSince(time.Time{}) }

// longestSince returns the longest wait of a call that began after t.
func (w *reshardWorkload) longestSince(t time.Time) wait {
	w.mu.Lock()
	defer w.mu.Unlock()
	var l wait
	for _, x := range w.waits {
		if x.start.After(t) && x.d > l.d {
			l = x
		}
	}
	return l
}

func (x wait) String() string { return fmt.Sprintf("%v (%s)", x.d.Round(time.Millisecond), x.kind) }

// dump logs what Redis holds for every name, and the Clients' counters,
// for a run that stalled.
func (w *reshardWorkload) dump(t *testing.T, rdb *redis.ClusterClient, clients []*relock.Client) {
	ctx := context.Background()
	for _, names := range [][]string{w.mutexes, w.fairs, w.rws, w.sems} {
		for _, n := range names {
			for _, k := range testkit.KeysOf(t, rdb, n) {
				typ, _ := rdb.Type(ctx, k).Result()
				ttl, _ := rdb.PTTL(ctx, k).Result()
				var v any
				if strings.Contains(k, "_request:") {
					continue // request markers: many, and told by their names
				}
				switch typ {
				case "hash":
					v, _ = rdb.HGetAll(ctx, k).Result()
				case "zset":
					v, _ = rdb.ZRangeWithScores(ctx, k, 0, -1).Result()
				case "list":
					v, _ = rdb.LRange(ctx, k, 0, -1).Result()
				case "string":
					v, _ = rdb.Get(ctx, k).Result()
				}
				t.Logf("%s (%s, pttl %v): %v", k, typ, ttl, v)
			}
		}
	}
	for i, c := range clients {
		t.Logf("client %d: %+v", i, c.Stats())
	}
	var b strings.Builder
	_ = pprof.Lookup("goroutine").WriteTo(&b, 1)
	t.Logf("goroutines:\n%s", b.String())
}
