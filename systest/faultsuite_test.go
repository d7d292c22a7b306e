package systest

// The fault suite: real servers killed, paused, restarted, failed over,
// cut off from their clients, while workers contend for locks and a
// history records every hold. Each scenario logs one machine-readable
// line per result, "SAFETY scenario=... key=value ...", which
// docs/safety.md tabulates. RELOCK_SOAK=1 makes every scenario run many
// more rounds.

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/history"
	"github.com/relock-go/relock/internal/testkit"
)

// workload runs lock workers and records every hold in a history. Before
// a hold is recorded as begun, the leases (or permits) of the holds of
// that name still in progress are asked for Err: one that reports
// ErrLockLost counts as told of its loss at that moment, whether or not
// its worker has woken up yet, which is what the holder would have seen
// had it checked.
//
// Its workers lock through the workload's kind of lock: exclusively, or
// shared (the readers of a read-write lock), whose holds the history
// lets overlap each other but no exclusive hold; or they take permits of
// a semaphore, whose holds the history lets overlap up to its number of
// permits.
type workload struct {
	t     testing.TB
	kind  lockKind
	rec   *history.Recorder
	bound time.Duration // a Lock call still waiting after this is stranded

	ctx    context.Context // cancelled by stop: ends waits and holds
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu    sync.Mutex
	open  map[string]map[*held]struct{} // holds in progress, per name
	last  map[string]time.Time          // when the latest hold of a name began
	ready map[string]bool               // semaphores whose permits are set

	lockErrs, unlockErrs, stranded, lost, stale atomic.Int64
	notes                                       []string // the first errors, for the log
}

// held is one hold in progress.
type held struct {
	l  grant
	h  *history.Hold
	at time.Time // when the hold began
}

// newWorkload returns a workload of Mutex workers.
func newWorkload(t testing.TB, bound time.Duration) *workload {
	return newWorkloadOf(t, mutexKind, bound)
}

// newWorkloadOf returns a workload whose workers lock the kind k.
func newWorkloadOf(t testing.TB, k lockKind, bound time.Duration) *workload {
	w := &workload{
		t:     t,
		kind:  k,
		rec:   history.New(),
		bound: bound,
		open:  make(map[string]map[*held]struct{}),
		last:  make(map[string]time.Time),
		ready: make(map[string]bool),
	}
	w.ctx, w.cancel = context.WithCancel(context.Background())
	t.Cleanup(w.cancel)
	return w
}

// holdFor returns a hold duration picker: uniform in [lo, hi].
func holdFor(lo, hi time.Duration) func() time.Duration {
	return func() time.Duration { return lo + rand.N(hi-lo+1) }
}

// forever holds until the lease is lost or the workload stops.
func forever() time.Duration { return time.Hour }

// contender is how a worker is started: contend or contendRead.
type contender func(who string, c *relock.Client, names []string, hold func() time.Duration, opts ...relock.LockOption)

// contend starts a worker that, until stop, locks one of names at random
// exclusively (or takes one of its permits) through c with opts, holds it
// for hold() (or until the hold is lost) and unlocks.
func (w *workload) contend(who string, c *relock.Client, names []string, hold func() time.Duration, opts ...relock.LockOption) {
	w.loop(who, w.kind.lock, c, names, hold, -1, nil, opts)
}

// contendRead is contend through the shared side of the workload's kind
// of lock.
func (w *workload) contendRead(who string, c *relock.Client, names []string, hold func() time.Duration, opts ...relock.LockOption) {
	w.loop(who, w.reader(), c, names, hold, -1, nil, opts)
}

// mix returns how the i-th worker of a group contends: exclusively, but
// every third (i%3 == 2) shared when the kind has a shared side.
func (w *workload) mix(i int) contender {
	if w.kind.read != nil && i%3 == 2 {
		return w.contendRead
	}
	return w.contend
}

// repeat starts a worker that locks one of names at random exclusively
// through c, holds it for hold() and unlocks, until it has held a lock
// count times (or stop). It closes done when it returns.
func (w *workload) repeat(who string, c *relock.Client, names []string, hold func() time.Duration, count int, done chan<- struct{}) {
	w.loop(who, w.kind.lock, c, names, hold, count, done, nil)
}

// repeatRead is repeat through the shared side of the workload's kind of
// lock.
func (w *workload) repeatRead(who string, c *relock.Client, names []string, hold func() time.Duration, count int, done chan<- struct{}) {
	w.loop(who, w.reader(), c, names, hold, count, done, nil)
}

// reader returns the shared side of the workload's kind of lock. It fails
// the test for a kind without one.
func (w *workload) reader() lockerOf {
	if w.kind.read == nil {
		w.t.Fatalf("a reader of a lock kind without a shared side")
	}
	return w.kind.read
}

// loop starts a worker that locks one of names at random through
// lock(c, name), holds it for hold() and unlocks, until it has held a
// lock count times (for ever with count < 0) or stop. It closes done, if
// any, when it returns. The permits of semaphores are set first.
func (w *workload) loop(who string, lock lockerOf, c *relock.Client, names []string, hold func() time.Duration, count int, done chan<- struct{}, opts []relock.LockOption) {
	w.setPermits(c, names)
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		if done != nil {
			defer close(done)
		}
		for held := 0; (count < 0 || held < count) && w.ctx.Err() == nil; {
			if w.once(who, lock(c, names[rand.N(len(names))]), hold(), opts...) {
				held++
			}
		}
	}()
}

// once is one round of a worker: lock, hold, unlock. It reports whether
// the lock was acquired. The hold is recorded as m's kind of hold.
func (w *workload) once(who string, m acquirer, hold time.Duration, opts ...relock.LockOption) bool {
	ctx, cancel := context.WithTimeout(w.ctx, w.bound)
	waitFrom := time.Now()
	l, err := m.acquire(ctx, opts...)
	cancel()
	if err != nil {
		switch {
		case w.ctx.Err() != nil: // stopping
			return false
		case errors.Is(err, context.DeadlineExceeded) && w.blocked(m, waitFrom):
			return false // a hold older than the wait is still in progress: try again
		case errors.Is(err, context.DeadlineExceeded):
			w.stranded.Add(1)
			w.note("%s: Lock(%s) still waiting after %v: %v", who, m.Name(), w.bound, err)
		default: // the server is down or failing over: try again shortly
			w.lockErrs.Add(1)
			w.note("%s: Lock(%s): %v", who, m.Name(), err)
		}
		sleepCtx(w.ctx, 20*time.Millisecond)
		return false
	}
	hd := w.begin(who, m, l)
	if hd == nil { // lost before it began: not a hold
		w.unlock(who, l)
		return false
	}
	timer := time.NewTimer(hold)
	select {
	case <-l.Done():
	case <-timer.C:
	case <-w.ctx.Done():
	}
	timer.Stop()
	w.end(hd)
	w.unlock(who, l)
	return true
}

// begin records the start of hold l of m, after telling the holds of the
// name in progress whose leases report a loss that they were told. A
// lease already lost when Lock returned it (its reply came after its
// deadline, through a stalled network) is no hold: begin counts it as
// stale and returns nil.
func (w *workload) begin(who string, m acquirer, l grant) *held {
	name := m.Name()
	w.mu.Lock()
	defer w.mu.Unlock()
	if l.Err() != nil {
		w.stale.Add(1)
		return nil
	}
	for o := range w.open[name] {
		if errors.Is(o.l.Err(), relock.ErrLockLost) {
			o.h.Signal()
		}
	}
	hd := &held{l: l, h: m.record(w.rec, who, l), at: time.Now()}
	if w.open[name] == nil {
		w.open[name] = make(map[*held]struct{})
	}
	w.open[name][hd] = struct{}{}
	w.last[name] = time.Now()
	return hd
}

// blocked reports whether a call for m that has waited since from could
// not have been granted all along: holds of its name that began before
// the wait are still in progress with their leases alive, and shut m out
// (an exclusive hold; a shared hold when m is exclusive; every permit).
// Such a call waits on a holder, as a poacher of a held lock does; it is
// not stranded.
func (w *workload) blocked(m acquirer, from time.Time) bool {
	_, shared := m.(reading)
	w.mu.Lock()
	defer w.mu.Unlock()
	permits := 0
	for hd := range w.open[m.Name()] {
		if !hd.at.Before(from) || hd.l.Err() != nil {
			continue
		}
		switch info := hd.h.Info(); {
		case info.Capacity > 0:
			if permits++; permits >= info.Capacity {
				return true
			}
		case !info.Shared || !shared:
			return true
		}
	}
	return false
}

// end records the end of a hold, before it is unlocked: lost if its lease
// says so, ended otherwise.
func (w *workload) end(hd *held) {
	w.mu.Lock()
	delete(w.open[hd.h.Info().Name], hd)
	w.mu.Unlock()
	if errors.Is(hd.l.Err(), relock.ErrLockLost) {
		w.lost.Add(1)
		hd.h.Lost()
		return
	}
	hd.h.End()
}

// unlock releases l, retrying while the server is unreachable (a
// failover may take seconds, and a hold left behind would be renewed for
// good and keep its lock from everyone else); a lease already lost gets
// one attempt.
func (w *workload) unlock(who string, l grant) {
	giveUp := time.Now().Add(30 * time.Second)
	for time.Now().Before(giveUp) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		err := l.Unlock(ctx)
		cancel()
		if err == nil || errors.Is(err, relock.ErrNotHeld) || errors.Is(err, relock.ErrClosed) {
			return
		}
		w.unlockErrs.Add(1)
		w.note("%s: Unlock(%s): %v", who, l.Name(), err)
		if l.Err() != nil {
			return // lost: the key, if any is left, expires
		}
		time.Sleep(50 * time.Millisecond)
	}
	w.note("%s: Unlock(%s) gave up after 30s: the hold stays until its Client closes", who, l.Name())
}

func (w *workload) note(format string, args ...any) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.notes) < 5 {
		w.notes = append(w.notes, fmt.Sprintf(format, args...))
	}
}

// progressed waits until every name has a hold that began after since:
// locks work again. It fails the test after bound.
func (w *workload) progressed(names []string, since time.Time, bound time.Duration) {
	w.t.Helper()
	deadline := time.Now().Add(bound)
	for {
		w.mu.Lock()
		var behind []string
		for _, n := range names {
			if !w.last[n].After(since) {
				behind = append(behind, n)
			}
		}
		notes := w.notes
		w.mu.Unlock()
		if len(behind) == 0 {
			return
		}
		if time.Now().After(deadline) {
			w.t.Fatalf("timed out after %v waiting for every lock to be granted again: not granted %v; notes %q", bound, behind, notes)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// stop ends the workers: waits and holds in progress end, holds are
// unlocked. It fails the test if they do not all return within bound.
func (w *workload) stop(bound time.Duration) {
	w.t.Helper()
	w.cancel()
	done := make(chan struct{})
	go func() { w.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(bound):
		w.t.Fatalf("workers still running %v after stop", bound)
	}
}

func (w *workload) logNotes() {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, n := range w.notes {
		w.t.Log(n)
	}
}

// sleepCtx sleeps for d or until ctx ends.
func sleepCtx(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

// names returns n lock names unique to the test, with a tag.
func names(t testing.TB, tag string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = testkit.LockName(t) + ":" + tag
	}
	return out
}

// holding returns the leases (or permits) of the holds in progress on
// names.
func (w *workload) holding(names []string) []grant {
	w.mu.Lock()
	defer w.mu.Unlock()
	var ls []grant
	for _, n := range names {
		for hd := range w.open[n] {
			ls = append(ls, hd.l)
		}
	}
	return ls
}

// holds reports whether who has a hold in progress on name.
func (w *workload) holds(who, name string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	for hd := range w.open[name] {
		if hd.h.Info().Who == who {
			return true
		}
	}
	return false
}

// permitSetter is a semaphore, whose permits are set before it is used.
type permitSetter interface {
	TrySetPermits(ctx context.Context, n int) (bool, error)
}

// setPermits gives the semaphores of names, for a kind that has them,
// the kind's number of permits through c, once per name. A count set on
// the master that too few replicas acknowledged in time is noted, not
// failed on: it reaches them a little later.
func (w *workload) setPermits(c *relock.Client, names []string) {
	w.t.Helper()
	if w.kind.permits == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(w.ctx, 10*time.Second)
	defer cancel()
	for _, name := range names {
		w.mu.Lock()
		ready := w.ready[name]
		w.mu.Unlock()
		if ready {
			continue
		}
		s, ok := w.kind.lock(c, name).(permitSetter)
		if !ok {
			w.t.Fatalf("%s: a kind with permits whose locks cannot set them", w.kind.name)
		}
		set, err := s.TrySetPermits(ctx, w.kind.permits)
		switch {
		case set && errors.Is(err, relock.ErrReplicaSync):
			w.note("TrySetPermits(%s): %v", name, err)
		case err != nil:
			w.t.Fatalf("TrySetPermits(%s): %v", name, err)
		case !set:
			w.t.Fatalf("TrySetPermits(%s): the semaphore had permits already", name)
		}
		w.mu.Lock()
		w.ready[name] = true
		w.mu.Unlock()
	}
}
