package relock

import (
	"context"
	"fmt"
	"time"

	"github.com/relock-go/relock/internal/layout"
	"github.com/relock-go/relock/internal/notify"
	"github.com/relock-go/relock/internal/scripts"
	"github.com/relock-go/relock/internal/wait"
)

// rwAcquire is one RWMutex lock call, shared by its attempts.
type rwAcquire struct {
	lockCall
	rw    *RWMutex
	write bool
	field string // the hold's hash field: owner, or owner + ":write"
	// req is the call of the lock script each attempt sends: its Kind is
	// NoQueue until the call queues, and a one-shot writer's is Listening
	// once it listens on the release channel.
	req    scripts.RWLockRequest
	kind   scripts.Kind // its kind of waiter, once it queues; NoQueue if it never does
	member string       // its place in the queue of waiters, once it queues
	joined int64        // when the first attempt that may have queued it was sent
	// w is its waiter, once it waits: its Member is a one-shot writer's
	// member as a release of its Client that claims it names it to the
	// script (rw_queue.lua): its member in the queue, or the one it would
	// have.
	w *wait.Waiter
	// other is set once an attempt found a holder other than a relock
	// writer (rw_wait.lua): a writer listens on the release channel
	// from then on.
	other bool
	// inTurns tells that a writer takes part in its Client's writers'
	// turns on the lock (writerTurns); gate is the one it waited or waits
	// for, nil if it had the turn at once.
	inTurns bool
	gate    chan struct{}
}

// Undo undoes an attempt whose reply was lost, if Redis applied it
// (door.Undo). A one-shot owner's field can only come from that attempt;
// a reentrant owner's is undone only if the attempt's request marker shows
// it was applied.
func (a *rwAcquire) Undo(ctx context.Context) {
	rw := a.rw
	req := rw.unlockRequest(a.write, a.field, a.req.Marker)
	req.Undo = true
	keys, args := req.Build()
	if err := rw.c.door.Run(ctx, req.Script(), keys, args...).Err(); err != nil {
		rw.c.cfg.logger.Warn("relock: cannot undo an unanswered lock attempt; it expires with its lease",
			"name", rw.name, "write", a.write, "lease", a.cfg.lease, "err", err)
	}
}

func (rw *RWMutex) lock(ctx context.Context, opts []LockOption, write, block bool) (*Lease, error) {
	lc, err := startLock(ctx, rw.c, rw.check(), rwOp(write, "lock"), rw.name, opts)
	if err != nil {
		return nil, err
	}
	a := rw.newAcquire(lc, write, block)

	// A reader that comes while its Client listens on the lock's release
	// channel and its grant channel listens from before its first
	// attempt, which may then queue it: every release after that attempt
	// reaches it, so it owes no attempt once subscribed (see wait).
	var sub *notify.Waiter
	if !write && a.kind != scripts.NoQueue && rw.listening() {
		if sub, err = rw.c.hub.Subscribe(rw.channel, lockPolicy); err != nil {
			return nil, ErrClosed
		}
		a.req.Kind = a.kind
	}

	if write && a.kind != scripts.NoQueue && !rw.takeTurn(a) {
		return rw.wait(ctx, a, wait.Result[*Lease]{Retry: retryAfter(-1)}, nil)
	}
	r, err := a.Attempt(ctx, false)
	if err != nil && !isServerError(err) {
		rw.leaveQueue(a) // it may have joined the queue
	}
	if r.Got != nil || err != nil || !block {
		sub.Close() // after leaving the queue
		a.leaveTurn()
		if r.Got == nil && err == nil {
			err = ErrNotAcquired
		}
		return r.Got, err
	}
	if a.cfg.spin != nil {
		return spin(ctx, rw.c, rwOp(a.write, "lock"), rw.name, a.cfg.spin, r, a)
	}
	return rw.wait(ctx, a, r, sub)
}

// newAcquire returns the fixed arguments of an RWMutex lock call with lc,
// of the write side if write, that waits if block.
func (rw *RWMutex) newAcquire(lc lockCall, write, block bool) *rwAcquire {
	a := &rwAcquire{lockCall: lc, rw: rw, write: write}
	a.field = a.owner
	if write {
		a.field += ":write"
	}
	a.req = scripts.RWLockRequest{Keys: rw.lockKeys, Write: write, MarkerTTL: rw.c.argMarkerTTL, Lease: a.lease,
		Owner: a.owner, Holds: rw.holds, QueueTTL: argGrantTTL}
	switch {
	case a.reentrant:
		a.req.Marker = requestMarker(rw.name, a.owner)
	case !write:
		a.req.ReaderHold = layout.ReaderHold(rw.name, a.owner, 1)
	}
	// Calls queue where a release may grant to them: not with replica
	// sync (see unlockRequest), not when they spin. A writer's attempts
	// queue it from the first, as one that does not listen on the
	// release channel; a reader joins once it listens (see join).
	if block && a.cfg.spin == nil && !rw.c.rsync.mayWait() {
		switch {
		case !write:
			a.kind = scripts.Reader
		default:
			a.kind = rw.c.waiterKind(a.reentrant)
			a.req.Kind = a.kind
		}
	}
	return a
}

// takeTurn has call a, a writer that queues, take part in its Client's
// writers' turns on the lock, and reports whether a attempts now. Only
// the writer that has its Client's turn may be in the queue: a grant or a
// word to another would find no call to take it (writerTurns). A writer
// without the turn attempts without queueing, and joins the queue once it
// has the turn (wait.Wait.Gate): a reentrant writer attempts now, so that
// a re-entry never waits behind another writer of the Client; a one-shot
// writer waits for the turn without an attempt (another writer of the
// Client cannot be re-entering, so an attempt now would only fail). A
// one-shot writer with the turn does not attempt either when it joins its
// Client's run, while the Client passes the lock on in process (see
// wait).
func (rw *RWMutex) takeTurn(a *rwAcquire) (now bool) {
	a.inTurns, a.gate = true, rw.c.turns.take(rw.queue)
	switch {
	case a.gate != nil:
		a.req.Kind = scripts.NoQueue // it joins once it has the turn
		return a.reentrant
	case !a.reentrant && rw.c.local.MayJoinRun(rw.queue, joinable):
		return false
	}
	return true
}

// listening reports whether the Client has the lock's release channel and
// its grant channel subscribed, confirmed.
func (rw *RWMutex) listening() bool {
	now := rw.c.wd.Now() + 1
	return rw.c.hub.ConfirmedBefore(rw.channel, now) && rw.c.hub.ConfirmedBefore(rw.grants, now)
}

// wait sleeps between attempts in the lock's queue of waiters
// (rw_queue.lua; wait.Loop), on the Client's grant channel and on the
// lock's release channel: a reader always, a writer once it has seen a
// holder other than a relock writer. A release that frees the lock may
// grant it to a waiting writer, whose Lock then returns on the grant;
// readers attempt when a release message wakes them, and writers not
// granted when a release message or a word on the grant channel does.
// Writers take turns (see takeTurn), waiting for theirs first if they do
// not have it. A reader's subscription to the release channel (sub) is
// given when it subscribed before its first attempt. first is the result
// of the call's first attempt.
func (rw *RWMutex) wait(ctx context.Context, a *rwAcquire, first wait.Result[*Lease], sub *notify.Waiter) (*Lease, error) {
	// A one-shot writer that queues may be claimed by a release of its
	// Client, which passes it the lock.
	claimable := a.kind != scripts.NoQueue && a.write && !a.reentrant
	a.w = a.newWaiter(claimable)
	wt := wait.Wait{Op: rwOp(a.write, "lock"), Name: rw.name, Channel: rw.channel, Policy: lockPolicy,
		Local: rw.queue, Waiter: a.w, Hold: a.cfg.lease} // by its queue's name: never a Mutex's
	if sub != nil {
		a.w.Sub = sub
		wt.Joined, wt.Sent = a.member != "", a.joined
	}
	if a.write {
		if !a.inTurns {
			a.inTurns, a.gate = true, rw.c.turns.take(rw.queue)
		}
		wt.Gate = a.gate
	}
	if a.kind != scripts.NoQueue {
		wt.Grants = rw.grants
		if a.write {
			wt.Joined, wt.Sent = a.member != "", a.joined
		}
		if claimable {
			a.w.Member = a.member
			if a.member == "" {
				// A writer that has made no attempt that queued it: a
				// release of its Client may pass it the lock while it
				// waits for its turn (rw_queue.lua, ARGV[14]: it is named
				// by the member it would have), and, with the turn, it
				// joins its Client's run as a Mutex call does, while the
				// Client passes the lock on in process.
				a.w.Member = scripts.Member(a.cfg.lease, scripts.OneShot, a.owner)
				wt.Joinable = joinable
			}
		}
	}
	first.Listen = a.listens()
	return wait.Loop(ctx, rw.c.localEnv, wt, a, first)
}

// Attempt, Accept, Join and End make an RWMutex lock call its own
// waiting call (wait.Call).
func (a *rwAcquire) Attempt(ctx context.Context, _ bool) (wait.Result[*Lease], error) {
	l, ttl, err := a.rw.attempt(ctx, a)
	return wait.Result[*Lease]{Got: l, Retry: retryAfter(ttl), Listen: a.listens()}, err
}

// listens reports whether the call listens on the lock's release
// channel: a writer that queues only once it has seen a holder other than
// a relock writer.
func (a *rwAcquire) listens() bool { return !a.write || a.kind == scripts.NoQueue || a.other }

func (a *rwAcquire) Accept(g *wait.Grant) *Lease {
	if !a.write {
		return nil // readers are never granted
	}
	return a.rw.accept(a, g)
}

// Join makes the call's next attempts queue it, as one that listens on
// the release channel when it does: a reader, or a one-shot writer that
// has seen another holder (wait.Loop calls Join once both channels are
// confirmed, or the grant channel only while the call does not listen).
// A call in the queue keeps its member.
func (a *rwAcquire) Join() {
	switch {
	case a.write && !a.reentrant && a.other:
		if a.req.Kind != scripts.Listening {
			a.req.Kind = scripts.Listening
			if a.member != "" {
				a.req.Queued = scripts.MayBeQueuedUnheard // its "O" takes the place of its "o"
			}
		}
	case a.member == "":
		a.req.Kind = a.kind
	}
}

// End leaves the queue if the call may be in it, and then the writers'
// turn, so that the next writer to have it finds the channels subscribed.
func (a *rwAcquire) End(queued bool) {
	if queued {
		a.rw.leaveQueue(a)
	}
	a.leaveTurn()
}

// leaveTurn ends the call's part in its Client's writers' turns, if it
// takes part.
func (a *rwAcquire) leaveTurn() {
	if a.inTurns {
		a.inTurns = false
		a.rw.c.turns.leave(a.rw.queue, a.gate)
	}
}

// accept makes the write Lease of a grant to call a, or returns nil when
// the grant may have run out already (see Client.granted).
func (rw *RWMutex) accept(a *rwAcquire, g *wait.Grant) *Lease {
	l := &Lease{c: rw.c, rel: &rw.w, name: rw.name, field: a.field, token: g.Token, end: newEnding()}
	if !rw.c.granted(l, rw.group, a.cfg, g, a.joined) {
		return nil
	}
	return l
}

// leaveQueue takes call a out of the lock's queue as it returns without
// the lock and, for a one-shot writer, releases the lock if it was granted
// to a meanwhile (the next writer then gets it), within the cleanup
// timeout.
func (rw *RWMutex) leaveQueue(a *rwAcquire) {
	if a.member == "" {
		return
	}
	field := argEmpty // a reader or reentrant owner is never granted
	if a.write && !a.reentrant {
		field = a.field
	}
	req := rw.unlockRequest(a.write, field, "")
	req.Leaving = a.member
	keys, args := req.Build()
	if err := rw.c.leave(context.Background(), rw.name, func(ctx context.Context) error {
		return rw.c.door.Run(ctx, req.Script(), keys, args...).Err()
	}); err != nil {
		rw.c.cfg.logger.Warn("relock: cannot leave the queue of a lock; the Client's next call on it tries again",
			"name", rw.name, "err", err)
	}
}

// attempt runs the lock script of one side once. It returns a Lease, or
// the lock's TTL, or an error. An attempt whose outcome is unknown is
// undone before returning.
func (rw *RWMutex) attempt(ctx context.Context, a *rwAcquire) (*Lease, time.Duration, error) {
	var rel releaser = &rw.r
	granted := nonNegative // a reader's reply is the token counter, 0 before any writer
	if a.write {
		rel, granted = &rw.w, positive
	}
	keys, args := a.req.Build()
	r, sent, err := rw.c.acquire(ctx, rw.name, a.req.Script(), keys, args, a, granted, nil)
	reply := scripts.LockReplyOf(r)
	if reply.Held {
		a.other = reply.Foreign
	}
	kind := a.req.Kind
	queues := kind != scripts.NoQueue && (err != nil || reply.Held && (kind != scripts.OneShot || !a.other))
	if queues && (a.member == "" || a.req.Queued == scripts.MayBeQueuedUnheard) {
		// This attempt may have queued the call, or given it a member
		// that listens in its place (rw_wait.lua): later attempts leave
		// the queue when they acquire, and so does the call if it gives
		// up.
		if a.member == "" {
			a.joined = sent
		}
		a.member = scripts.Member(a.cfg.lease, kind, a.owner)
		a.req.Queued = scripts.MayBeQueued
		if a.w != nil {
			// Before the call sleeps again, and so before any release may
			// claim its waiter (wait.List's sleep and Claim share a lock).
			a.w.Member = a.member
		}
	}
	if err != nil {
		return nil, 0, opError(ctx, rwOp(a.write, "lock"), rw.name, err)
	}
	if reply.Held {
		return nil, reply.TTL, nil
	}
	if a.write && reply.Token == 0 {
		return nil, 0, fmt.Errorf("relock: lock %q: %w", rw.name, ErrUpgrade)
	}
	l := &Lease{
		c:         rw.c,
		rel:       rel,
		name:      rw.name,
		field:     a.field,
		reentrant: a.reentrant,
		token:     reply.Token,
		end:       newEnding(),
	}
	// A writer's hold is the hash field <owner>:write: the Mutex's
	// renewal keeps it. A reader's is its field and hold keys.
	if !a.write {
		l.renewal = kindRead
	}
	rw.c.watch(l, rw.group, a.cfg.lease, a.cfg.fixed, sent)
	rw.c.stats.acquired.Add(1)
	return l, 0, nil
}

// readHold tells a reentrant owner's shared read hold apart from its write
// hold ("<owner>:write") and from a Mutex hold ("<owner>") in Client.holds.
const readHold = ":read"
