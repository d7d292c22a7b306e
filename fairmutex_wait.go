package relock

import (
	"context"
	"errors"
	"time"

	"github.com/relock-go/relock/internal/door"
	"github.com/relock-go/relock/internal/layout"
	"github.com/relock-go/relock/internal/notify"
	"github.com/relock-go/relock/internal/scripts"
	"github.com/relock-go/relock/internal/wait"
)

// Waiting in a fair lock's queue.
//
// A Lock call that cannot have the lock at once joins the queue in Redis in
// that same attempt, and sleeps until it is woken or granted the lock, the holder's TTL runs
// out, its heartbeat is due, ctx ends, or the Client is closed, in the one
// waiting loop (wait.Loop). Every attempt refreshes the call's
// queue entry, so the heartbeat is simply an attempt every third of the
// waiter timeout.
//
// Only the first of the queue is ever woken or granted. A release by relock grants to, or wakes, a
// relock waiter on its Client's grant channel, which the Client keeps
// subscribed while its calls wait and a second after ("fg:" a grant,
// "fn:" check now; see routeGrant): a Client's waiting calls share one
// subscription, confirmed long before most calls queue, so that a call
// neither subscribes, nor checks, nor unsubscribes on its own. A Redisson
// client's release wakes the first on its own channel: a call listens
// there once an attempt finds a holder, or a waiter ahead of it, that is
// not relock's (fair_lock.lua), and once subscribed checks whether it is
// first (a message before the subscription can only have been meant for
// the first).
//
// Passing in the release. A release by a Client whose own calls sleep in the queue
// passes their owners to fair_unlock.lua as candidates: if the first of
// the queue is one of them, the lock goes straight to it, and its Lease is
// passed to the call in process, with no message and no round trip of its
// own. The script only ever gives the lock to the first of the queue, so
// the order holds. As with the Mutex, only one-shot calls (no WithOwner)
// are passed locks, and a candidate must not attempt while a release that
// may pass it the lock runs (it would take the hold as a second lease).

// acceptGrant makes the Lease of a grant to call a by another Client's
// release, or returns nil when it may have run out already (see
// Client.granted). The grant's age counts from when a's queue entry was
// made, by its first attempt or a later one: not before a.joined.
func (m *FairMutex) acceptGrant(a *fairAcquire, g *wait.Grant) *Lease {
	l := m.newLease(a.owner, false, g.Token)
	if !m.c.granted(l, m.group, a.cfg, g, a.joined) {
		return nil
	}
	return l
}

// wakeHead wakes the head of the queue to attempt, once this call
// took the lock from the queue for a fixed lease: the head was given the
// previous holder's TTL, and the new hold may end sooner, without a
// message, when its lease runs out. A hold under the watchdog ends with a
// release, which wakes the head, or is lost, and the head's heartbeat
// bounds its wait then. On failure the heartbeat bounds it too.
func (m *FairMutex) wakeHead(ctx context.Context) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), m.c.cfg.cleanup)
	defer cancel()
	keys, args := scripts.FairTellRequest{Keys: m.keys, Waiters: m.argWaiters, Publish: m.c.publish, GrantPrefix: m.argGrantPrefix}.Build()
	if err := m.c.door.Run(ctx, scripts.FairTell, keys, args...).Err(); err != nil {
		m.c.cfg.logger.Debug("relock: cannot wake the next fair waiter of a fixed lease", "name", m.name, "err", err)
	}
}

// nextTry is how long a waiter sleeps at most after an attempt that
// returned ttl (negative: unknown): until the heartbeat is due, or sooner
// if the holder's TTL (or the first waiter's deadline, or the liveness
// deadline of the waiter ahead; see fair_lock.lua) runs out first.
func (m *FairMutex) nextTry(ttl time.Duration) time.Duration {
	d := m.waiterTimeout / 3
	if ttl >= 0 && ttl+time.Millisecond < d {
		d = ttl + time.Millisecond
	}
	return d
}

// wait sleeps in the queue between attempts (wait.Loop), on the Client's
// grant channel, and on the call's own channel once a Redisson client may
// wake it there; first is the result of its first attempt. Whatever ends
// it without the lock, the call leaves the queue before it returns.
func (m *FairMutex) wait(ctx context.Context, a *fairAcquire, first wait.Result[*Lease]) (*Lease, error) {
	var l *Lease
	var err error
	if a.cfg.spin != nil {
		// An attempt refreshes the call's place in the queue: the heartbeat
		// bounds every sleep (nextTry).
		l, err = spin(ctx, m.c, "lock", m.name, a.cfg.spin, first, a)
	} else {
		// Only Redisson's releases publish on the call's own channel.
		// A one-shot call's waiter a release of this Client may claim.
		wt := wait.Wait{Op: "lock", Name: m.name, Channel: layout.WaiterChannel(m.channel, a.owner), Policy: notify.WakeOne,
			Local: m.name, Waiter: a.newWaiter(!a.reentrant), Grants: m.grants,
			Joined: true, Sent: a.joined}
		l, err = wait.Loop(ctx, m.c.fairEnv, wt, a, first)
	}
	if l != nil && a.cfg.fixed {
		m.wakeHead(ctx)
	}
	return l, err
}

// Attempt, Accept, Join and End make a FairMutex call its own waiting
// call (wait.Call): its attempts queue it and refresh its place
// (fair_lock.lua). It listens on its own channel once an attempt found a
// holder, or waiters ahead, that are not relock's; once that channel is
// confirmed, it checks whether it may be first in place of an attempt
// (first): only the first of the queue is ever woken, so a message before
// the subscription can only have been meant for the first.
func (a *fairAcquire) Attempt(ctx context.Context, confirmed bool) (wait.Result[*Lease], error) {
	if confirmed && !a.m.first(ctx, a.owner) {
		return wait.Result[*Lease]{}, nil // no attempt: it sleeps on
	}
	l, ttl, err := a.m.attempt(ctx, a)
	return wait.Result[*Lease]{Got: l, Retry: a.m.nextTry(ttl), Listen: a.other}, err
}

func (a *fairAcquire) Accept(g *wait.Grant) *Lease { return a.m.acceptGrant(a, g) }

func (a *fairAcquire) Join() {}

// End takes the call out of the queue if it may be there. A one-shot
// owner that leaves wants nothing: a hold of its id is undone with the
// queue entry, whether another Client's release granted it (a release of
// this Client that had claimed the call may be granting it at the same
// time: whichever of the two comes second finds nothing to free) or a
// pass whose reply was lost left it. A reentrant owner is never granted
// the lock by a release.
func (a *fairAcquire) End(queued bool) {
	if !queued {
		return
	}
	mode := scripts.LeaveOnly
	if !a.reentrant {
		mode = scripts.UndoOneShot
	}
	a.m.leave(a, mode)
}

// first reports whether owner may be first in the queue, or hold the
// lock. Called once subscribed, it tells whether a message meant for owner
// may have been missed before: only the first waiter is woken, a waiter
// that becomes first later is woken then, and a grant takes the waiter out
// of the queue as it gives it the lock. It costs one pipelined LINDEX and
// HEXISTS, where an attempt would run a script; on error it says yes, and
// the attempt reports the error.
func (m *FairMutex) first(ctx context.Context, owner string) bool {
	xs := []door.Exchange{
		{Cmd: door.Cmd{Args: []any{"lindex", m.queue, 0}, Key: 1}},
		{Cmd: door.Cmd{Args: []any{"hexists", m.name, owner}, Key: 1}},
	}
	m.c.door.Pipe(ctx, xs)
	head, err := xs[0].Reply.Text()
	if err != nil && !errors.Is(err, door.Nil) {
		return true
	}
	holds, err := xs[1].Reply.Bool()
	if err != nil {
		return true
	}
	return head == owner || holds
}
