package relock_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/redistest"
)

// TestFaultServerPaused: a server stopped (SIGSTOP) for three leases while
// locks are held and contended. Every hold in progress is told of its loss
// while the server is still stopped, by its own deadline; after the server
// resumes every lock is granted again, no two holds overlap and no loss is
// signalled after the next grant.
func TestFaultServerPaused(t *testing.T) {
	t.Parallel()
	const lease = 500 * time.Millisecond
	srv := redistest.Standalone(t)
	var clients []*relock.Client
	for range 3 {
		clients = append(clients, newClient(t, closeLater(t, srv.Client()), relock.WithWatchdogTimeout(lease)))
	}
	n := rounds(2, 10)
	var total outcome
	for r := range n {
		w := newWorkload(t, 20*time.Second)
		hot, held := names(t, "hot", 3), names(t, "held", 6)
		start := time.Now()
		for i, c := range clients {
			for j := range 3 {
				w.contend(fmt.Sprintf("c%d.hot%d", i, j), c, hot, holdFor(time.Millisecond, 5*time.Millisecond))
			}
			// Waiters for the held locks, granted them once they are lost.
			w.contend(fmt.Sprintf("c%d.poacher", i), c, held, holdFor(time.Millisecond, 5*time.Millisecond))
		}
		for i, name := range held {
			w.contend(fmt.Sprintf("c%d.holder%d", i%len(clients), i), clients[i%len(clients)], []string{name}, forever)
		}
		w.progressed(held, start, 10*time.Second)
		inProgress := w.holding(held)
		if err := srv.Pause(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(3 * lease) // the fault: stopped past every lease (below go-redis's 3s read timeout)
		for _, l := range inProgress {
			select {
			case <-l.Done():
			default:
				t.Errorf("round %d: a hold of %q in progress when the server stopped has not ended %v later", r, l.Name(), 3*lease)
			}
			if err := l.Err(); !errors.Is(err, relock.ErrLockLost) {
				t.Errorf("round %d: Err = %v while the server is stopped past the lease, want ErrLockLost", r, err)
			}
		}
		if err := srv.Resume(); err != nil {
			t.Fatal(err)
		}
		w.progressed(append(hot, held...), time.Now(), 20*time.Second)
		w.stop(30 * time.Second)
		o := w.outcome()
		o.requireSafe(t, fmt.Sprintf("round %d", r))
		if len(inProgress) == 0 {
			t.Errorf("round %d: no hold in progress when the server stopped", r)
		}
		w.logNotes()
		total.add(o)
	}
	total.report(t, "server-paused", n, "sync", "n/a", "lease", lease)
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
		newClient(t, closeLater(t, srv.Client()), relock.WithWatchdogTimeout(lease)),
		newClient(t, closeLater(t, srv.Client()), relock.WithWatchdogTimeout(lease)),
	}
	waiter := newClient(t, closeLater(t, srv.Client()), relock.WithWatchdogTimeout(lease))
	n := rounds(1, 5)
	var total outcome
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
		eventually(t, 10*time.Second, "the waiters to sleep", func() bool { return waiter.Stats().Asleep == int64(len(held)) })
		if err := srv.Restart(); err != nil {
			t.Fatal(err)
		}
		restarted := time.Now()
		for _, l := range inProgress {
			waitDone(t, l, 10*time.Second)
			if err := l.Err(); !errors.Is(err, relock.ErrLockLost) {
				t.Errorf("round %d: a hold on a restarted server ended with %v, want ErrLockLost", r, err)
			}
		}
		w.progressed(held, restarted, 20*time.Second)
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
	total.report(t, "server-restarted", n, "sync", "n/a", "lease", lease)
}
