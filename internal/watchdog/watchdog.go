// Package watchdog keeps many holds alive with one goroutine: every period
// it renews all of them in one batch, and it declares a hold lost the
// moment a renewal finds it gone or its local deadline passes without a
// confirmed renewal.
package watchdog

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"
)

// Drift is the safety margin taken off a lease when computing a hold's
// local deadline: lease/100 + 2ms, for clock-rate differences and timer
// lateness.
func Drift(lease time.Duration) time.Duration { return lease/100 + 2*time.Millisecond }

// Result is the outcome of renewing one entry.
type Result uint8

const (
	// Unknown: the renewal failed or was not answered; the deadline stands.
	Unknown Result = iota
	// Held: the hold is still there (and was extended if it has a Lease).
	Held
	// Gone: the key is gone or another owner holds it.
	Gone
)

// Renewer renews a batch of entries and returns one result per entry.
// It must return within ctx.
type Renewer func(ctx context.Context, batch []*Entry) []Result

// ErrGone is passed to Entry.Lost when a renewal found the hold gone.
var ErrGone = errors.New("hold gone or owned by another")

// ErrDeadline is passed to Entry.Lost when no renewal was confirmed
// before the hold's local deadline.
var ErrDeadline = errors.New("no renewal confirmed before the local deadline")

// Entry is one hold watched by a Watchdog. Fill the exported fields before
// Add; do not change them after.
type Entry struct {
	Key   string        // the lock key
	Owner string        // the owner id that must hold it
	Kind  uint8         // which renewal script renews it (the caller's numbering)
	Group int           // entries of one kind and group can share a call (cluster slot)
	Lease time.Duration // what a renewal extends the hold to; 0 only checks it
	Data  any           // the caller's, handed back to Config.Lost

	deadline    atomic.Int64 // monotonic ns since the watchdog's base
	state       atomic.Int32 // 0 new, 1 watched, 2 ended, 3 being lost (Config.Lost running)
	unconfirmed atomic.Bool  // not yet in Redis: its deadline runs, nothing renews it
	changing    atomic.Int32 // the holder's writes on their way (see Changing)
	changed     atomic.Int64 // 1 + when the holder last changed the hold; 0 never
	stopped     atomic.Bool  // no longer extended (see StopRenewal)
}

// Deadline returns the entry's local deadline on the watchdog's clock.
func (e *Entry) Deadline() int64 { return e.deadline.Load() }

// Ended reports whether the entry has ended: lost, or removed.
func (e *Entry) Ended() bool { return e.state.Load() >= 2 }

// Losing reports whether e is being declared lost this moment: Config.Lost
// is running for it, and e ends once it returns.
func (e *Entry) Losing() bool { return e.state.Load() == 3 }

// Renewal returns what a renewal extends e's hold to: its Lease, or 0
// (check only) once StopRenewal was called.
func (e *Entry) Renewal() time.Duration {
	if e.stopped.Load() {
		return 0
	}
	return e.Lease
}

// Stopped reports whether StopRenewal was called on e.
func (e *Entry) Stopped() bool { return e.stopped.Load() }

// Extend moves the deadline to d if that is later.
func (e *Entry) Extend(d int64) {
	for {
		cur := e.deadline.Load()
		if d <= cur || e.deadline.CompareAndSwap(cur, d) {
			return
		}
	}
}

// Config sets up a Watchdog.
type Config struct {
	Interval time.Duration // time between renewal rounds
	Renew    Renewer
	Lost     func(e *Entry, err error) // called once for each entry lost
	// Every, when not nil, is called in every round, every Interval,
	// whether or not there are entries to renew, beside the renewals (a
	// Client keeps its own keys alive with it).
	Every func(ctx context.Context)
	// Busy, when not nil, is called by Add when the watchdog goes from no
	// entries to some, after the entry is in and outside the watchdog's
	// lock (Len then counts it); it must not block.
	Busy   func()
	Logger *slog.Logger
}

// Watchdog renews holds in batches and detects their loss. It is safe for
// concurrent use.
type Watchdog struct {
	cfg  Config
	base time.Time

	mu      sync.Mutex
	entries map[*Entry]struct{}
	armed   int64    // when the loop will next wake on its own
	pending []*Entry // probes of entries to confirm (see Confirm)
	// Renewals asked for out of turn (see RenewAll and RenewKey): every
	// entry's, or those of the entries of these keys.
	allSoon  bool
	keysSoon map[string]bool

	kick   chan struct{}
	ctx    context.Context
	cancel context.CancelFunc
	done   chan struct{}
}

// New starts a Watchdog's goroutine; Close stops it.
func New(cfg Config) *Watchdog {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	ctx, cancel := context.WithCancel(context.Background())
	w := &Watchdog{
		cfg:     cfg,
		base:    time.Now(),
		entries: make(map[*Entry]struct{}),
		kick:    make(chan struct{}, 1),
		ctx:     ctx,
		cancel:  cancel,
		done:    make(chan struct{}),
	}
	go w.loop()
	return w
}

// Now returns the watchdog's monotonic clock in nanoseconds.
func (w *Watchdog) Now() int64 { return int64(time.Since(w.base)) }

// DeadlineFor returns the local deadline of a lease whose request was sent
// at sent (from Now): sent + lease - Drift(lease).
func DeadlineFor(sent int64, lease time.Duration) int64 {
	return sent + int64(lease-Drift(lease))
}

// Add starts watching e with the given deadline.
func (w *Watchdog) Add(e *Entry, deadline int64) {
	e.deadline.Store(deadline)
	e.state.Store(1)
	w.mu.Lock()
	w.entries[e] = struct{}{}
	early := deadline < w.armed
	first := len(w.entries) == 1
	w.mu.Unlock()
	if early {
		w.wake()
	}
	if first && w.cfg.Busy != nil {
		w.cfg.Busy()
	}
}

// AddUnconfirmed starts watching e, a hold not in Redis yet under its
// owner (a write that puts it there is on its way): its deadline runs, but
// no renewal touches it, since one that overtook the write would find it
// gone. Confirmed ends that.
func (w *Watchdog) AddUnconfirmed(e *Entry, deadline int64) {
	e.unconfirmed.Store(true)
	w.Add(e, deadline)
}

// Confirmed ends e's unconfirmed state (see AddUnconfirmed): the hold is
// in Redis with the given deadline, and renewed from now on.
func (w *Watchdog) Confirmed(e *Entry, deadline int64) {
	e.Extend(deadline)
	e.unconfirmed.Store(false)
}

// Changing tells w that the holder is changing e's hold in Redis: a write
// that may remove it (a release, or a switch passing it on) is on its way.
// A renewal that finds the hold gone then tells nothing about e if it is
// answered before the write ends (Changed), or was sent before the write
// began and answered after: it may have reached Redis after the write.
// Such a finding is dropped, e's deadline stands, and the write's own
// answer tells whether the hold was still there; if e is still watched
// after it, the next round asks again. Every Changing must be followed by
// Changed; a holder whose write removed the hold calls Remove first, so
// that no finding of a renewal that crossed the write is judged in
// between.
func (w *Watchdog) Changing(e *Entry) {
	e.changing.Add(1)
	e.touch(w.Now())
}

// Changed ends a Changing of e, whatever the write's outcome.
func (w *Watchdog) Changed(e *Entry) { e.changing.Add(-1) }

// Retaken tells w that e's hold was taken again in Redis by its owner (a
// reentrant owner's new acquisition now shares e): a renewal sent before
// that may have reached Redis between a release and the new acquisition,
// so its finding the hold gone is dropped, as after Changing.
func (w *Watchdog) Retaken(e *Entry) { e.touch(w.Now()) }

// touch records that the holder changed the hold at now.
func (e *Entry) touch(now int64) {
	for {
		cur := e.changed.Load()
		if now+1 <= cur || e.changed.CompareAndSwap(cur, now+1) {
			return
		}
	}
}

// changedSince reports whether the holder has changed e's hold since t,
// or is changing it now (see Changing): a renewal sent at t that found the
// hold gone may have met the holder's own write.
func (e *Entry) changedSince(t int64) bool {
	return e.changing.Load() > 0 || e.changed.Load() > t
}

// Lose declares e lost with err now, unless it has ended already.
func (w *Watchdog) Lose(e *Entry, err error) { w.lose(e, err) }

// StopRenewal stops extending e's hold: renewals only check it from now
// on, as for a fixed lease, and e is lost at its deadline unless removed
// first. A hold whose release failed ends this way, within its lease.
func (w *Watchdog) StopRenewal(e *Entry) { e.stopped.Store(true) }

// Remove stops watching e without calling Config.Lost. It reports whether e was
// still watched (false if it had been lost or removed already).
func (w *Watchdog) Remove(e *Entry) bool {
	if !e.state.CompareAndSwap(1, 2) {
		return false
	}
	w.mu.Lock()
	delete(w.entries, e)
	w.mu.Unlock()
	return true
}

// Check declares e lost if its deadline has passed, and reports whether it
// is lost. It lets a caller judge the deadline without waiting for the
// watchdog's goroutine, which may not have run yet.
func (w *Watchdog) Check(e *Entry) bool {
	if e.Ended() {
		return true
	}
	if e.Deadline() > w.Now() {
		return false
	}
	w.lose(e, ErrDeadline)
	return true
}

// Len returns the number of watched entries.
func (w *Watchdog) Len() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.entries)
}

func (w *Watchdog) lose(e *Entry, err error) {
	if !e.state.CompareAndSwap(1, 3) {
		return
	}
	w.mu.Lock()
	delete(w.entries, e)
	w.mu.Unlock()
	if w.cfg.Lost != nil {
		w.cfg.Lost(e, err)
	}
	e.state.CompareAndSwap(3, 2)
}

// Close calls Config.Lost with err for every entry, at once, and stops the
// goroutine, waiting for a renewal in flight to return (a server that does
// not answer holds it up until the client's read timeout); entries watched
// meanwhile are lost too.
func (w *Watchdog) Close(err error) {
	w.cancel()
	w.loseAll(err)
	<-w.done
	w.loseAll(err)
}

// loseAll calls lose with err for every entry.
func (w *Watchdog) loseAll(err error) {
	w.mu.Lock()
	left := make([]*Entry, 0, len(w.entries))
	for e := range w.entries {
		left = append(left, e)
	}
	w.mu.Unlock()
	for _, e := range left {
		w.lose(e, err)
	}
}

type round struct {
	sent    int64
	batch   []*Entry
	results []Result
	// For a round of confirmations: the watched entry each probe of the
	// batch stands for.
	targets []*Entry
}

// Confirm renews e to lease after the given time, outside the periodic
// rounds, without waiting: a hold taken with a short first lease (granted
// by another client's release) is extended to its own lease if it is still
// watched by then. Confirmations due together go in one round, after any
// round in flight. Held extends e's deadline by lease from the renewal's
// sending; otherwise the deadline stands.
func (w *Watchdog) Confirm(e *Entry, lease, after time.Duration) {
	probe := &Entry{Key: e.Key, Owner: e.Owner, Kind: e.Kind, Group: e.Group, Lease: lease, Data: e}
	due := w.Now() + int64(after)
	probe.deadline.Store(due) // a probe's deadline is when it is due
	w.mu.Lock()
	w.pending = append(w.pending, probe)
	early := due < w.armed
	w.mu.Unlock()
	if early {
		w.wake()
	}
}

// RenewAll renews every entry at once, outside the periodic rounds
// (after the round in flight, if any), without waiting: a caller that has
// reason to think holds may have gone unannounced (its pub/sub connection
// was made again: the server may have restarted or failed over) learns of
// it now rather than at the next round. Calls made before the round
// begins share it.
func (w *Watchdog) RenewAll() {
	w.mu.Lock()
	w.allSoon = true
	w.mu.Unlock()
	w.wake()
}

// RenewKey renews the entries of key at once, as RenewAll does every
// entry, without waiting: a caller told that the lock key may be gone (it
// was force-unlocked) checks, rather than believes it.
func (w *Watchdog) RenewKey(key string) {
	w.mu.Lock()
	if w.keysSoon == nil {
		w.keysSoon = make(map[string]bool)
	}
	w.keysSoon[key] = true
	w.mu.Unlock()
	w.wake()
}

// wake makes the loop look again at once.
func (w *Watchdog) wake() {
	select {
	case w.kick <- struct{}{}:
	default:
	}
}

// outOfTurn takes the renewals asked for out of turn: whether every entry is
// to be renewed, and else the entries of the keys asked for.
func (w *Watchdog) outOfTurn() (all bool, batch []*Entry) {
	w.mu.Lock()
	defer w.mu.Unlock()
	all, keys := w.allSoon, w.keysSoon
	w.allSoon, w.keysSoon = false, nil
	if all || keys == nil {
		return all, nil
	}
	for e := range w.entries {
		if keys[e.Key] && !e.unconfirmed.Load() {
			batch = append(batch, e)
		}
	}
	return false, batch
}

func (w *Watchdog) loop() {
	defer close(w.done)
	interval := int64(w.cfg.Interval)
	timer := time.NewTimer(w.cfg.Interval)
	defer timer.Stop()
	finished := make(chan round, 1)
	running := false
	nextRound := w.Now() + interval
	for {
		now := w.Now()
		earliest := w.expire(now)
		if !running {
			// A round asked for out of turn goes first: a round of every
			// entry counts as the periodic one.
			all, batch := w.outOfTurn()
			if all {
				nextRound = now
			} else if len(batch) > 0 {
				running = true
				go w.renew(now, batch, false, finished)
			}
		}
		if !running && now >= nextRound {
			nextRound = now + interval
			if batch := w.snapshot(); len(batch) > 0 || w.cfg.Every != nil {
				running = true
				go w.renew(now, batch, true, finished)
			}
		}
		nextConfirm := int64(1<<63 - 1)
		if !running {
			var probes, targets []*Entry
			probes, targets, nextConfirm = w.confirmations(now)
			if len(probes) > 0 {
				running = true
				go w.confirm(now, probes, targets, finished)
			}
		}
		next := min(nextRound, earliest, nextConfirm)
		w.mu.Lock()
		w.armed = next
		w.mu.Unlock()
		timer.Reset(time.Duration(next - now))
		select {
		case <-timer.C:
		case <-w.kick:
		case r := <-finished:
			running = false
			w.apply(r)
		case <-w.ctx.Done():
			if running {
				<-finished
			}
			return
		}
	}
}

// expire loses every entry past its deadline and returns the earliest
// deadline left.
func (w *Watchdog) expire(now int64) int64 {
	earliest := int64(1<<63 - 1)
	var late []*Entry
	w.mu.Lock()
	for e := range w.entries {
		d := e.Deadline()
		if d <= now {
			late = append(late, e)
		} else if d < earliest {
			earliest = d
		}
	}
	w.mu.Unlock()
	for _, e := range late {
		w.lose(e, ErrDeadline)
	}
	return earliest
}

func (w *Watchdog) snapshot() []*Entry {
	w.mu.Lock()
	defer w.mu.Unlock()
	batch := make([]*Entry, 0, len(w.entries))
	for e := range w.entries {
		if !e.unconfirmed.Load() {
			batch = append(batch, e)
		}
	}
	return batch
}

// renew runs a round of renewals of batch, with Config.Every beside them
// when every is set.
func (w *Watchdog) renew(sent int64, batch []*Entry, every bool, finished chan<- round) {
	ctx, cancel := context.WithTimeout(w.ctx, w.cfg.Interval)
	defer cancel()
	everyDone := make(chan struct{})
	if every && w.cfg.Every != nil {
		go func() {
			defer close(everyDone)
			w.cfg.Every(ctx)
		}()
	} else {
		close(everyDone)
	}
	var results []Result
	if len(batch) > 0 {
		results = w.cfg.Renew(ctx, batch)
	}
	<-everyDone
	finished <- round{sent: sent, batch: batch, results: results}
}

// confirmations takes the pending probes due by now whose entries are
// still watched, drops those no longer watched, and returns when the next
// one left is due.
func (w *Watchdog) confirmations(now int64) (probes, targets []*Entry, next int64) {
	next = 1<<63 - 1
	w.mu.Lock()
	defer w.mu.Unlock()
	left := w.pending[:0]
	for _, p := range w.pending {
		e := p.Data.(*Entry)
		switch due := p.Deadline(); {
		case e.state.Load() != 1 || e.Stopped():
		case due <= now:
			probes, targets = append(probes, p), append(targets, e)
		default:
			left = append(left, p)
			next = min(next, due)
		}
	}
	clear(w.pending[len(left):])
	w.pending = left
	return probes, targets, next
}

func (w *Watchdog) confirm(sent int64, probes, targets []*Entry, finished chan<- round) {
	ctx, cancel := context.WithTimeout(w.ctx, w.cfg.Interval)
	defer cancel()
	finished <- round{sent: sent, batch: probes, results: w.cfg.Renew(ctx, probes), targets: targets}
}

func (w *Watchdog) apply(r round) {
	if r.targets != nil {
		// A confirmation that finds the hold gone leaves its deadline: the
		// hold may have been released meanwhile, and the entry removed
		// only after.
		for i, e := range r.targets {
			if r.results[i] == Held {
				e.Extend(DeadlineFor(r.sent, r.batch[i].Lease))
			}
		}
		return
	}
	for i, e := range r.batch {
		switch r.results[i] {
		case Held:
			if e.Renewal() > 0 {
				e.Extend(DeadlineFor(r.sent, e.Lease))
			}
		case Gone:
			if e.changedSince(r.sent) {
				w.cfg.Logger.Debug("relock: a renewal that crossed the holder's own write found the hold gone; its deadline stands",
					"key", e.Key)
				continue
			}
			w.lose(e, ErrGone)
		}
	}
}

// Verify renews e at once, outside the periodic rounds, and applies the
// outcome as a round would: Held extends its deadline, Gone loses it
// (unless the holder changed the hold meanwhile, see Changing). It
// returns the outcome; Unknown for an entry no longer watched or not yet
// confirmed (see AddUnconfirmed), or when the renewal was not answered
// within ctx.
func (w *Watchdog) Verify(ctx context.Context, e *Entry) Result {
	if e.state.Load() != 1 || e.unconfirmed.Load() {
		return Unknown
	}
	sent := w.Now()
	batch := []*Entry{e}
	results := w.cfg.Renew(ctx, batch)
	w.apply(round{sent: sent, batch: batch, results: results})
	return results[0]
}
