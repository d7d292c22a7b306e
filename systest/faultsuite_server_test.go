package systest

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/internal/testkit"
)

// TestFaultServerPaused: a server stopped (SIGSTOP) for three leases while
// locks are held and contended: Mutexes, FairMutexes and RWMutexes (with
// readers among the holders and contenders) at once, each kind in a
// workload of its own. Every hold in progress is told of its loss while
// the server is still stopped, by its own deadline; after the server
// resumes every lock is granted again, no two holds overlap (but readers',
// with each other) and no loss is signalled after the next grant.
func TestFaultServerPaused(t *testing.T) {
	t.Parallel()
	const lease = 500 * time.Millisecond
	srv := redistest.Standalone(t)
	var clients []*relock.Client
	for range 3 {
		clients = append(clients, testkit.Deployment{Addr: srv.Addr}.Open(t, relock.WithWatchdogTimeout(lease)))
	}
	kinds := lockKinds()
	holder := func(k lockKind, i int) string { return fmt.Sprintf("%s%d.holder%d", k.tag("c"), i%len(clients), i) }
	n := testkit.Rounds(2, 10)
	total := make([]outcome, len(kinds))
	for r := range n {
		ws := make([]*workload, len(kinds))
		hots, helds := make([][]string, len(kinds)), make([][]string, len(kinds))
		start := time.Now()
		for ki, k := range kinds {
			w := newWorkloadOf(t, k, 20*time.Second)
			ws[ki] = w
			hot, held := names(t, k.tag("hot"), 3), names(t, k.tag("held"), 6)
			hots[ki], helds[ki] = hot, held
			for i, c := range clients {
				for j := range 3 {
					w.mix(j)(fmt.Sprintf("%s%d.hot%d", k.tag("c"), i, j), c, hot, holdFor(time.Millisecond, 5*time.Millisecond))
				}
				// Waiters for the held locks, granted them once they are lost.
				w.contend(fmt.Sprintf("%s%d.poacher", k.tag("c"), i), c, held, holdFor(time.Millisecond, 5*time.Millisecond))
			}
			for i, name := range held {
				w.mix(i)(holder(k, i), clients[i%len(clients)], []string{name}, forever)
			}
		}
		inProgress := make([][]grant, len(kinds))
		for ki, w := range ws {
			w.progressed(helds[ki], start, 10*time.Second)
			// A poacher may have been granted a held lock first: wait for
			// the holders, whose holds last until the fault.
			testkit.Eventually(t, 10*time.Second, "the holders to hold", func() bool {
				for i, name := range helds[ki] {
					if !w.holds(holder(kinds[ki], i), name) {
						return false
					}
				}
				return true
			})
			inProgress[ki] = w.holding(helds[ki])
		}
		if err := srv.Pause(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(3 * lease) // the fault: stopped past every lease (below go-redis's 3s read timeout)
		for ki, k := range kinds {
			for _, l := range inProgress[ki] {
				select {
				case <-l.Done():
				default:
					t.Errorf("%s round %d: a hold of %q in progress when the server stopped has not ended %v later", k.name, r, l.Name(), 3*lease)
				}
				if err := l.Err(); !errors.Is(err, relock.ErrLockLost) {
					t.Errorf("%s round %d: Err = %v while the server is stopped past the lease, want ErrLockLost", k.name, r, err)
				}
			}
		}
		// Taken before the resume: a holder granted its lock again in
		// between holds it until the workload stops (see below).
		resumed := time.Now()
		if err := srv.Resume(); err != nil {
			t.Fatal(err)
		}
		for ki, w := range ws {
			w.progressed(append(hots[ki], helds[ki]...), resumed, 20*time.Second)
		}
		for ki, k := range kinds {
			w := ws[ki]
			w.stop(30 * time.Second)
			o := w.outcome()
			what := fmt.Sprintf("%s round %d", k.name, r)
			o.requireSafe(t, what)
			k.requireExercised(t, o, what)
			if len(inProgress[ki]) == 0 {
				t.Errorf("%s: no hold in progress when the server stopped", what)
			}
			w.logNotes()
			total[ki].add(o)
		}
	}
	for ki, k := range kinds {
		total[ki].report(t, k.scenario("server-paused"), n, k.fields(total[ki], "sync", "n/a", "lease", lease)...)
	}
}

// TestFaultServerRestarted: a server restarted without persistence while
// locks are held and waited for. The data is gone, so the waiters may be
// granted the locks before their holders hear of it (reported, not
// failed); every holder is told of its loss, and the locks work after.
func TestFaultServerRestarted(t *testing.T) {
	t.Parallel()
	const lease = 600 * time.Millisecond
	srv := redistest.Standalone(t)
	holders := []*relock.Client{
		testkit.Deployment{Addr: srv.Addr}.Open(t, relock.WithWatchdogTimeout(lease)),
		testkit.Deployment{Addr: srv.Addr}.Open(t, relock.WithWatchdogTimeout(lease)),
	}
	waiter := testkit.Deployment{Addr: srv.Addr}.Open(t, relock.WithWatchdogTimeout(lease))
	n := testkit.Rounds(1, 5)
	var total outcome
	early := 0 // locks granted again before Restart returned
	for r := range n {
		w := newWorkload(t, 20*time.Second)
		held := names(t, "held", 8)
		start := time.Now()
		for i, name := range held {
			w.contend(fmt.Sprintf("holder%d", i), holders[i%2], []string{name}, forever)
		}
		w.progressed(held, start, 10*time.Second)
		inProgress := w.holding(held)
		for i, name := range held {
			w.contend(fmt.Sprintf("waiter%d", i), waiter, []string{name}, holdFor(time.Millisecond, 5*time.Millisecond))
		}
		testkit.Eventually(t, 10*time.Second, "the waiters to sleep", func() bool { return waiter.Stats().Asleep == int64(len(held)) })
		// Locks may be granted again on the new server before Restart
		// returns (it polls PING, then INFO), and a holder granted one
		// then holds it until the workload stops, so that no later grant
		// comes: progress counts from the kill, when the old server's
		// holds were gone.
		if err := srv.Kill(); err != nil {
			t.Fatal(err)
		}
		killed := time.Now()
		if err := srv.Restart(); err != nil {
			t.Fatal(err)
		}
		for _, name := range held {
			if w.grantedSince(name, killed) {
				early++
			}
		}
		for _, l := range inProgress {
			testkit.WaitDone(t, l.(*relock.Lease), 10*time.Second)
			if err := l.Err(); !errors.Is(err, relock.ErrLockLost) {
				t.Errorf("round %d: a hold on a restarted server ended with %v, want ErrLockLost", r, err)
			}
		}
		w.progressed(held, killed, 20*time.Second)
		w.stop(30 * time.Second)
		o := w.outcome()
		if o.Stranded > 0 {
			t.Errorf("round %d: %d stranded waiters", r, o.Stranded)
		}
		w.logNotes()
		total.add(o)
	}
	// Double grants and tokens going backwards are expected here: the
	// restart forgot the holds and the fencing counters.
	total.report(t, "server-restarted", n, "sync", "n/a", "lease", lease, "granted_before_restart_returned", early)
}
