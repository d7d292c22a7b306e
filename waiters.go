package relock

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/relock-go/relock/internal/notify"
)

// Local waiters: the one queue, per name per Client, of the calls that
// sleep between attempts, of every primitive: through it a release of the
// same Client hands a Mutex or FairMutex straight to one of them, a grant
// from another Client's release reaches its call (routeGrant), a
// semaphore's message wakes the calls it can satisfy (pokeFitting), and a
// call that returns tells another when to check again (tellOther).
//
// A release claims sleeping waiters (claim), runs its script, and settles
// its claim (settle): the chosen waiter is handed its Lease; the others go
// back to sleep, or are told to attempt when the outcome is unknown. A
// claimed waiter must not attempt: an attempt would find its owner
// holding the lock and take it as a second lease of the same hold. So a
// waiter that wakes while claimed waits for the outcome (wake returns
// false), and a waiter that returns while claimed is marked gone: the
// release then frees the lock it would have handed it. Only one-shot
// calls (no WithOwner) are ever claimed.
//
// Mutex and FairMutex each keep one such queue per Client (Client.local,
// Client.fair); their releases differ only in whom the script may choose.
// The other primitives' calls are in Client.local, under the name of
// their queue or channel, and are never claimed. Every waiting call of
// every primitive sleeps in one loop (Client.waitQueued).

// waiter is a call of this Client sleeping between attempts.
type waiter struct {
	owner     string
	lease     time.Duration
	fixed     bool
	reentrant bool           // never claimed
	turn      bool           // an RWMutex writer waiting for its Client's writers' turn: may be claimed, told nothing
	member    string         // a Mutex call's member of the lock's queue in Redis
	sub       *notify.Waiter // a FairMutex call's subscription to its own channel

	// guarded by waiters.mu
	asleep  bool          // past its subscription and asleep: a release may claim it
	inRun   bool          // joined its Client's run without an attempt (joinRun): told to attempt when the run ends
	claimed bool          // a release that may hand it the lock runs: no attempts
	blocked bool          // it woke while claimed and waits for the outcome
	gone    bool          // it returned while claimed: what it is handed is released
	granted *grant        // granted by another Client's release, not yet taken
	recheck time.Duration // told to check again within this; 0 if not
	poked   bool          // told to attempt now (a semaphore's permits freed)
	want    int           // the permits a semaphore call asks for
	given   bool          // a semaphore call handed its permits by a release of its Client, not yet taken (give)

	handed chan *Lease   // the outcome of a claim: a Lease, or nil to attempt
	news   chan struct{} // granted or recheck was set (Mutex calls)
}

func newWaiter(owner string, cfg lockConfig, reentrant bool) *waiter {
	return &waiter{owner: owner, lease: cfg.lease, fixed: cfg.fixed, reentrant: reentrant,
		handed: make(chan *Lease, 1), news: make(chan struct{}, 1)}
}

// waiters is a Client's queue of local waiters of one kind of lock, by
// lock name, oldest first.
type waiters struct {
	mu      sync.Mutex
	n       atomic.Int64 // how many, read without mu
	byName  map[string][]*waiter
	byOwner map[string]*waiter
	mail    map[string]*mailed // by owner: told before its waiter was added
	pruned  time.Time          // when mail was last cleared of old news
	runs    map[string]*Lease  // by name: the holder of the Client's run of a Mutex (see joinRun)
	nRuns   atomic.Int64       // len(runs), read without mu
}

// mailed is what a call was told (see waiters.tell) before its waiter was
// added: a grant may reach a Client between the reply to the attempt that
// queued a call and the call's sleep.
type mailed struct {
	g       *grant
	recheck time.Duration // 0: none; negative: now
	at      time.Time
}

// mailLife is how long news waits for its call, at least: a call adds its
// waiter right after the attempt that queued it, or has returned. Older
// news goes within as long again.
const mailLife = 2 * time.Second

// add registers w as a waiter for name, and gives it what it was told
// before.
func (r *waiters) add(name string, w *waiter) {
	r.mu.Lock()
	r.addLocked(name, w)
	r.mu.Unlock()
	r.n.Add(1)
}

// addLocked is add, with mu held, except for the count.
func (r *waiters) addLocked(name string, w *waiter) {
	if r.byName == nil {
		r.byName = make(map[string][]*waiter)
		r.byOwner = make(map[string]*waiter)
	}
	r.byName[name] = append(r.byName[name], w)
	if w.owner != "" && !w.turn {
		r.byOwner[w.owner] = w
		if m := r.mail[w.owner]; m != nil {
			delete(r.mail, w.owner)
			w.note(m.g, m.recheck)
		}
	}
}

// remove unregisters w as its lock call returns; a release that claimed
// it frees whatever it passes to w. It returns a Lease handed to w that w
// did not take (its call returned for another reason at the same moment),
// for the caller to release.
func (r *waiters) remove(name string, w *waiter) (unwanted *Lease) {
	r.mu.Lock()
	w.gone = w.claimed
	if r.byOwner[w.owner] == w {
		delete(r.byOwner, w.owner)
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
		if w.poked {
			// Told to attempt and gone without: the next one attempts.
			if x := firstTold(ws); x != nil {
				x.poke()
			}
		}
	}
	r.mu.Unlock()
	r.n.Add(-1)
	select {
	case unwanted = <-w.handed:
	default:
	}
	return unwanted
}

// sleep marks w asleep: a release may now claim it.
func (r *waiters) sleep(w *waiter) {
	r.mu.Lock()
	w.asleep = true
	r.mu.Unlock()
}

// wake marks w awake before it attempts. It fails, returning false, when a
// release has claimed w, which must then wait for the outcome.
//
// Waking also drops a stale outcome. A release may claim w just as w wakes
// for another reason, fail to pass the lock on and hand w nil before w
// marks itself awake; w then attempts by itself and the nil stays behind.
// Left there, it would be read on a later sleep as the outcome of the next
// release that claims w, and w would attempt while that release passes it
// the lock: w would take the lock as its own, and the release, finding w
// gone, would free it under w's feet.
func (r *waiters) wake(w *waiter) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if w.claimed {
		w.blocked = true
		return false
	}
	w.asleep = false
	select { // unclaimed, w can hold nothing but a stale outcome
	case <-w.handed:
	default:
	}
	return true
}

// claim claims up to len(buf) of the oldest sleeping one-shot waiters of
// name for a release, appending them to buf[:0].
func (r *waiters) claim(name string, buf []*waiter) []*waiter {
	return r.claimFitting(name, -1, buf)
}

// claimFitting is claim for a Semaphore's release of n permits: it claims
// only waiters whose requests fit in n together, skipping a request too
// large, as pokeFitting does. A negative n claims any (claim).
func (r *waiters) claimFitting(name string, n int, buf []*waiter) []*waiter {
	ws := buf[:0]
	if r.n.Load() == 0 {
		return ws
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, w := range r.byName[name] {
		if !w.asleep || w.claimed || w.reentrant || w.given || n >= 0 && (w.want <= 0 || w.want > n) {
			continue
		}
		w.claimed = true
		ws = append(ws, w)
		if n >= 0 {
			n -= w.want
		}
		if len(ws) == cap(buf) || n == 0 {
			break
		}
	}
	return ws
}

// give ends a Semaphore release's claim on ws by handing each the
// permits it asks for: it wakes, told to attempt, and its attempt takes
// them (takeGiven) without asking Redis; it never sleeps again before. It
// returns the permits of those that had returned meanwhile, which the
// caller gives back.
func (r *waiters) give(ws []*waiter) (back int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, w := range ws {
		if w.gone {
			back += w.want
			continue
		}
		w.claimed, w.blocked, w.asleep = false, false, false
		w.given = true
		// Poked as well: a call that took news of its own just before
		// (a time to check again, which alone would put it back to
		// sleep) finds the poke and attempts.
		w.poke()
		w.hand(nil)
	}
	return back
}

// takeGiven reports whether w was handed its permits (give) and has not
// taken them yet, and takes them: the poke that came with them is
// answered. A call is given its permits at most once: none is claimed
// while it holds permits not taken (claimFitting).
func (r *waiters) takeGiven(w *waiter) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	given := w.given
	if given {
		w.given, w.poked = false, false
	}
	return given
}

// claimOwner claims the waiter of owner for name for a release, if it is
// a sleeping one-shot waiter not claimed already; nil otherwise.
func (r *waiters) claimOwner(name, owner string) *waiter {
	if r.n.Load() == 0 {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	w := r.byOwner[owner]
	if w == nil || !w.asleep || w.claimed || w.reentrant {
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

// settle ends a release's claim on ws. The chosen one (if chosen >= 0) is
// handed l, and stays claimed: it takes l and never attempts; settle
// reports false if that one has gone, leaving l to the caller to release.
// The others go back to sleep, except those that woke meanwhile, or all of
// them when the outcome is unknown (retry): they are told to attempt.
func (r *waiters) settle(ws []*waiter, chosen int, l *Lease, retry bool) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	delivered := false
	for i, w := range ws {
		switch {
		case i == chosen:
			if !w.gone {
				w.asleep = false
				delivered = w.hand(l)
			}
		case !w.gone && (retry || w.blocked):
			w.claimed, w.blocked, w.asleep = false, false, false
			w.hand(nil)
		default:
			w.claimed = false
		}
	}
	return delivered
}

// outcome waits, after wake failed, for the outcome of the claim on w, a
// lock call on name: the Lease it is handed, or nil to attempt.
func (c *Client) outcome(ctx context.Context, w *waiter, name string) (*Lease, error) {
	select {
	case l := <-w.handed:
		return l, nil
	case <-ctx.Done():
		return nil, fmt.Errorf("relock: lock %q: %w", name, ctx.Err())
	case <-c.closing:
		return nil, ErrClosed
	}
}

// hand gives w an outcome. The channel is empty whenever a release settles
// w (see wake); hand never blocks all the same.
func (w *waiter) hand(l *Lease) bool {
	select {
	case w.handed <- l:
		return true
	default:
		return false
	}
}

// tell records a grant, or a time to check again by (0: now), for the
// waiter of owner and wakes it. With no such waiter yet, it keeps the news
// for one added within mailLife.
func (r *waiters) tell(owner string, g *grant, recheck time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if w := r.byOwner[owner]; w != nil {
		w.note(g, recheck)
		return
	}
	now := time.Now()
	forgetOld(r.mail, func(m *mailed) time.Time { return m.at }, mailLife, &r.pruned, now)
	if r.mail == nil {
		r.mail = make(map[string]*mailed)
	}
	m := r.mail[owner]
	if m == nil {
		m = &mailed{}
		r.mail[owner] = m
	}
	m.at = now
	switch {
	case g != nil:
		m.g = g
	case recheck <= 0:
		m.recheck = -1 // now
	case m.recheck == 0 || recheck < m.recheck:
		m.recheck = recheck
	}
}

// forgetOld deletes the entries of m made (at) more than life before now,
// at most once per life: last is when it last did.
func forgetOld[V any](m map[string]V, at func(V) time.Time, life time.Duration, last *time.Time, now time.Time) {
	if now.Sub(*last) <= life {
		return
	}
	*last = now
	for k, v := range m {
		if now.Sub(at(v)) > life {
			delete(m, k)
		}
	}
}

// tellOther tells one waiter of name other than w to check again within d.
func (r *waiters) tellOther(name string, w *waiter, d time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, x := range r.byName[name] {
		if x != w && !x.turn {
			x.note(nil, d)
			return
		}
	}
}

// firstTold returns the oldest of ws that may be told to check again: not
// a writer waiting for its turn, which attempts only once it has it.
func firstTold(ws []*waiter) *waiter {
	for _, w := range ws {
		if !w.turn {
			return w
		}
	}
	return nil
}

// Joining a run. While the Client passes a Mutex on in process (pass.go),
// a Lock call of the Client that comes needs no attempt of its own: it
// joins the local queue at once, asleep, and the run hands it the lock in
// turn. The run's holder is recorded by name (setRun); a call joins only
// while that holder may pass the lock on (joinRun), and the release that
// ends the run (it does not pass the lock on) tells every call that joined
// so to attempt (endRun), under the same lock as the joining: no call
// sleeps past the run's end. A call that joined makes its first attempt
// then, or when its retry time comes, and is a queued call from there.

// setRun records l as the holder of its Client's run of name.
func (r *waiters) setRun(name string, l *Lease) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.runs == nil {
		r.runs = make(map[string]*Lease)
	}
	if r.runs[name] == nil {
		r.nRuns.Add(1)
	}
	r.runs[name] = l
}

// mayJoinRun reports whether a Lock call of name may join its Client's
// run now (now on the watchdog's clock): one holds it, whose hold is
// watched, has time left, and may be passed on as far as the run's
// answers tell. It allocates nothing, so that a call with no run to join
// pays nothing for the look.
func (r *waiters) mayJoinRun(name string, now int64) bool {
	if r.nRuns.Load() == 0 {
		return false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return joinable(r.runs[name], now)
}

// joinable reports whether a call may join the run that h holds (nil:
// none) at now.
func joinable(h *Lease, now int64) bool {
	return h != nil && !h.entry.Ended() && h.entry.Deadline()-now > int64(passMargin) && h.chain.ready()
}

// joinRun adds w as a waiter for name that joined its Client's run
// without an attempt, if it still may (mayJoinRun), and reports whether
// it did.
func (r *waiters) joinRun(name string, w *waiter, now int64) bool {
	r.mu.Lock()
	if !joinable(r.runs[name], now) {
		r.mu.Unlock()
		return false
	}
	w.inRun = true
	r.addLocked(name, w)
	r.mu.Unlock()
	r.n.Add(1)
	return true
}

// endRun ends the run of name if l holds it: every call that joined it
// without an attempt is told to attempt.
func (r *waiters) endRun(name string, l *Lease) {
	if r.nRuns.Load() == 0 {
		return // no run: every release but a run's last passes here
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.runs[name] != l {
		return
	}
	delete(r.runs, name)
	r.nRuns.Add(-1)
	for _, w := range r.byName[name] {
		if w.inRun {
			w.inRun = false
			w.poke()
		}
	}
}

// note records g or recheck for w (0: attempt now), and wakes it. Called
// with mu held.
func (w *waiter) note(g *grant, recheck time.Duration) {
	switch {
	case g != nil:
		w.granted = g
	case recheck <= 0:
		w.poked = true
	case w.recheck == 0 || recheck < w.recheck:
		w.recheck = recheck
	}
	select {
	case w.news <- struct{}{}:
	default:
	}
}

// takeNews returns and clears what w was told by other Clients' releases:
// a grant, a time to check again by, or to attempt now (poked).
func (r *waiters) takeNews(w *waiter) (g *grant, recheck time.Duration, poked bool) {
	if w == nil {
		return nil, 0, false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	g, recheck, poked = w.granted, w.recheck, w.poked
	w.granted, w.recheck, w.poked = nil, 0, false
	return g, recheck, poked
}

// pokeFitting wakes the waiting semaphore calls of name that free, the
// number of permits a message published, can satisfy, oldest first: each
// attempts at once. A request too large is skipped, not allowed to hold up
// smaller ones behind it (other clients compete for the permits anyway).
// A count of 0 or less wakes every call: nothing was freed, but a permit's
// lease was cut below the earliest expiry the calls were told
// (permit_updatelease.lua), and each must learn the new one. A payload
// that is not a number wakes the oldest call.
func (r *waiters) pokeFitting(name, payload string) {
	free, err := strconv.Atoi(payload)
	r.mu.Lock()
	defer r.mu.Unlock()
	ws := r.byName[name]
	if err != nil {
		if len(ws) > 0 {
			ws[0].poke()
		}
		return
	}
	all := free <= 0
	for _, w := range ws {
		if all || w.want <= free {
			free -= w.want
			w.poke() // one poked already attempts anyway
		}
	}
}

// poke tells w to attempt now, and wakes it. Called with mu held.
func (w *waiter) poke() {
	w.poked = true
	select {
	case w.news <- struct{}{}:
	default:
	}
}

// Waiters never sleep past a free moment (docs/design.md). A release
// message wakes one waiter of a Client, which keeps the others asleep on
// the times their own last attempts were told. Two events make those
// times stale without any message, and the waiting call that sees them
// tells another (Client.passOn, waiters.tellOther): it took the lock or
// permit for a lease, which may run out unannounced (a fixed lease left to
// expire, a hold lost), or it gave up, and its own retry time may have
// been the freshest the Client had.

// fallbackRecheck bounds the sleep of a waiter that has no better time to
// try again (a semaphore's, a latch's): a missed message costs it at most
// this long.
const fallbackRecheck = 2 * time.Second

// retryClock says when a waiting call attempts again: when the holder's
// TTL runs out or, until its subscriptions are confirmed (no message can
// reach it before), on a short period that grows; and never later than
// most after its last attempt, if most is set.
type retryClock struct {
	unconfirmed time.Duration // the next period while unconfirmed
	most        time.Duration // the longest sleep; 0: none
	due         time.Time     // when the call would attempt; zero: unknown
}

func newRetryClock() retryClock { return retryClock{unconfirmed: 50 * time.Millisecond} }

// next returns how long to sleep, at most d, with the call's
// subscriptions confirmed or not.
func (r *retryClock) next(d time.Duration, confirmed bool) time.Duration {
	if !confirmed && d > r.unconfirmed {
		d, r.unconfirmed = r.unconfirmed, min(2*r.unconfirmed, time.Second)
	}
	if r.most > 0 && d > r.most {
		d = r.most
	}
	r.due = time.Now().Add(d)
	return d
}

// sooner moves the next attempt to d from now if that is sooner, and
// reports whether it did.
func (r *retryClock) sooner(d time.Duration) bool {
	if d <= 0 || d >= time.Until(r.due) {
		return false
	}
	r.due = time.Now().Add(d)
	return true
}

// queued is a waiting call as Client.waitQueued runs it. The releases of
// the Mutex, the RWMutex and the PermitSemaphore may grant it what it waits
// for (see grant.go); the Semaphore's and the latch's never do (tries).
type queued interface {
	// attempt tries once; it reports whether the call is done, and if not
	// how long it may sleep at most.
	attempt(ctx context.Context) (done bool, retry time.Duration, err error)
	// accept takes a grant made to the call, and reports false when the
	// grant may have run out already: the call then attempts.
	accept(g *grant) bool
	// join makes the call's next attempts put it in the queue. It is
	// called before every attempt once the call's subscriptions are
	// confirmed, so a call may choose how it joins by what it has seen.
	join()
	// leave takes the call out of the queue as it returns undone, and
	// frees what another Client's release may have granted it meanwhile
	// (a release of this Client that claimed it frees what it passes to
	// the call itself).
	leave()
}

// queuedWait is how a waiting call waits: on channel, the primitive's
// release channel, with policy; in its queue of local waiters (reg) under
// local, as owner (may be "" for a call never granted).
// With grants the call also listens on the Client's grant channel for the
// primitive's slot, and joins the queue once both subscriptions are
// confirmed (or from its first attempt, with joined); it leaves the queue
// before it unsubscribes, so that every Client in a queue listens on its
// release channel. hold is the lease of what the call takes, for passOn.
type queuedWait struct {
	op, name, channel string
	policy            notify.Policy
	listenWhen        *bool // if not nil, channel is listened to only once this is true (read after each attempt)
	local, owner      string
	grants            string // the grant channel; "" for none
	joined            bool   // the call's attempts queued it from the first
	sent              int64  // with joined: when the first was sent (watchdog clock), if known
	hold              time.Duration
	want              int    // the permits a semaphore call asks for (see waiters.pokeFitting)
	exit              func() // if not nil, called as the call returns, before it unsubscribes
	// sub, if not nil, is the call's subscription to channel, made before
	// its first attempt, which was sent (sent) once the channel was
	// confirmed: with joined, a release after that attempt reaches the
	// call, which owes no attempt once subscribed. Only for a call that
	// always listens (no listenWhen).
	sub *notify.Waiter

	// waiter, if not nil, is the call's waiter, which a release of this
	// Client may claim and hand the lock to (a Mutex's or FairMutex's
	// one-shot call; see claim).
	waiter *waiter
	// inRun tells that waiter joined its Client's run of the lock
	// (waiters.joinRun), in reg already and without an attempt: it
	// sleeps at once until the run hands it the lock or ends.
	inRun bool
	// reg is the queue of local waiters the call is in; nil for
	// Client.local. Calls in another (the FairMutex's, Client.fair) learn
	// of a free moment from their queue in Redis, not from fellow calls
	// (no passOn).
	reg *waiters
}

// confirmer is a queued call that, once its release channel is confirmed,
// asks whether a message may have been missed in place of an attempt: no,
// and it sleeps on (a FairMutex call: is it first?).
type confirmer interface {
	confirmed(ctx context.Context) bool
}

// waitQueued sleeps between q's attempts until one is done or fails, a
// grant is accepted, a release of this Client hands the call the lock, ctx
// ends, or the Client closes; retry is how long to sleep first at most. It
// returns the Lease a release of this Client handed the call, if any.
func (c *Client) waitQueued(ctx context.Context, qw queuedWait, q queued, retry time.Duration) (handed *Lease, err error) {
	c.stats.waits.Add(1)
	exit := func() {
		if qw.exit != nil {
			qw.exit()
			qw.exit = nil
		}
	}
	defer exit() // whatever happens
	done, joined, left := false, qw.joined, false
	leave := func() {
		if !done && joined && !left {
			left = true
			q.leave()
		}
	}
	defer leave() // whatever happens

	var w *notify.Waiter             // on the release channel, once listened to
	var wakes, ready <-chan struct{} // its messages and confirmation
	listen := func() error {
		if w != nil || (qw.listenWhen != nil && !*qw.listenWhen) {
			return nil
		}
		if qw.sub != nil {
			w = qw.sub
		} else if w, err = c.hub.Subscribe(qw.channel, qw.policy); err != nil {
			return ErrClosed
		}
		wakes, ready = w.Wake(), w.Ready()
		return nil
	}
	defer func() {
		if w != nil {
			w.Close()
		}
	}()
	if err := listen(); err != nil {
		return nil, err
	}
	var grants, gready <-chan struct{} // the grant channel's reconnects and confirmation
	if qw.grants != "" {
		gw, err := c.hub.Subscribe(qw.grants, c.routeGrant)
		if err != nil {
			return nil, ErrClosed
		}
		defer gw.Close()
		grants, gready = gw.Wake(), gw.Ready()
		if (qw.joined || qw.inRun) && qw.sent != 0 && c.hub.ConfirmedBefore(qw.grants, qw.sent) {
			// Every grant since the call queued reaches it (a grant that
			// came before its waiter is added waits for it; see
			// waiters.tell), and a re-subscription from now on wakes it:
			// no attempt is owed.
			gready = nil
		}
	}
	if qw.sub != nil && qw.joined && qw.sent != 0 && c.hub.ConfirmedBefore(qw.channel, qw.sent) {
		ready = nil // the same for its release channel, subscribed before it queued
	}
	defer exit() // before the subscriptions go
	lw, claimable := qw.waiter, qw.waiter != nil
	if !claimable {
		lw = &waiter{owner: qw.owner, want: qw.want, news: make(chan struct{}, 1)}
	} else if w != nil {
		lw.sub = w // a release that hands lw the lock may close it for lw
	}
	reg := qw.reg
	if reg == nil {
		reg = &c.local
	}
	if !qw.inRun {
		reg.add(qw.local, lw)
	}
	defer func() {
		// A grant from another Client left untaken is not released here:
		// the call either holds what was granted already (its own attempt
		// found it granted) or leaves the queue (q.leave), which releases
		// it.
		if unwanted := reg.remove(qw.local, lw); unwanted != nil {
			c.releaseUnwanted(unwanted)
		}
		leave() // before the subscriptions go
	}()
	clock := newRetryClock()
	if qw.grants != "" {
		// A grant to a waiter ahead that has died holds the lock for
		// grantTTL, and nobody announces its end: the call finds out by
		// attempting at least that often (see tell_grant in queue.lua).
		clock.most = grantTTL
	}
	if qw.reg == nil {
		defer func() { c.passOn(qw.local, lw, done, qw.hold, clock.due) }()
	}
	check, _ := q.(confirmer)
	timer := time.NewTimer(clock.next(retry, ready == nil && gready == nil))
	defer timer.Stop()
	for {
		// Once subscribed, and a later attempt failed, only a grant, a
		// message, a handoff, a time told, the retry time or the end of
		// ctx wake this call.
		asleep := ready == nil && gready == nil
		if asleep {
			if claimable {
				reg.sleep(lw)
			}
			// Counted once a release may claim it: a call that Stats shows
			// asleep may be handed the lock.
			c.stats.asleep.Add(1)
		}
		try := true   // attempt once awake
		told := false // a release of this Client told it to attempt, and woke it
		confirmed := false
		select {
		case <-ready:
			ready = nil // subscribed: a release from now on wakes us
			try, confirmed = gready == nil, true
		case <-gready:
			gready = nil
			try = ready == nil
		case <-wakes:
			c.stats.wakeups.Add(1)
		case <-grants: // the grant channel was re-subscribed: a grant may be lost
			c.stats.wakeups.Add(1)
		case h := <-lw.handed: // nil channel unless claimable
			if h != nil {
				c.stats.asleep.Add(-1)
				done = true
				return h, nil
			}
			told = true
		case <-lw.news:
			g, recheck, poked := reg.takeNews(lw)
			if g != nil {
				if done = q.accept(g); done {
					if asleep {
						c.stats.asleep.Add(-1)
					}
					return nil, nil
				}
				break // it may have run out: attempt
			}
			c.stats.wakeups.Add(1)
			if poked {
				break
			}
			try = false
			if clock.sooner(recheck) {
				timer.Reset(recheck)
			}
		case <-timer.C:
		case <-ctx.Done():
			err = fmt.Errorf("relock: %s %q: %w", qw.op, qw.name, ctx.Err())
		case <-c.closing:
			err = ErrClosed
		}
		if asleep {
			c.stats.asleep.Add(-1)
		}
		if err != nil {
			return nil, err
		}
		if claimable && asleep && !told && !reg.wake(lw) {
			// A release of this Client may be handing us the lock.
			h, err := c.outcome(ctx, lw, qw.name)
			if err != nil {
				return nil, err
			}
			if h != nil {
				done = true
				return h, nil
			}
			try = true
		}
		if !try || (confirmed && check != nil && !check.confirmed(ctx)) {
			continue
		}
		if qw.inRun || qw.grants != "" && ready == nil && gready == nil {
			q.join() // both subscribed (or the channel not listened to), or out of its Client's run
			joined = true
		}
		var next time.Duration
		if done, next, err = q.attempt(ctx); done || err != nil {
			return nil, err
		}
		if err := listen(); err != nil {
			return nil, err
		}
		timer.Reset(clock.next(next, ready == nil && gready == nil))
	}
}

// tries is a waiting call that is never granted: it only attempts (a
// Semaphore's, a latch's).
type tries func(ctx context.Context) (bool, time.Duration, error)

func (f tries) attempt(ctx context.Context) (bool, time.Duration, error) { return f(ctx) }
func (tries) accept(*grant) bool                                         { return false }
func (tries) join()                                                      {}
func (tries) leave()                                                     {}
