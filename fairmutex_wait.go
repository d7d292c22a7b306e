package relock

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/relock-go/relock/internal/notify"
	"github.com/relock-go/relock/internal/scripts"
)

// Waiting in a fair lock's queue.
//
// A Lock call that cannot have the lock at once joins the queue in Redis in
// that same attempt, and sleeps until it is told, the holder's TTL runs
// out, its heartbeat is due, ctx ends, or the Client is closed, in the one
// waiting loop (Client.waitQueued). Every attempt refreshes the call's
// queue entry, so the heartbeat is simply an attempt every third of the
// waiter timeout.
//
// Only the first of the queue is ever told. A release by relock tells a
// relock waiter on its Client's grant channel, which the Client keeps
// subscribed while its calls wait and a second after ("fg:" a grant,
// "fn:" check now; see routeGrant): a Client's waiting calls share one
// subscription, confirmed long before most calls queue, so that a call
// neither subscribes, nor checks, nor unsubscribes on its own. A Redisson
// client's release tells the first on its own channel: a call listens
// there once an attempt finds a holder, or a waiter ahead of it, that is
// not relock's (fair_lock.lua), and once subscribed checks whether it is
// first (a message before the subscription can only have been meant for
// the first).
//
// Direct handoff. A release by a Client whose own calls sleep in the queue
// passes their owners to fair_unlock.lua as candidates: if the first of
// the queue is one of them, the lock goes straight to it, and its Lease is
// handed over in the process, with no message and no round trip of its
// own. The script only ever gives the lock to the first of the queue, so
// the order holds. As with the Mutex, only one-shot calls (no WithOwner)
// are handed locks, and a candidate must not attempt while a release that
// may hand it the lock runs (it would take the hold as a second lease).

// fairMaxCandidates caps the candidates of one release.
const fairMaxCandidates = 16

// acceptGrant makes the Lease of a grant to call a by another Client's
// release, or returns nil when it may have run out already (see
// Client.granted). The grant's age counts from when a's queue entry was
// made, by its first attempt or a later one: not before a.joined.
func (m *FairMutex) acceptGrant(a *fairAcquire, g *grant) *Lease {
	l := m.newLease(a.owner, false, g.token)
	if !m.c.granted(l, m.group, a.cfg, g, a.joined) {
		return nil
	}
	return l
}

// handOff runs fair_unlock.lua with ws as candidates and hands the lock to
// the one it passed to, if any. It returns what Lease.Unlock expects of a
// releaser: negative when the lock passed on.
func (m *FairMutex) handOff(ctx context.Context, keys []any, args []any, ws []*waiter) (int64, error) {
	for _, w := range ws {
		args = append(args, w.Owner, heldFor(w).lease.Milliseconds())
	}
	sent := m.c.wd.Now()
	v, err := scripts.FairUnlock.Run(ctx, m.c.batch.Direct(), keys, args...).Result()
	if err != nil {
		// Unknown outcome: a candidate given the lock finds it holds it
		// when it attempts, and takes it as its own.
		m.c.fair.Settle(ws, -1, nil, true)
		return 0, err
	}
	r, ok := v.([]any)
	if !ok || len(r) != 4 {
		m.c.fair.Settle(ws, -1, nil, false)
		n, _ := v.(int64)
		return n, nil
	}
	token, _ := r[0].(int64)
	i, _ := r[1].(int64)
	if i < 1 || int(i) > len(ws) || token <= 0 {
		m.c.fair.Settle(ws, -1, nil, true)
		return 0, fmt.Errorf("unexpected reply %v", v)
	}
	w := ws[i-1]
	next := m.newLease(w.Owner, false, uint64(token))
	if heads, first := fairHeadsOf(r[2], r[3]); len(heads) > 0 {
		// Tokens reserved for passing it on in process to the next heads.
		next.chain = newFairChain(first, heads)
	}
	cfg := heldFor(w)
	m.c.watch(next, m.group, cfg.lease, cfg.fixed, sent)
	m.c.stats.acquired.Add(1)
	m.c.stats.handoffs.Add(1)
	if !m.c.fair.Settle(ws, int(i-1), next, false) {
		m.c.releaseUnwanted(next)
	} else {
		// w returns with next at once and leaves its subscription, if
		// any, to us: the unsubscribe is off the path of the lock's next
		// handover.
		w.Sub.Close() // nil without one
	}
	return -1, nil
}

// tellHead tells the head of the queue to check again, once this call
// took the lock from the queue for a fixed lease: the head was told the
// previous holder's TTL, and the new hold may end sooner, without a
// message, when its lease runs out. A hold under the watchdog ends with a
// release, which tells the head, or is lost, and the head's heartbeat
// bounds its wait then. On failure the heartbeat bounds it too.
func (m *FairMutex) tellHead(ctx context.Context) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), m.c.cfg.cleanup)
	defer cancel()
	if err := scripts.FairTell.Run(ctx, m.c.batch.Direct(), m.queueKeys, m.argChannel, m.c.publish, m.argGrantPrefix).Err(); err != nil {
		m.c.cfg.logger.Debug("relock: cannot tell the next fair waiter of a fixed lease", "name", m.name, "err", err)
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

// wait sleeps in the queue between attempts, in Client.waitQueued, on the
// Client's grant channel, and on the call's own channel once a Redisson
// client may tell it there. Whatever ends it without the lock, the call
// leaves the queue before it returns.
func (m *FairMutex) wait(ctx context.Context, a *fairAcquire, ttl time.Duration) (*Lease, error) {
	q := &fairQueued{m: m, a: a, ctx: ctx}
	if a.cfg.spin != nil {
		// An attempt refreshes the call's place in the queue: the heartbeat
		// bounds every sleep.
		l, err := m.c.spinLock(ctx, "lock", m.name, a.cfg.spin, ttl, m.waiterTimeout/3, func(ctx context.Context) (*Lease, time.Duration, error) {
			return m.attempt(ctx, a)
		})
		switch {
		case l == nil:
			q.Leave()
		case a.cfg.fixed:
			m.tellHead(ctx)
		}
		return l, err
	}
	// Only Redisson's releases publish on the call's own channel.
	// A one-shot call's waiter a release of this Client may claim.
	w := newWaiter(a.owner, a, !a.reentrant)
	wt := waitFor{Op: "lock", Name: m.name, Channel: m.channel + ":" + a.owner, Policy: notify.WakeOne,
		ListenWhen: &a.other, List: &m.c.fair, Local: m.name, Waiter: w, Grants: m.grants,
		Joined: true, Sent: a.joined}
	l, err := m.c.waitQueued(ctx, wt, q, m.nextTry(ttl))
	if err != nil {
		return nil, err
	}
	if l == nil {
		l = q.l
	}
	if a.cfg.fixed {
		m.tellHead(ctx)
	}
	return l, nil
}

// fairQueued is a FairMutex call as Client.waitQueued runs it. Its attempts
// queue it and refresh its place (fair_lock.lua).
type fairQueued struct {
	m   *FairMutex
	a   *fairAcquire
	ctx context.Context // the call's, for leave
	l   *Lease          // once taken
}

func (q *fairQueued) Attempt(ctx context.Context) (bool, time.Duration, error) {
	l, ttl, err := q.m.attempt(ctx, q.a)
	q.l = l
	return l != nil, q.m.nextTry(ttl), err
}

func (q *fairQueued) Accept(g *grant) bool {
	q.l = q.m.acceptGrant(q.a, g)
	return q.l != nil
}

func (q *fairQueued) Join() {}

// confirmed reports whether the call may be first in the queue, once it
// listens on its channel: only the first of the queue is ever told, so a
// message before the subscription can only have been meant for the first.
func (q *fairQueued) Confirmed(ctx context.Context) bool { return q.m.first(ctx, q.a.owner) }

// leave takes the call out of the queue. A one-shot owner that leaves
// wants nothing: a hold of its id is undone with the queue entry, whether
// another Client's release granted it (a release of this Client that had
// claimed the call may be granting it at the same time: whichever of the
// two comes second finds nothing to free) or a handoff whose reply was
// lost left it. A reentrant owner is never granted the lock by a release.
func (q *fairQueued) Leave() {
	mode := fairLeaveOnly
	if !q.a.reentrant {
		mode = fairUndoOneShot
	}
	q.m.leave(q.a, mode)
}

// first reports whether owner may be first in the queue, or hold the
// lock. Called once subscribed, it tells whether a message meant for owner
// may have been missed before: only the first waiter is told, a waiter
// that becomes first later is told then, and a grant takes the waiter out
// of the queue as it gives it the lock. It costs one pipelined LINDEX and
// HEXISTS, where an attempt would run a script; on error it says yes, and
// the attempt reports the error.
func (m *FairMutex) first(ctx context.Context, owner string) bool {
	var head *redis.StringCmd
	var holds *redis.BoolCmd
	_, err := m.c.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		head = p.LIndex(ctx, m.queue, 0)
		holds = p.HExists(ctx, m.name, owner)
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return true
	}
	return head.Val() == owner || holds.Val()
}
