package relock

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/relock-go/relock/internal/notify"
	"github.com/relock-go/relock/internal/scripts"
)

// Waiting in a fair lock's queue.
//
// A Lock call that cannot have the lock at once joins the queue in Redis in
// that same attempt and subscribes to its own channel. Once subscribed it
// tries once more if it is now first in the queue (only the first is ever
// told, so a message published before the subscription can only have been
// meant for the first), and sleeps until it is told on its channel, the
// holder's TTL runs out, its heartbeat is due, ctx ends, or the Client is
// closed. Every attempt refreshes the call's queue entry, so the heartbeat
// is simply an attempt every third of the waiter timeout.
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

// fairPolicy is the policy of a fair waiter's own channel: every message
// wakes it; a grant ("g:<token>:<ttl ms>:<ms left of its liveness>") is
// kept for it first.
func (c *Client) fairPolicy(w **waiter) notify.Policy {
	return func(payload string) int {
		rest, ok := strings.CutPrefix(payload, "g:")
		if !ok || *w == nil {
			return 1
		}
		if g, _, ok := parseGrant(rest); ok {
			c.fair.keep(*w, g)
		}
		return 1
	}
}

// acceptGrant makes the Lease of a grant to call a by another Client's
// release, or returns nil when it may have run out already (see
// Client.granted). The grant's third number is how long a's queue entry
// had left to live: its last refresh, by the attempt sent at a.refreshed,
// was waiterTimeout before the end of that, so the grant came
// waiterTimeout - left after that attempt.
func (m *FairMutex) acceptGrant(a *fairAcquire, g *grant) *Lease {
	g.age = max(m.waiterTimeout-g.age, 0)
	l := m.newLease(a.owner, false, g.token)
	if !m.c.granted(l, m.group, a.cfg, g, a.refreshed) {
		return nil
	}
	return l
}

// depart unregisters w as its call returns, and reports whether a
// release had claimed it: that release then frees whatever it passes to
// w. A lock handed to w that w did not take is released.
func (m *FairMutex) depart(w *waiter) bool {
	claimed, unwanted := m.c.fair.remove(m.name, w)
	if unwanted != nil {
		m.c.releaseUnwanted(unwanted)
	}
	return claimed
}

// handOff runs fair_unlock.lua with ws as candidates and hands the lock to
// the one it passed to, if any. It returns what Lease.Unlock expects of a
// releaser: negative when the lock passed on.
func (m *FairMutex) handOff(ctx context.Context, keys []any, args []any, ws []*waiter) (int64, error) {
	for _, w := range ws {
		args = append(args, w.owner, w.lease.Milliseconds())
	}
	sent := m.c.wd.Now()
	v, err := scripts.FairUnlock.Run(ctx, m.c.rdb, keys, args...).Result()
	if err != nil {
		// Unknown outcome: a candidate given the lock finds it holds it
		// when it attempts, and takes it as its own.
		m.c.fair.settle(ws, -1, nil, true)
		return 0, err
	}
	r, ok := v.([]any)
	if !ok || len(r) != 2 {
		m.c.fair.settle(ws, -1, nil, false)
		n, _ := v.(int64)
		return n, nil
	}
	token, _ := r[0].(int64)
	i, _ := r[1].(int64)
	if i < 1 || int(i) > len(ws) || token <= 0 {
		m.c.fair.settle(ws, -1, nil, true)
		return 0, fmt.Errorf("unexpected reply %v", v)
	}
	w := ws[i-1]
	next := m.newLease(w.owner, false, uint64(token))
	m.c.watch(next, m.group, w.lease, w.fixed, sent)
	m.c.stats.acquired.Add(1)
	m.c.stats.handoffs.Add(1)
	if !m.c.fair.settle(ws, int(i-1), next, false) {
		m.c.releaseUnwanted(next)
	} else {
		// w returns with next at once and leaves its subscription to us:
		// the unsubscribe is off the path of the lock's next handover.
		w.sub.Close()
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
	if err := scripts.FairTell.Run(ctx, m.c.rdb, append(m.leaveKeys[:4:4], m.aliveKey), msgUnlock, m.c.publish).Err(); err != nil {
		m.c.cfg.logger.Debug("relock: cannot tell the next fair waiter of a fixed lease", "name", m.name, "err", err)
	}
}

// nextTry is how long a waiter sleeps at most after an attempt that
// returned ttl (negative: unknown): until the heartbeat is due, or sooner
// if the holder's TTL (or the first waiter's deadline) runs out first.
func (m *FairMutex) nextTry(ttl time.Duration) time.Duration {
	d := m.waiterTimeout / 3
	if ttl >= 0 && ttl+time.Millisecond < d {
		d = ttl + time.Millisecond
	}
	return d
}

// wait sleeps in the queue between attempts. Whatever ends it without the
// lock, the call leaves the queue before it returns.
func (m *FairMutex) wait(ctx context.Context, a *fairAcquire, ttl time.Duration) (l *Lease, err error) {
	m.c.stats.waits.Add(1)
	var sub *notify.Waiter
	var fw *waiter
	var taken bool // l was handed over by a release, which unsubscribes
	defer func() {
		// A one-shot owner that leaves holds nothing, unless a release
		// that claimed it is passing it the lock (and then releases it).
		// A hold of its id is otherwise left by a handoff whose reply was
		// lost: undo it with the queue entry.
		undo := !a.reentrant
		if fw != nil && m.depart(fw) {
			undo = false
		}
		if sub != nil && !taken {
			sub.Close()
		}
		if l != nil {
			if a.cfg.fixed {
				m.tellHead(ctx)
			}
			return
		}
		mode := fairLeaveOnly
		if undo {
			mode = fairUndoOneShot
		}
		lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), m.c.cfg.cleanup)
		defer cancel()
		m.leave(lctx, a, mode)
	}()
	if a.cfg.spin != nil {
		return m.spin(ctx, a, ttl)
	}
	var policy notify.Policy = notify.WakeOne
	if !a.reentrant {
		fw = newWaiter(a.owner, a.cfg, false)
		policy = m.c.fairPolicy(&fw)
	}
	if sub, err = m.c.hub.Subscribe(m.channel+":"+a.owner, policy); err != nil {
		sub, fw = nil, nil
		return nil, ErrClosed
	}
	if fw != nil {
		fw.sub = sub
		m.c.fair.add(m.name, fw)
	}
	timer := time.NewTimer(m.nextTry(ttl))
	defer timer.Stop()
	ready := sub.Ready()
	for {
		// Once subscribed, and a later attempt failed, only a message, a
		// handoff, the holder's TTL, the heartbeat or the end of ctx wake
		// this call.
		asleep := ready == nil
		if asleep {
			m.c.stats.asleep.Add(1)
			if fw != nil {
				m.c.fair.sleep(fw)
			}
		}
		var handed, subscribed bool
		select {
		case <-ready:
			ready, subscribed = nil, true
		case <-sub.Wake():
			if g, _, _ := m.c.fair.takeNews(fw); g != nil {
				if l = m.acceptGrant(a, g); l != nil {
					if asleep {
						m.c.stats.asleep.Add(-1)
					}
					return l, nil
				}
			} else {
				m.c.stats.wakeups.Add(1)
			}
		case l = <-fw.handedChan():
			handed, taken = true, l != nil
		case <-timer.C:
		case <-ctx.Done():
			err = fmt.Errorf("relock: lock %q: %w", m.name, ctx.Err())
		case <-m.c.closing:
			err = ErrClosed
		}
		if asleep {
			m.c.stats.asleep.Add(-1)
		}
		if l != nil || err != nil {
			return l, err
		}
		if subscribed && !m.first(ctx, a.owner) {
			continue // not first: a release from now on tells us
		}
		if fw != nil && asleep && !handed && !m.c.fair.wake(fw) {
			// A release may be handing us the lock.
			if l, err = m.c.outcome(ctx, fw, m.name); l != nil || err != nil {
				taken = l != nil
				return l, err
			}
		}
		l, ttl, err = m.attempt(ctx, a)
		if l != nil || err != nil {
			return l, err
		}
		timer.Reset(m.nextTry(ttl))
	}
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

// spin waits by backoff (WithSpin) instead of on a channel, never longer
// than the heartbeat.
func (m *FairMutex) spin(ctx context.Context, a *fairAcquire, ttl time.Duration) (l *Lease, err error) {
	// An attempt refreshes the call's place in the queue: the heartbeat
	// bounds every sleep.
	err = m.c.spin(ctx, "lock", m.name, a.cfg.spin, ttl, m.waiterTimeout/3, func() (bool, time.Duration, error) {
		var err error
		l, ttl, err = m.attempt(ctx, a)
		return l != nil, ttl, err
	})
	return l, err
}
