// Package wait is the one waiting core of relock: the calls of a Client
// that sleep between attempts (List), the loop every such call runs
// (Loop), whatever its primitive, and the state of a run of holds a
// Client passes on in process from one of its calls to the next (Run).
//
// Three verbs say how a lock, or a semaphore's permits, move between
// callers (relock's doc.go has the glossary):
//
//   - grant: Redis gives the lock to a queued waiter, in the script of a
//     release; a waiter of another Client learns of it on its Client's
//     grant channel (List.Grant).
//   - pass: a release gives what it frees to a waiting call of its own
//     Client, in process: it claims sleeping calls first (List.Claim), so
//     that none of them attempts meanwhile, and settles the claim with
//     the outcome (List.Settle, List.PassEach).
//   - wake: a waiter is woken to attempt, now or by a time (List.Wake,
//     List.WakeEach), by a message on a channel or by a fellow call that
//     knows better (wakeNext).
//
// A primitive brings its own attempt (the Call of Loop), which returns
// what it got (Result); a release reads what a claimed call asks for from
// its Waiter.
package wait

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/relock-go/relock/internal/notify"
)

// Hold is a hold of a lock as this package carries it: what a release of
// the Client passes to a waiting call in process (Settle), and the holder
// of the Client's run of a lock (SetRun). It is relock's *Lease, which
// this package only carries and compares; a call passed one returns it as
// what it got (Loop), so a release passes holds to lock calls only.
type Hold any

// Waiter is one call sleeping between attempts.
type Waiter struct {
	Owner string // the call's owner id; "" for a call never granted anything
	// What the call asks for, as a release that claims it reads it: a
	// lock call's lease (Fixed: not renewed by the watchdog) and its
	// member in the queue in Redis, as the release names it to its
	// script; a Semaphore call's permits. Member may change between
	// attempts, never while the call sleeps (sleep and Claim share a
	// lock).
	Lease   time.Duration
	Fixed   bool
	Member  string
	Permits int
	// Sub is the call's subscription to its release channel, once it
	// listens there (see Wait.Waiter for one made before its first
	// attempt): a release that passes it the lock may close it for the
	// call, off the call's path.
	Sub *notify.Waiter

	// claimable tells that a release of the Client may claim the call and
	// pass it what it waits for: only calls of one-shot owners, since a
	// reentrant owner's attempt could count a passed hold twice.
	claimable bool

	// guarded by List.mu
	quiet   bool          // it waits for its gate (Wait.Gate): no news is kept for it, no fellow call wakes it
	asleep  bool          // past its subscriptions and asleep: a release may claim it
	inRun   bool          // joined its Client's run without an attempt (joinRun): woken when the run ends
	claimed bool          // a release that may pass it something runs: no attempts
	blocked bool          // it woke while claimed and waits for the outcome
	gone    bool          // it returned while claimed: what it is passed is released
	passed  bool          // passed what it waits for without an outcome value (PassEach), not yet taken
	granted *Grant        // granted by another Client's release, not yet taken
	recheck time.Duration // to attempt again within this; 0 if not
	woken   bool          // to attempt now

	outcome chan Hold     // the outcome of a claim: what was passed, or nil to attempt
	news    chan struct{} // granted, recheck or woken was set
}

// NewWaiter returns a waiter of owner, which a release of the Client may
// claim if claimable.
func NewWaiter(owner string, claimable bool) *Waiter {
	w := &Waiter{Owner: owner, claimable: claimable, news: make(chan struct{}, 1)}
	if claimable {
		w.outcome = make(chan Hold, 1)
	}
	return w
}

// List is a Client's waiters of one kind of lock, by name, oldest first.
// Its zero value is empty and ready.
type List struct {
	mu      sync.Mutex
	n       atomic.Int64 // how many, read without mu
	byName  map[string][]*Waiter
	byOwner map[string]*Waiter
	mail    map[string]*mailed // by owner: news that came before its waiter was added
	pruned  time.Time          // when mail was last cleared of old news
	runs    map[string]Hold    // by name: the holder of the Client's run (see joinRun)
	nRuns   atomic.Int64       // len(runs), read without mu
}

// Len returns how many waiters the list has, without locking.
func (r *List) Len() int64 { return r.n.Load() }

// add registers w as a waiter for name, and gives it the news that came
// for its owner before.
func (r *List) add(name string, w *Waiter) {
	r.mu.Lock()
	r.addLocked(name, w)
	r.mu.Unlock()
	r.n.Add(1)
}

// addLocked is add, with mu held, except for the count.
func (r *List) addLocked(name string, w *Waiter) {
	if r.byName == nil {
		r.byName = make(map[string][]*Waiter)
		r.byOwner = make(map[string]*Waiter)
	}
	r.byName[name] = append(r.byName[name], w)
	r.own(w)
}

// own makes w the waiter of its owner, which news reaches, unless it is
// quiet, and gives it the news that came for its owner before. Called
// with mu held.
func (r *List) own(w *Waiter) {
	if w.Owner == "" || w.quiet {
		return
	}
	r.byOwner[w.Owner] = w
	if m := r.mail[w.Owner]; m != nil {
		delete(r.mail, w.Owner)
		w.note(m.g, m.recheck)
	}
}

// remove unregisters w as its call returns; a release that claimed it
// frees whatever it passes to w. It returns what was passed to w and w
// did not take (its call returned for another reason at the same moment),
// for the caller to release; nil if nothing.
func (r *List) remove(name string, w *Waiter) (unwanted Hold) {
	r.mu.Lock()
	w.gone = w.claimed
	if r.byOwner[w.Owner] == w {
		delete(r.byOwner, w.Owner)
	}
	ws := r.byName[name]
	for i, x := range ws {
		if x == w {
			ws = append(ws[:i], ws[i+1:]...)
			break
		}
	}
	if len(ws) == 0 {
		delete(r.byName, name)
	} else {
		r.byName[name] = ws
		if w.woken {
			// Woken to attempt and gone without: the next one attempts.
			if x := firstAwake(ws); x != nil {
				x.wake()
			}
		}
	}
	r.mu.Unlock()
	r.n.Add(-1)
	select {
	case unwanted = <-w.outcome:
	default:
	}
	return unwanted
}

// sleep marks w asleep: a release may now claim it.
func (r *List) sleep(w *Waiter) {
	r.mu.Lock()
	w.asleep = true
	r.mu.Unlock()
}

// rise marks w awake before it attempts. It fails, returning false, when
// a release has claimed w, which must then wait for the outcome.
//
// Rising also drops a stale outcome. A release may claim w just as w
// wakes for another reason, fail to pass the lock on and settle w with
// nil before w rises; w then attempts by itself and the nil stays behind.
// Left there, it would be read on a later sleep as the outcome of the next
// release that claims w, and w would attempt while that release passes it
// the lock: w would take the lock as its own, and the release, finding w
// gone, would free it under w's feet.
func (r *List) rise(w *Waiter) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if w.claimed {
		w.blocked = true
		return false
	}
	w.asleep = false
	select { // unclaimed, w can hold nothing but a stale outcome
	case <-w.outcome:
	default:
	}
	return true
}

// Claim claims, for a release, up to len(buf) of the oldest sleeping
// claimable waiters of name that fit takes, appending them to buf[:0]. fit
// is the primitive's claim policy, asked oldest first (nil: any): it
// reports whether the release may pass to w, and whether to look further.
func (r *List) Claim(name string, buf []*Waiter, fit func(w *Waiter) (take, more bool)) []*Waiter {
	ws := buf[:0]
	if r.n.Load() == 0 {
		return ws
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, w := range r.byName[name] {
		if !w.asleep || w.claimed || !w.claimable || w.passed {
			continue
		}
		take, more := true, true
		if fit != nil {
			take, more = fit(w)
		}
		if take {
			w.claimed = true
			ws = append(ws, w)
		}
		if !more || len(ws) == cap(buf) {
			break
		}
	}
	return ws
}

// ClaimOwner claims the waiter of owner for name for a release, if it is
// a sleeping claimable waiter not claimed already; nil otherwise.
func (r *List) ClaimOwner(name, owner string) *Waiter {
	if r.n.Load() == 0 {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	w := r.byOwner[owner]
	if w == nil || !w.asleep || w.claimed || !w.claimable {
		return nil
	}
	for _, x := range r.byName[name] {
		if x == w {
			w.claimed = true
			return w
		}
	}
	return nil
}

// Settle ends a release's claim on ws. The chosen one (if chosen >= 0) is
// passed p, and stays claimed: it takes p and never attempts; Settle
// reports false if that one has gone, leaving p to the caller to release.
// The others go back to sleep, except those that woke meanwhile, or all of
// them when the outcome is unknown (retry): they are woken to attempt.
func (r *List) Settle(ws []*Waiter, chosen int, p Hold, retry bool) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	delivered := false
	for i, w := range ws {
		switch {
		case i == chosen:
			if !w.gone {
				w.asleep = false
				delivered = w.pass(p)
			}
		case !w.gone && (retry || w.blocked):
			w.claimed, w.blocked, w.asleep = false, false, false
			w.pass(nil)
		default:
			w.claimed = false
		}
	}
	return delivered
}

// PassEach ends a release's claim on ws by passing each what it waits
// for, with no value to take (a semaphore's permits): each wakes, and its
// next attempt takes it (TakePassed) without asking Redis; it never sleeps
// again before. It returns those that had returned meanwhile, whose share
// the caller gives back.
func (r *List) PassEach(ws []*Waiter) (gone []*Waiter) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, w := range ws {
		if w.gone {
			gone = append(gone, w)
			continue
		}
		w.claimed, w.blocked, w.asleep = false, false, false
		w.passed = true
		// Woken as well: a call that took news of its own just before (a
		// time to attempt by, which alone would put it back to sleep)
		// finds it and attempts.
		w.wake()
		w.pass(nil)
	}
	return gone
}

// TakePassed reports whether w was passed what it waits for (PassEach)
// and has not taken it yet, and takes it. A call is passed at most once:
// none is claimed while it holds what it has not taken (Claim).
func (r *List) TakePassed(w *Waiter) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	passed := w.passed
	if passed {
		w.passed, w.woken = false, false
	}
	return passed
}

// pass gives w an outcome. The channel is empty whenever a release settles
// w (see rise); pass never blocks all the same.
func (w *Waiter) pass(p Hold) bool {
	select {
	case w.outcome <- p:
		return true
	default:
		return false
	}
}

// firstAwake returns the oldest of ws that may be woken by a fellow call:
// not one waiting for its gate, which attempts only once through.
func firstAwake(ws []*Waiter) *Waiter {
	for _, w := range ws {
		if !w.quiet {
			return w
		}
	}
	return nil
}
