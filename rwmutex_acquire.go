package relock

import (
	"context"
	"fmt"
	"time"

	"github.com/relock-go/relock/internal/layout"
	"github.com/relock-go/relock/internal/notify"
	"github.com/relock-go/relock/internal/scripts"
)

// argUndo selects the undo mode of the read-write unlock scripts.
var argUndo any = "2"

// argUnheard tells the lock scripts that the call may be queued as a
// writer that does not listen ("o"), whose place its "O" takes
// (rw_wait.lua).
var argUnheard any = "2"

// The kinds of queue member of a waiting reader, and of a one-shot writer
// that listens on the release channel (rw_queue.lua); other writers take
// a Mutex call's kinds ("o" one-shot, "r" reentrant).
var argKindReader, argKindListening any = "R", "O"

// The positions of an RWMutex acquisition's script arguments that change
// between its attempts: its kind of waiter ("" until it queues) and
// whether an earlier attempt may have queued it.
const (
	rwArgKind   = 5
	rwArgJoined = 7
)

// rwAcquire is one RWMutex lock call's fixed arguments, shared by its
// attempts.
type rwAcquire struct {
	lockCall
	rw     *RWMutex
	write  bool
	field  string // the hold's hash field: owner, or owner + ":write"
	keys   []any  // a reentrant owner's with its request marker last
	args   []any
	kind   any    // its kind of waiter, once it queues; nil if it never does
	member string // its place in the queue of waiters, once it queues
	joined int64  // when the first attempt that may have queued it was sent
	// w is its waiter, once it waits: its Member is a one-shot writer's
	// member as a release of its Client that claims it names it to the
	// script (rw_queue.lua): its member in the queue, or the one it would
	// have.
	w *waiter
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
// (batch.Undo). A one-shot owner's field can only come from that attempt;
// a reentrant owner's is undone only if the attempt's request marker shows
// it was applied.
func (a *rwAcquire) Undo(ctx context.Context) {
	rw := a.rw
	mode := argZero
	if a.reentrant {
		mode = argUndo
	}
	keys := rw.unlockKeys
	if a.reentrant {
		keys = with(rw.unlockKeys, a.keys[len(a.keys)-1].(string)) // its request marker
	}
	if err := rwUnlockScript(a.write).Run(ctx, rw.c.batch.Direct(), keys, rw.unlockArgs(a.field, mode, "")...).Err(); err != nil {
		rw.c.cfg.logger.Warn("relock: cannot undo an unanswered lock attempt; it expires with its lease",
			"name", rw.name, "write", a.write, "lease", a.cfg.lease, "err", err)
	}
}

func (rw *RWMutex) lock(ctx context.Context, opts []LockOption, write, wait bool) (*Lease, error) {
	lc, err := rw.c.startLock(ctx, rw.check(), rwOp(write, "lock"), rw.name, opts)
	if err != nil {
		return nil, err
	}
	a := rw.newAcquire(lc, write, wait)

	// A reader that comes while its Client listens on the lock's release
	// channel and its grant channel listens from before its first
	// attempt, which may then queue it: every release after that attempt
	// reaches it, so it owes no attempt once subscribed (see wait).
	var sub *notify.Waiter
	if !write && a.kind != nil && rw.listening() {
		if sub, err = rw.c.hub.Subscribe(rw.channel, lockPolicy); err != nil {
			return nil, ErrClosed
		}
		a.args[rwArgKind] = a.kind
	}

	if write && a.kind != nil && !rw.takeTurn(a) {
		return rw.wait(ctx, a, result{Retry: retryAfter(-1)}, nil)
	}
	r, err := a.Attempt(ctx, false)
	if err != nil && !isServerError(err) {
		rw.leaveQueue(a) // it may have joined the queue
	}
	if r.Got != nil || err != nil || !wait {
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
// of the write side if write, that waits if wait.
func (rw *RWMutex) newAcquire(lc lockCall, write, wait bool) *rwAcquire {
	a := &rwAcquire{lockCall: lc, rw: rw, write: write}
	a.field = a.owner
	if write {
		a.field += ":write"
	}
	flag := argZero
	a.keys = rw.lockKeys // one-shot owners need no request marker
	switch {
	case a.reentrant:
		flag = argOne
		a.keys = with(rw.lockKeys, requestMarker(rw.name, a.owner))
	case !write:
		// The hold key a one-shot reader's lock writes, its first.
		a.keys = with(rw.lockKeys, layout.ReaderHold(rw.name, a.owner, 1))
	}
	a.args = []any{a.lease, a.owner, flag, rw.c.argMarkerTTL, rw.holds, argEmpty, argGrantTTL, argZero}
	if write {
		a.args[4] = rw.c.argFencing
	}
	// Calls queue where a release may grant to them: not with replica
	// sync (see unlockArgs), not when they spin. A writer's attempts
	// queue it from the first, as one that does not listen on the
	// release channel; a reader joins once it listens (see join).
	if wait && a.cfg.spin == nil && !rw.c.rsync.mayWait() {
		switch {
		case !write:
			a.kind = argKindReader
		default:
			a.kind = rw.c.waiterKind(a.reentrant)
			a.args[rwArgKind] = a.kind
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
		a.args[rwArgKind] = argEmpty // it joins once it has the turn
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
func (rw *RWMutex) wait(ctx context.Context, a *rwAcquire, first result, sub *notify.Waiter) (*Lease, error) {
	// A one-shot writer that queues may be claimed by a release of its
	// Client, which passes it the lock.
	claimable := a.kind != nil && a.write && !a.reentrant
	a.w = newWaiter(a.owner, a.cfg, claimable)
	wt := waitFor{Op: rwOp(a.write, "lock"), Name: rw.name, Channel: rw.channel, Policy: lockPolicy,
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
	if a.kind != nil {
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
				a.w.Member = queueMember(a.cfg.lease, argKindOneShot.(string), a.owner)
				wt.Joinable = joinable
			}
		}
	}
	first.Listen = a.listens()
	return waitLock(ctx, rw.c.localEnv, wt, a, first)
}

// Attempt, Accept, Join and End make an RWMutex lock call its own
// waiting call (wait.Call).
func (a *rwAcquire) Attempt(ctx context.Context, _ bool) (result, error) {
	l, ttl, err := a.rw.attempt(ctx, a)
	return result{Got: l, Retry: retryAfter(ttl), Listen: a.listens()}, err
}

// listens reports whether the call listens on the lock's release
// channel: a writer that queues only once it has seen a holder other than
// a relock writer.
func (a *rwAcquire) listens() bool { return !a.write || a.kind == nil || a.other }

func (a *rwAcquire) Accept(g *grant) *Lease {
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
		if a.args[rwArgKind] != argKindListening {
			a.args[rwArgKind] = argKindListening
			if a.member != "" {
				a.args[rwArgJoined] = argUnheard // its "O" takes the place of its "o"
			}
		}
	case a.member == "":
		a.args[rwArgKind] = a.kind
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
func (rw *RWMutex) accept(a *rwAcquire, g *grant) *Lease {
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
	keys, args := rw.unlockKeys, rw.unlockArgs(field, argZero, a.member)
	if err := rw.c.leave(context.Background(), rw.name, func(ctx context.Context) error {
		return rwUnlockScript(a.write).Run(ctx, rw.c.batch.Direct(), keys, args...).Err()
	}); err != nil {
		rw.c.cfg.logger.Warn("relock: cannot leave the queue of a lock; the Client's next call on it tries again",
			"name", rw.name, "err", err)
	}
}

// attempt runs the lock script of one side once. It returns a Lease, or
// the lock's TTL, or an error. An attempt whose outcome is unknown is
// undone before returning.
func (rw *RWMutex) attempt(ctx context.Context, a *rwAcquire) (*Lease, time.Duration, error) {
	script := scripts.RWReadLock
	var rel releaser = &rw.r
	if a.write {
		script, rel = scripts.RWWriteLock, &rw.w
	}
	granted := positive
	if !a.write {
		granted = nonNegative // a reader's reply is the token counter, 0 before any writer
	}
	r, sent, err := rw.c.acquire(ctx, rw.name, script, a.keys, a.args, a, granted, nil)
	if r < 0 {
		a.other = (-r-1)&1 == 1
	}
	kind := a.args[rwArgKind]
	queues := kind != argEmpty && (err != nil || r < 0 && (kind != argKindOneShot || !a.other))
	if queues && (a.member == "" || a.args[rwArgJoined] == argUnheard) {
		// This attempt may have queued the call, or given it a member
		// that listens in its place (rw_wait.lua): later attempts leave
		// the queue when they acquire, and so does the call if it gives
		// up.
		if a.member == "" {
			a.joined = sent
		}
		a.member = queueMember(a.cfg.lease, kind.(string), a.owner)
		a.args[rwArgJoined] = argOne
		if a.w != nil {
			// Before the call sleeps again, and so before any release may
			// claim its waiter (wait.List's sleep and Claim share a lock).
			a.w.Member = a.member
		}
	}
	if err != nil {
		return nil, 0, opError(ctx, rwOp(a.write, "lock"), rw.name, err)
	}
	if r < 0 {
		return nil, time.Duration((-r-1)>>1-1) * time.Millisecond, nil
	}
	if a.write && r == 0 {
		return nil, 0, fmt.Errorf("relock: lock %q: %w", rw.name, ErrUpgrade)
	}
	l := &Lease{
		c:         rw.c,
		rel:       rel,
		name:      rw.name,
		field:     a.field,
		reentrant: a.reentrant,
		token:     uint64(r),
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
