package wait

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/relock-go/relock/internal/notify"
)

// Result is what one attempt of a waiting call got.
type Result[R comparable] struct {
	Got R // what the attempt took; the zero value: nothing
	// Retry is, when nothing was taken, how long the call sleeps at most
	// before it attempts again; 0 keeps the time it had (it made no
	// attempt: a check found nothing it missed).
	Retry time.Duration
	// Listen makes the call listen on its release channel from now on:
	// a call whose holder only grants need not (see relock's grant.go).
	Listen bool
}

// Call is a waiting call as Loop runs it: the primitive's adapter. R is
// what it gets: a lease, a permit, or true.
type Call[R comparable] interface {
	// Attempt tries once. confirmed tells that the call's release channel
	// has just been confirmed and nothing else woke it: a message may have
	// been missed before, and a call that can tell more cheaply that none
	// was meant for it may check that instead (Result.Retry 0).
	Attempt(ctx context.Context, confirmed bool) (Result[R], error)
	// Accept takes a grant made to the call, and returns the zero value
	// when the grant may have run out already: the call then attempts.
	Accept(g *Grant) R
	// Join makes the call's next attempts put it in the queue in Redis.
	// It is called before every attempt once the call's subscriptions are
	// confirmed (or after it joined its Client's run), so a call may
	// choose how it joins by what it has seen.
	Join()
	// End is called as the call returns, after its waiter has left its
	// list and before its subscriptions go: queued tells that it may be
	// in the queue in Redis without what it waits for. It leaves the
	// queue then, freeing what another Client's release may have granted
	// it meanwhile (a release of this Client that claimed it frees what
	// it passes to the call itself).
	End(queued bool)
}

// Stats are a Client's counters of waiting calls.
type Stats struct {
	Waits, Wakeups atomic.Uint64 // calls that waited; times they were woken
	Asleep         atomic.Int64  // calls asleep now, counted once a release may claim them
}

// Env is what Loop needs of its Client, for the calls of one of its lists.
type Env struct {
	List    *List // the list the calls are in
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
	Unwanted func(Hold)
	// Now is the Client's watchdog clock, on which Wait.Sent counts.
	Now func() int64
}

// Wait is how a call waits.
type Wait struct {
	Op, Name string        // the call, for errors
	Channel  string        // its release channel
	Policy   notify.Policy // the hub's policy for Channel

	Local string // the call's name in its list
	// Waiter is the call's waiter. If claimable (NewWaiter), a release of the
	// Client may claim it and pass it what it waits for. Its Sub, if set,
	// is the call's subscription to Channel, made before its first
	// attempt, which was sent (Sent) once the channel was confirmed: with
	// Joined, a release after that attempt reaches the call, which owes no
	// attempt once subscribed.
	Waiter *Waiter
	// Joinable, if not nil, tells that the call has made no attempt that
	// queued it: it joins its Client's run (List.joinRun) if the run's
	// holder is joinable, and then sleeps at once until the run passes it
	// the lock or ends; otherwise it attempts.
	Joinable func(holder Hold) bool
	// Gate, if not nil, holds the call back, quiet, until it receives: it
	// neither joins the queue in Redis nor listens before (an RWMutex
	// writer's turn; see awaitGate).
	Gate <-chan struct{}

	Grants string // the Client's grant channel; "" for a call never granted
	Joined bool   // the call's attempts queued it from the first
	Sent   int64  // with Joined: when the first was sent (watchdog clock), if known
	// Hold, if set, makes the call, as it returns, wake a fellow waiter
	// that may sleep on a time the call knew better: the end of the lease
	// it took, Hold, which may run out unannounced, or its own retry time.
	// Not for calls that learn of a free moment from their queue in Redis
	// (a FairMutex's).
	Hold time.Duration
}

// Loop sleeps between c's attempts until one takes what the call waits
// for or fails, a grant is accepted, a release of the Client passes the
// call what it waits for, ctx ends, or the Client closes; first is the
// result of the call's first attempt, made before. It returns what an
// attempt or a grant got, or what a release passed (a Hold, which must be
// an R: only lock calls are passed one). A call with a Gate waits for it
// first; it joins the queue in Redis once both its subscriptions are
// confirmed (or from its first attempt, with Joined), and leaves it
// before it unsubscribes, so that every Client in a queue listens on its
// release channel.
func Loop[R comparable](ctx context.Context, env *Env, wt Wait, c Call[R], first Result[R]) (got R, err error) {
	env.Stats.Waits.Add(1)
	l := &loop[R]{env: env, wt: wt, c: c, w: wt.Waiter, early: wt.Waiter.Sub, joined: wt.Joined, sent: wt.Sent, clock: newRetryClock()}
	defer l.end()
	if wt.Gate != nil {
		if err := l.awaitGate(ctx); err != nil || l.over() {
			return l.got, err
		}
	}
	if err := l.subscribe(first.Listen); err != nil {
		return got, err
	}
	l.add()
	l.timer = time.NewTimer(l.clock.next(first.Retry, l.confirmed()))
	for {
		try, confirmed, err := l.sleep(ctx)
		if err != nil || l.over() {
			return l.got, err
		}
		if !try {
			continue
		}
		if err := l.attempt(ctx, confirmed); err != nil || l.over() {
			return l.got, err
		}
	}
}

// loop is one run of Loop.
type loop[R comparable] struct {
	env *Env
	wt  Wait
	c   Call[R]
	w   *Waiter

	sub            *notify.Waiter  // on the release channel, once listened to
	early          *notify.Waiter  // sub, made before the call's first attempt (Waiter.Sub)
	wakes, ready   <-chan struct{} // its messages and confirmation
	gsub           *notify.Waiter  // on the grant channel
	grants, gready <-chan struct{} // its reconnects and confirmation

	added  bool  // w is in the list
	inRun  bool  // w joined its Client's run without an attempt
	sent   int64 // when the call queued (Wait.Sent), or joined its Client's run
	clock  retryClock
	timer  *time.Timer
	got    R    // what an attempt or a grant took, or a release passed
	joined bool // it may be in the queue in Redis
}

// over reports whether the call has what it waits for.
func (l *loop[R]) over() bool {
	var none R
	return l.got != none
}

// subscribe listens on the release channel (if listen) and on the grant
// channel.
func (l *loop[R]) subscribe(listen bool) error {
	if err := l.listen(listen); err != nil {
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
func (l *loop[R]) listen(listen bool) error {
	if l.sub != nil || !listen && l.early == nil {
		return nil
	}
	if l.early != nil {
		l.sub = l.early
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
func (l *loop[R]) confirmed() bool { return l.ready == nil && l.gready == nil }

// add puts the call's waiter in its list, unless it is there since it
// waited for its gate, and has it join its Client's run if it may.
func (l *loop[R]) add() {
	w, wt, list := l.w, l.wt, l.env.List
	if w.claimable && l.sub != nil {
		w.Sub = l.sub // a release that passes w the lock may close it for w
	}
	switch {
	case l.added:
	case wt.Joinable != nil:
		l.inRun = list.joinRun(wt.Local, w, wt.Joinable)
	default:
		list.add(wt.Local, w)
	}
	l.added = true
	if l.inRun {
		l.joined, l.sent = false, l.env.Now() // not in the queue in Redis
	}
	if (l.joined || l.inRun) && l.sent != 0 {
		// Every grant since the call queued (or joined the run) reaches it
		// (a grant that came before its waiter was added waits for it; see
		// news), and a re-subscription from now on wakes it: no attempt is
		// owed. The same for its release channel, if it subscribed before
		// it queued.
		if l.gsub != nil && l.env.Hub.ConfirmedBefore(wt.Grants, l.sent) {
			l.gready = nil
		}
		if l.early != nil && l.joined && l.env.Hub.ConfirmedBefore(wt.Channel, l.sent) {
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
// the call ends (it leaves the queue in Redis, and its gate, so that the
// next call through finds the channels subscribed), and then the
// subscriptions go.
func (l *loop[R]) end() {
	if l.timer != nil {
		l.timer.Stop()
	}
	done := l.over()
	if l.added {
		if l.wt.Hold > 0 {
			wakeNext(l.env.List, l.wt.Local, l.w, done, l.wt.Hold, l.clock.due)
		}
		// A grant from another Client left untaken is not released here:
		// the call either holds what was granted already (its own attempt
		// found it granted) or leaves the queue (End), which releases it.
		if unwanted := l.env.List.remove(l.wt.Local, l.w); unwanted != nil {
			l.env.Unwanted(unwanted)
		}
	}
	l.c.End(!done && l.joined)
	if l.gsub != nil {
		l.gsub.Close()
	}
	if l.sub != nil {
		l.sub.Close()
	}
}

// sleep sleeps until something wakes the call, and returns whether it
// attempts now, and whether its release channel was just confirmed. A
// grant it accepts, or what a release of the Client passes it, ends the
// wait (over).
//
// Once subscribed, and a later attempt failed, only a grant, a message, a
// pass, a wake, the retry time or the end of ctx wake the call.
func (l *loop[R]) sleep(ctx context.Context) (try, confirmed bool, err error) {
	w, list, stats := l.w, l.env.List, l.env.Stats
	asleep := l.confirmed()
	if asleep {
		if w.claimable {
			list.sleep(w)
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
	case h := <-w.outcome: // nil channel unless claimable
		settled = h == nil
		l.take(h)
	case <-w.news:
		g, recheck, now := list.news(w)
		if g != nil {
			l.got = l.c.Accept(g) // if nothing, it may have run out: attempt
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
	if err != nil || l.over() {
		return false, false, err
	}
	if w.claimable && asleep && !settled && !list.rise(w) {
		// A release of this Client may be passing us the lock.
		return true, confirmed, l.awaitOutcome(ctx)
	}
	return try, confirmed, nil
}

// attempt makes one attempt, having the call join the queue first once
// both its subscriptions are confirmed (or as it leaves its Client's
// run), and sets the timer for the next.
func (l *loop[R]) attempt(ctx context.Context, confirmed bool) error {
	if l.inRun || l.wt.Grants != "" && l.confirmed() {
		l.c.Join()
		l.joined = true
	}
	r, err := l.c.Attempt(ctx, confirmed)
	if l.got = r.Got; l.over() || err != nil {
		return err
	}
	if r.Retry == 0 {
		return nil // no attempt made: the timer runs on
	}
	if err := l.listen(r.Listen); err != nil {
		return err
	}
	l.timer.Reset(l.clock.next(r.Retry, l.confirmed()))
	return nil
}

// awaitOutcome waits, after rise failed, for the outcome of the claim on
// the call's waiter, and takes what it is passed; nil: nothing, attempt.
func (l *loop[R]) awaitOutcome(ctx context.Context) error {
	select {
	case h := <-l.w.outcome:
		l.take(h)
		return nil
	case <-ctx.Done():
		return l.ctxErr(ctx)
	case <-l.env.Closing:
		return l.env.Closed
	}
}

// take takes h, what a release of the Client passed the call, as what the
// call got; nil is nothing.
func (l *loop[R]) take(h Hold) {
	if h != nil {
		l.got = h.(R) // a release passes holds to lock calls only (Hold)
	}
}

// ctxErr is the call's error when ctx ends.
func (l *loop[R]) ctxErr(ctx context.Context) error {
	return fmt.Errorf("relock: %s %q: %w", l.wt.Op, l.wt.Name, ctx.Err())
}

// awaitGate waits until the call's gate lets it through (Wait.Gate).
// Meanwhile it sleeps in its list, quiet: no fellow call wakes it, and
// news is not kept for it. A release of the Client may claim it (if
// claimable) and pass it what it waits for, or settle the claim with
// nothing: the call then attempts, without joining the queue in Redis,
// and sleeps on if it fails. Once through, it may join its Client's run
// (Joinable).
func (l *loop[R]) awaitGate(ctx context.Context) error {
	w, wt, list := l.w, l.wt, l.env.List
	w.quiet = true
	list.add(wt.Local, w)
	l.added = true
	if w.claimable {
		list.sleep(w)
	}
	l.env.Stats.Asleep.Add(1) // once a release may claim it, as in sleep
	defer l.env.Stats.Asleep.Add(-1)
	for {
		select {
		case <-wt.Gate:
			if w.claimable && !list.rise(w) {
				// A release of this Client may be passing it what it waits
				// for; if not, its first attempt through the gate takes
				// what a release passed it with a lost reply.
				if err := l.awaitOutcome(ctx); l.over() || err != nil {
					return err
				}
			}
			l.inRun = list.turned(wt.Local, w, wt.Joinable)
			return nil
		case h := <-w.outcome: // nil channel unless claimable
			if l.take(h); l.over() {
				return nil
			}
			r, err := l.c.Attempt(ctx, false)
			if l.got = r.Got; l.over() || err != nil {
				return err
			}
			list.sleep(w)
		case <-ctx.Done():
			return l.ctxErr(ctx)
		case <-l.env.Closing:
			return l.env.Closed
		}
	}
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
func wakeNext(list *List, name string, w *Waiter, got bool, hold time.Duration, due time.Time) {
	var d time.Duration
	switch {
	case got:
		d = hold
	case !due.IsZero():
		d = max(time.Until(due), 0)
	default:
		return
	}
	list.wakeOther(name, w, d+time.Millisecond)
}
