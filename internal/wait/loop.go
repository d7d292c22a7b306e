package wait

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/relock-go/relock/internal/notify"
)

// Call is a waiting call as Loop runs it: the primitive's adapter. The
// releases of the Mutex, the RWMutex, the FairMutex and the
// PermitSemaphore may grant it what it waits for; the Semaphore's and the
// latch's never do (Tries).
type Call[N any] interface {
	// Attempt tries once; it reports whether the call is done, and if not
	// how long it may sleep at most.
	Attempt(ctx context.Context) (done bool, retry time.Duration, err error)
	// Accept takes a grant made to the call, and reports false when the
	// grant may have run out already: the call then attempts.
	Accept(g N) bool
	// Join makes the call's next attempts put it in the queue in Redis.
	// It is called before every attempt once the call's subscriptions are
	// confirmed (or after it joined its Client's run), so a call may
	// choose how it joins by what it has seen. A call that takes turns
	// (Wait.Turns) attempts without joining until it has its turn.
	Join()
	// Leave takes the call out of the queue as it returns undone, and
	// frees what another Client's release may have granted it meanwhile
	// (a release of this Client that claimed it frees what it passes to
	// the call itself).
	Leave()
}

// Confirmer is a Call that, once its release channel is confirmed, asks
// whether a message may have been missed in place of an attempt: no, and
// it sleeps on (a FairMutex call: is it first?).
type Confirmer interface {
	Confirmed(ctx context.Context) bool
}

// Tries is a Call that is never granted anything: it only attempts (a
// Semaphore's, a latch's).
type Tries[N any] func(ctx context.Context) (bool, time.Duration, error)

// Attempt implements Call.
func (f Tries[N]) Attempt(ctx context.Context) (bool, time.Duration, error) { return f(ctx) }

// Accept implements Call.
func (Tries[N]) Accept(N) bool { return false }

// Join implements Call.
func (Tries[N]) Join() {}

// Leave implements Call.
func (Tries[N]) Leave() {}

// Stats are a Client's counters of waiting calls.
type Stats struct {
	Waits, Wakeups atomic.Uint64 // calls that waited; times they were woken
	Asleep         atomic.Int64  // calls asleep now, counted once a release may claim them
}

// Env is what Loop needs of its Client.
type Env[O, N comparable] struct {
	Hub     *notify.Hub
	Closing <-chan struct{} // closed as the Client closes
	Closed  error           // returned once it has
	Stats   *Stats
	// Route is the hub's policy for a grant channel: it takes the news to
	// the waiter of its owner (List.Grant, List.Wake).
	Route notify.Policy
	// GrantTTL is the longest a grant to a waiter holds the lock before
	// the waiter has confirmed it: a call queued for grants attempts at
	// least that often, in case a grant went to a waiter ahead that died.
	GrantTTL time.Duration
	// Unwanted releases what was passed to a call that had returned.
	Unwanted func(O)
	// Now is the Client's watchdog clock, on which Wait.Sent counts.
	Now func() int64
}

// Wait is how a call waits.
type Wait[O, N comparable] struct {
	Op, Name string        // the call, for errors
	Channel  string        // its release channel
	Policy   notify.Policy // the hub's policy for Channel
	// ListenWhen, if not nil, makes the call listen on Channel only once
	// it is true (read after each attempt).
	ListenWhen *bool
	// Sub, if not nil, is the call's subscription to Channel, made before
	// its first attempt, which was sent (Sent) once the channel was
	// confirmed: with Joined, a release after that attempt reaches the
	// call, which owes no attempt once subscribed. Only for a call that
	// always listens (no ListenWhen).
	Sub *notify.Waiter

	List  *List[O, N] // the list the call is in
	Local string      // its name in List
	// Waiter is the call's waiter. With Claimable, a release of the
	// Client may claim it and pass it what it waits for.
	Waiter *Waiter[O, N]
	// Joinable, if not nil, tells that the call has made no attempt that
	// queued it: it joins its Client's run (List.JoinRun) if the run's
	// holder is joinable, and then sleeps at once until the run passes it
	// the lock or ends; otherwise it attempts.
	Joinable func(holder O) bool
	// Turns, if not nil, makes the call wait in the queue in Redis only
	// with its turn on Local among its Client's calls (see Turns): Turn if
	// it has it already, or else the one it waits for first (awaitTurn).
	Turns *Turns
	Turn  *Turn

	Grants string // the Client's grant channel; "" for a call never granted
	Joined bool   // the call's attempts queued it from the first
	Sent   int64  // with Joined: when the first was sent (watchdog clock), if known
	// WakeNext, with Hold, makes the call, as it returns, wake a fellow
	// waiter that may sleep on a time the call knew better: the end of
	// Hold, the lease it took, which may run out unannounced, or its own
	// retry time. Not for calls that learn of a free moment from their
	// queue in Redis (a FairMutex's).
	WakeNext bool
	Hold     time.Duration
}

// Loop sleeps between c's attempts until one is done or fails, a grant is
// accepted, a release of the Client passes the call what it waits for,
// ctx ends, or the Client closes; retry is how long to sleep first at
// most. It returns what a release of the Client passed the call, if
// anything. The call waits for its turn first, if it takes turns; it
// joins the queue in Redis once both its subscriptions are confirmed (or
// from its first attempt, with Joined), and leaves it before it
// unsubscribes, so that every Client in a queue listens on its release
// channel.
func Loop[O, N comparable](ctx context.Context, env *Env[O, N], wt Wait[O, N], c Call[N], retry time.Duration) (O, error) {
	var none O
	env.Stats.Waits.Add(1)
	l := &loop[O, N]{env: env, wt: wt, c: c, w: wt.Waiter, joined: wt.Joined, sent: wt.Sent, turn: wt.Turn, myTurn: wt.Turn != nil, clock: newRetryClock()}
	defer l.end()
	if wt.Turns != nil && wt.Turn == nil {
		if o, err := l.awaitTurn(ctx); err != nil || l.done {
			return o, err
		}
	}
	if err := l.subscribe(); err != nil {
		return none, err
	}
	l.add()
	check, _ := c.(Confirmer)
	l.timer = time.NewTimer(l.clock.next(retry, l.confirmed()))
	for {
		o, try, confirmed, err := l.sleep(ctx)
		if err != nil || o != none || l.done {
			return o, err
		}
		if !try || (confirmed && check != nil && !check.Confirmed(ctx)) {
			continue
		}
		if err := l.attempt(ctx); l.done || err != nil {
			return none, err
		}
	}
}

// loop is one run of Loop.
type loop[O, N comparable] struct {
	env *Env[O, N]
	wt  Wait[O, N]
	c   Call[N]
	w   *Waiter[O, N]

	sub            *notify.Waiter  // on the release channel, once listened to
	wakes, ready   <-chan struct{} // its messages and confirmation
	gsub           *notify.Waiter  // on the grant channel
	grants, gready <-chan struct{} // its reconnects and confirmation

	added  bool  // w is in the list
	inRun  bool  // w joined its Client's run without an attempt
	sent   int64 // when the call queued (Wait.Sent), or joined its Client's run
	turn   *Turn // its turn (Wait.Turns), once it waits for it or has it
	myTurn bool  // it has the turn
	clock  retryClock
	timer  *time.Timer
	done   bool // the call got what it waits for
	joined bool // it may be in the queue in Redis
}

// subscribe listens on the release channel (unless the call listens only
// later) and on the grant channel.
func (l *loop[O, N]) subscribe() error {
	if err := l.listen(); err != nil {
		return err
	}
	wt := l.wt
	if wt.Grants != "" {
		gsub, err := l.env.Hub.Subscribe(wt.Grants, l.env.Route)
		if err != nil {
			return l.env.Closed
		}
		l.gsub = gsub
		l.grants, l.gready = gsub.Wake(), gsub.Ready()
	}
	return nil
}

// listen subscribes the release channel, once the call listens there.
func (l *loop[O, N]) listen() error {
	if l.sub != nil || (l.wt.ListenWhen != nil && !*l.wt.ListenWhen) {
		return nil
	}
	if l.wt.Sub != nil {
		l.sub = l.wt.Sub
	} else {
		sub, err := l.env.Hub.Subscribe(l.wt.Channel, l.wt.Policy)
		if err != nil {
			return l.env.Closed
		}
		l.sub = sub
	}
	l.wakes, l.ready = l.sub.Wake(), l.sub.Ready()
	return nil
}

// confirmed reports whether every subscription of the call is confirmed:
// a release from then on wakes it.
func (l *loop[O, N]) confirmed() bool { return l.ready == nil && l.gready == nil }

// add puts the call's waiter in its list, unless it is there since it
// waited for its turn, and has it join its Client's run if it may.
func (l *loop[O, N]) add() {
	w, wt := l.w, l.wt
	if w.Claimable && l.sub != nil {
		w.Sub = l.sub // a release that passes w the lock may close it for w
	}
	switch {
	case l.added:
	case wt.Joinable != nil:
		l.inRun = wt.List.JoinRun(wt.Local, w, wt.Joinable)
	default:
		wt.List.Add(wt.Local, w)
	}
	l.added = true
	if l.inRun {
		l.joined, l.sent = false, l.env.Now() // not in the queue in Redis
	}
	if (l.joined || l.inRun) && l.sent != 0 {
		// Every grant since the call queued (or joined the run) reaches it
		// (a grant that came before its waiter was added waits for it; see
		// News), and a re-subscription from now on wakes it: no attempt is
		// owed. The same for its release channel, if it subscribed before
		// it queued.
		if l.gsub != nil && l.env.Hub.ConfirmedBefore(wt.Grants, l.sent) {
			l.gready = nil
		}
		if wt.Sub != nil && l.joined && l.env.Hub.ConfirmedBefore(wt.Channel, l.sent) {
			l.ready = nil
		}
	}
	if wt.Grants != "" {
		// A grant to a waiter ahead that has died holds the lock for
		// GrantTTL, and nobody announces its end: the call finds out by
		// attempting at least that often.
		l.clock.most = l.env.GrantTTL
	}
}

// end undoes what the run set up, in order: the waiter leaves its list
// (waking a fellow call, and releasing what was passed to it too late),
// the call leaves the queue in Redis and its turn (so that the next call
// to have it finds the channels subscribed), and then the subscriptions
// go.
func (l *loop[O, N]) end() {
	var none O
	if l.timer != nil {
		l.timer.Stop()
	}
	if l.added {
		if l.wt.WakeNext {
			wakeNext(l.wt.List, l.wt.Local, l.w, l.done, l.wt.Hold, l.clock.due)
		}
		// A grant from another Client left untaken is not released here:
		// the call either holds what was granted already (its own attempt
		// found it granted) or leaves the queue (Leave), which releases it.
		if unwanted := l.wt.List.Remove(l.wt.Local, l.w); unwanted != none {
			l.env.Unwanted(unwanted)
		}
	}
	if !l.done && l.joined {
		l.c.Leave()
	}
	switch {
	case l.myTurn:
		l.wt.Turns.Leave(l.wt.Local, l.turn)
	case l.turn != nil:
		l.wt.Turns.Drop(l.wt.Local, l.turn)
	}
	if l.gsub != nil {
		l.gsub.Close()
	}
	if l.sub != nil {
		l.sub.Close()
	}
}

// sleep sleeps until something wakes the call, and returns what a
// release of the Client passed it (done), or whether it attempts now,
// and whether its release channel was just confirmed. A grant it accepts
// makes it done.
//
// Once subscribed, and a later attempt failed, only a grant, a message, a
// pass, a wake, the retry time or the end of ctx wake the call.
func (l *loop[O, N]) sleep(ctx context.Context) (o O, try, confirmed bool, err error) {
	var none O
	w, list, stats := l.w, l.wt.List, l.env.Stats
	asleep := l.confirmed()
	if asleep {
		if w.Claimable {
			list.Sleep(w)
		}
		// Counted once a release may claim it: a call that Stats shows
		// asleep may be passed the lock.
		stats.Asleep.Add(1)
	}
	try = true
	settled := false // a release of this Client settled its claim with nothing: attempt
	select {
	case <-l.ready:
		l.ready = nil // subscribed: a release from now on wakes us
		try, confirmed = l.gready == nil, true
	case <-l.gready:
		l.gready = nil
		try = l.ready == nil
	case <-l.wakes:
		stats.Wakeups.Add(1)
	case <-l.grants: // the grant channel was re-subscribed: a grant may be lost
		stats.Wakeups.Add(1)
	case o = <-w.outcome: // nil channel unless claimable
		l.done = o != none
		settled = !l.done
	case <-w.news:
		g, recheck, now := list.News(w)
		if g != *new(N) {
			l.done = l.c.Accept(g) // if not, it may have run out: attempt
			break
		}
		stats.Wakeups.Add(1)
		if !now {
			try = false
			if l.clock.sooner(recheck) {
				l.timer.Reset(recheck)
			}
		}
	case <-l.timer.C:
	case <-ctx.Done():
		err = l.ctxErr(ctx)
	case <-l.env.Closing:
		err = l.env.Closed
	}
	if asleep {
		stats.Asleep.Add(-1)
	}
	if err != nil || l.done {
		return o, false, false, err
	}
	if w.Claimable && asleep && !settled && !list.Rise(w) {
		// A release of this Client may be passing us the lock.
		o, err := l.awaitOutcome(ctx)
		l.done = o != none
		return o, true, confirmed, err
	}
	return none, try, confirmed, nil
}

// attempt makes one attempt, having the call join the queue first once
// both its subscriptions are confirmed (or as it leaves its Client's
// run), and sets the timer for the next.
func (l *loop[O, N]) attempt(ctx context.Context) error {
	if l.inRun || l.wt.Grants != "" && l.confirmed() {
		l.c.Join()
		l.joined = true
	}
	var next time.Duration
	var err error
	if l.done, next, err = l.c.Attempt(ctx); l.done || err != nil {
		return err
	}
	if err := l.listen(); err != nil {
		return err
	}
	l.timer.Reset(l.clock.next(next, l.confirmed()))
	return nil
}

// awaitOutcome waits, after Rise failed, for the outcome of the claim on
// the call's waiter: what it is passed, or nil to attempt.
func (l *loop[O, N]) awaitOutcome(ctx context.Context) (O, error) {
	var none O
	select {
	case o := <-l.w.outcome:
		return o, nil
	case <-ctx.Done():
		return none, l.ctxErr(ctx)
	case <-l.env.Closing:
		return none, l.env.Closed
	}
}

// ctxErr is the call's error when ctx ends.
func (l *loop[O, N]) ctxErr(ctx context.Context) error {
	return fmt.Errorf("relock: %s %q: %w", l.wt.Op, l.wt.Name, ctx.Err())
}

// Waiters never sleep past a free moment (docs/design.md). A release
// message wakes one waiter of a Client, which keeps the others asleep on
// the times their own last attempts were given. Two events make those
// times stale without any message, and the waiting call that sees them
// wakes another (wakeNext): it took the lock or permit for a lease, which
// may run out unannounced (a fixed lease left to expire, a hold lost), or
// it gave up, and its own retry time may have been the freshest the
// Client had.

// wakeNext is called as the call waiting in w returns: got tells whether
// it acquired, hold is the lease it took, due is when it would have tried
// again (zero: unknown). Another waiting call of the Client for the same
// name may sleep on a time that this one knew better: it is woken to
// attempt by then.
func wakeNext[O, N comparable](list *List[O, N], name string, w *Waiter[O, N], got bool, hold time.Duration, due time.Time) {
	var d time.Duration
	switch {
	case got && hold <= 0:
		return // nothing it took runs out
	case got:
		d = hold
	case !due.IsZero():
		d = max(time.Until(due), 0)
	default:
		return
	}
	list.WakeOther(name, w, d+time.Millisecond)
}
