package systest

import (
	"context"
	"fmt"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/layout"
	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/internal/testkit"
)

// TestFaultSentinel: a Sentinel group (master, two replicas, three
// sentinels) whose master is killed with SIGKILL while locks are held and
// contended, over several failovers, with replica sync off and on, for
// Mutexes, FairMutexes, RWMutexes (writers, with readers among the
// holders and contenders) and PermitSemaphores of kindPermits permits, a
// workload per kind of lock and replica-sync mode. Just before each kill,
// holders grab more locks (every permit of more semaphores) that waiters
// of other clients then queue for. Every other round the replication
// links are cut first: the replicas are stopped (so that they cannot
// reconnect) and the master closes their connections (CLIENT KILL TYPE
// replica), so the replica promoted after the kill never saw what the
// old master granted since.
//
// With sync off a lock granted by the old master and missing on the new
// one is granted again: those double grants (for a semaphore, over-grants:
// more permits held at once than it has) are expected and reported, not
// failed on. With sync on (ReplicaSync's defaults, and one replica
// required) an acquisition that no replica acknowledged is released and
// fails, and a renewal no replica acknowledged does not move the hold's
// local deadline, so every invariant is asserted, readers' tokens
// included. In every mode the locks and permits are granted again after
// every failover and no waiter is stranded.
//
// Every round runs every kind of lock (see sentinelPlans for the modes).
// The plain Semaphore is not among them: its permits have no holder and
// no lease, so a failover that loses an acquisition or a release changes
// its count for good (TestFaultPubSubKilled covers its waiters).
func TestFaultSentinel(t *testing.T) {
	t.Parallel()
	s := redistest.NewSentinel(t)
	// The holds that span a failover are kept by the watchdog, with a
	// lease much longer than a failover (a few seconds). Short holds take
	// a fixed lease instead, so that one whose release the new master
	// never saw blocks the lock for two seconds only.
	const lease = 15 * time.Second
	modes, kinds := replicaSyncs(), append(lockKinds(), permitKind)
	clients := make([][]*relock.Client, len(modes))
	for i, m := range modes {
		for range 3 {
			opts := append([]relock.Option{relock.WithWatchdogTimeout(lease)}, m.opts...)
			clients[i] = append(clients[i], testkit.Deployment{MasterName: s.MasterName, Sentinels: s.SentinelAddrs()}.Open(t, opts...))
		}
	}
	var plain, cut [][]sentinelTotal // kinds by modes
	for range kinds {
		plain, cut = append(plain, make([]sentinelTotal, len(modes))), append(cut, make([]sentinelTotal, len(modes)))
	}
	for r, p := range sentinelPlans(kinds, modes) {
		outs := sentinelRound(t, s, kinds, modes, clients, p)
		for i, o := range outs {
			k, m := kinds[p.loads[i].kind], modes[p.loads[i].mode]
			what := fmt.Sprintf("round %d, %s (replication cut: %v), sync %s", r, k.name, p.cut, m.name)
			if o.Stranded > 0 {
				t.Errorf("%s: %d stranded waiters", what, o.Stranded)
			}
			if m.on {
				o.requireSafe(t, what)
			}
			k.requireExercised(t, o, what)
			total := &plain[p.loads[i].kind][p.loads[i].mode]
			if p.cut {
				total = &cut[p.loads[i].kind][p.loads[i].mode]
			}
			total.runs++
			total.add(o)
		}
	}
	for ki, k := range kinds {
		for i, m := range modes {
			plain[ki][i].report(t, k, "sentinel-kill", "sync", m.name, "lease", lease)
			cut[ki][i].report(t, k, "sentinel-kill-replication-cut", "sync", m.name, "lease", lease)
		}
	}
}

// sentinelTotal sums the outcomes of the rounds of one kind, mode and
// fault.
type sentinelTotal struct {
	outcome
	runs int
}

// report logs the SAFETY line of the total, if it has runs.
func (s sentinelTotal) report(t testing.TB, k lockKind, scenario string, kv ...any) {
	t.Helper()
	if s.runs > 0 {
		s.outcome.report(t, k.scenario(scenario), s.runs, k.fields(s.outcome, kv...)...)
	}
}

// sentinelPlan is one failover round: whether the replication links are
// cut, and the workloads that run through it.
type sentinelPlan struct {
	cut   bool
	loads []sentinelLoad
}

// sentinelLoad is a workload of a round: indexes into the kinds of lock
// and the replica-sync modes.
type sentinelLoad struct{ kind, mode int }

// sentinelPlans returns the rounds: two in the quick suite, twelve under
// RELOCK_SOAK, the replication links cut in every other one. Each runs the
// Mutex in every mode. Under RELOCK_SOAK it runs the other kinds in every
// mode too; the quick suite runs them in one mode per round, sync off
// without the cut and on with it, to keep its rounds light.
func sentinelPlans(kinds []lockKind, modes []replicaSync) []sentinelPlan {
	var plans []sentinelPlan
	for r := range testkit.Rounds(2, 12) {
		p := sentinelPlan{cut: r%2 == 1}
		quick := 0 // the other kinds' mode in the quick suite: off
		if p.cut {
			quick = 1 // on, with ReplicaSync's defaults
		}
		for k := range kinds {
			for m := range modes {
				if k == 0 || testkit.Soaking() || m == quick { // kinds[0] is the Mutex
					p.loads = append(p.loads, sentinelLoad{k, m})
				}
			}
		}
		plans = append(plans, p)
	}
	return plans
}

// sentinelRound runs one failover: a workload per load of the plan, the
// grab (after cutting the replication links if the plan says so), the
// kill, the promotion, the old master back as a replica. It returns an
// outcome per load.
func sentinelRound(t *testing.T, s *redistest.Sentinel, kinds []lockKind, modes []replicaSync, clients [][]*relock.Client, p sentinelPlan) []outcome {
	t.Helper()
	ctx := testkit.CtxTimeout(t, 3*time.Minute)
	old, err := s.CurrentMaster(ctx)
	if err != nil {
		t.Fatal(err)
	}
	short, shortLease := holdFor(time.Millisecond, 5*time.Millisecond), relock.WithLease(2*time.Second)
	ws := make([]*workload, len(p.loads))
	tags, hots, grabs := make([]string, len(p.loads)), make([][]string, len(p.loads)), make([][]string, len(p.loads))
	start := time.Now()
	for i, ld := range p.loads {
		k, cs := kinds[ld.kind], clients[ld.mode]
		tag := k.tag(modes[ld.mode].name)
		w := newWorkloadOf(t, k, 60*time.Second)
		ws[i], tags[i] = w, tag
		hot, held := names(t, "hot-"+tag, 4), names(t, "held-"+tag, 6)
		hots[i], grabs[i] = hot, names(t, "grab-"+tag, 6)
		w.setPermits(cs[0], grabs[i]) // before the cut, for the new master to have them
		for c, cl := range cs {
			for j := range 3 {
				w.mix(j)(fmt.Sprintf("%s.c%d.hot%d", tag, c, j), cl, hot, short, shortLease)
			}
			w.contend(fmt.Sprintf("%s.c%d.poacher", tag, c), cl, held, short, shortLease)
		}
		for j := range len(held) * k.holders() { // every permit of a semaphore
			name := held[j/k.holders()]
			w.mix(j)(fmt.Sprintf("%s.c%d.holder%d", tag, j%3, j), cs[j%3], []string{name}, forever)
		}
		w.progressed(held, start, 30*time.Second)
	}
	time.Sleep(300 * time.Millisecond) // contention before the fault

	var replicas []*redistest.Server
	for _, srv := range s.Servers() {
		if srv != old {
			replicas = append(replicas, srv)
		}
	}
	if p.cut {
		for _, r := range replicas {
			if err := r.Pause(); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := old.Do(ctx, "CLIENT", "KILL", "TYPE", "replica"); err != nil {
			t.Fatal(err)
		}
	}
	for i, ld := range p.loads {
		k, cs := kinds[ld.kind], clients[ld.mode]
		n := len(cs)
		// Waiters that poll, as a client whose pub/sub connection is still
		// finding the new master would: they try the lock there as soon as
		// it answers. A semaphore's waiters do not spin: they wait on its
		// channel, and the hub wakes them when it reconnects.
		wait := []relock.LockOption{shortLease}
		if k.permits == 0 {
			wait = append(wait, relock.WithSpin(5*time.Millisecond, 50*time.Millisecond))
		}
		for j, name := range grabs[i] {
			for g := range k.holders() { // every permit of a semaphore
				at := j*k.holders() + g
				ws[i].mix(at)(fmt.Sprintf("%s.c%d.grab%d", tags[i], at%n, at), cs[at%n], []string{name}, forever)
			}
			ws[i].contend(fmt.Sprintf("%s.c%d.waiter%d", tags[i], (j+1)%n, j), cs[(j+1)%n], []string{name}, short, wait...)
		}
	}
	time.Sleep(250 * time.Millisecond) // the window the replicas miss when cut off
	if err := old.Kill(); err != nil {
		t.Fatal(err)
	}
	if p.cut {
		for _, r := range replicas {
			if err := r.Resume(); err != nil {
				t.Fatal(err)
			}
		}
	}
	master, err := s.WaitForNewMaster(ctx, old)
	if err != nil {
		t.Fatal(err)
	}
	promoted := time.Now()
	rejoin(t, ctx, old, master)

	rdb := testkit.CloseLater(t, master.Client())
	for i, w := range ws {
		w.progressed(hots[i], promoted, 60*time.Second)
		// Each grabbed lock is either still held on the new master, or was
		// granted again there.
		testkit.Eventually(t, 60*time.Second, "the grabbed locks to settle on the new master", func() bool {
			for _, name := range grabs[i] {
				if w.grantedSince(name, promoted) {
					continue
				}
				if held, err := heldOn(ctx, rdb, kinds[p.loads[i].kind], name); err != nil || !held {
					return false
				}
			}
			return true
		})
	}
	out := make([]outcome, len(ws))
	for i, w := range ws {
		w.stop(60 * time.Second)
		w.logNotes()
		out[i] = w.outcome()
	}
	waitSentinelHealthy(t, ctx, s)
	if now, err := s.CurrentMaster(ctx); err == nil && now != master {
		// Not this scenario (see redistest.Sentinel): the replica promoted
		// the second time may have acknowledged nothing, which replica
		// sync does not cover (docs/safety.md, "What WAIT does not
		// guarantee"). Logged, so that a failure it causes is explained.
		t.Logf("the sentinels failed over again during the round: the master is %s, not %s, promoted after the kill", now.Addr, master.Addr)
	}
	return out
}

// heldOn reports whether the lock name of kind k is held on rdb: its key
// exists, or, for a semaphore, a permit of it is held.
func heldOn(ctx context.Context, rdb *redis.Client, k lockKind, name string) (bool, error) {
	key := name
	if k.permits > 0 {
		key = layout.PermitTimeouts(name) // its held permits
	}
	n, err := rdb.Exists(ctx, key).Result()
	return n > 0, err
}

// rejoin restarts the killed master, empty, and makes it a replica of the
// new one at once, so that the group has two replicas again.
func rejoin(t *testing.T, ctx context.Context, old, master *redistest.Server) {
	t.Helper()
	if err := old.Restart(); err != nil {
		t.Fatal(err)
	}
	host, port, _ := net.SplitHostPort(master.Addr)
	if _, err := old.Do(ctx, "REPLICAOF", host, port); err != nil {
		t.Fatal(err)
	}
}

// grantedSince reports whether a hold of name began after since.
func (w *workload) grantedSince(name string, since time.Time) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.last[name].After(since)
}

// waitSentinelHealthy waits until the current master (the sentinels may
// have failed over again meanwhile, from a master too busy to answer)
// has both other data servers as replicas in sync, and every sentinel
// sees them, so that the next failover has a replica to promote and the
// group is as it began.
func waitSentinelHealthy(t *testing.T, ctx context.Context, s *redistest.Sentinel) {
	t.Helper()
	want := len(s.Servers()) - 1
	var last error
	healthy := func() error {
		ctx, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		master, err := s.CurrentMaster(ctx)
		if err != nil {
			return err
		}
		f, err := infoFields(ctx, master, "replication")
		if err != nil {
			return err
		}
		online := 0
		for i := range want {
			if containsField(f[fmt.Sprintf("slave%d", i)], "state=online") {
				online++
			}
		}
		if f["role"] != "master" || online != want {
			return fmt.Errorf("master %s: role %s, %d replicas online: %v", master.Addr, f["role"], online, f)
		}
		for _, sen := range s.Sentinels {
			v, err := sen.Do(ctx, "SENTINEL", "REPLICAS", s.MasterName)
			if err != nil {
				return err
			}
			list, _ := v.([]any)
			ok := 0
			for _, r := range list {
				m := pairsOf(r)
				if m["flags"] == "slave" && m["master-link-status"] == "ok" {
					ok++
				}
			}
			if ok < want {
				return fmt.Errorf("sentinel %s sees %d healthy replicas: %v", sen.Addr, ok, list)
			}
		}
		return nil
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		if last = healthy(); last == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the group does not have all its replicas again: %v", last)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// containsField reports whether a comma-separated INFO value holds f.
func containsField(v, f string) bool {
	return slices.Contains(strings.Split(v, ","), f)
}

// pairsOf turns a flat [k1 v1 k2 v2 ...] reply into a map.
func pairsOf(v any) map[string]string {
	list, _ := v.([]any)
	m := make(map[string]string, len(list)/2)
	for i := 0; i+1 < len(list); i += 2 {
		m[fmt.Sprint(list[i])] = fmt.Sprint(list[i+1])
	}
	return m
}
