package relock

import (
	"context"
	"errors"
	"time"

	"github.com/relock-go/relock/internal/scripts"
)

// Direct handoff. When a hold of a Client is released and another lock call
// of the same Client sleeps waiting for that lock, the release and the
// acquisition become one script call (handoff.lua): the lock passes from one
// owner to the other without ever being free, and the waiter is handed its
// Lease without a release message or a round trip of its own. This halves
// the time a contended lock spends changing hands.
//
// It never starves other clients: the script passes the lock on only when
// the releasing client is the only subscriber of the lock's channel, that
// is when no other process (relock or Redisson) waits for it. Otherwise the
// lock is freed and announced as usual.
//
// Only one-shot waiters (no WithOwner) are handed locks: a reentrant owner's
// retried request could otherwise count a hold twice.

// localWaiter is a lock call of this Client asleep on a lock.
type localWaiter struct {
	owner string
	lease time.Duration
	fixed bool

	// guarded by Client.localMu
	asleep  bool // past its subscription and asleep: it may be handed the lock
	claimed bool // a release is handing it the lock; it must not attempt
	gone    bool // it returned while claimed: what it is handed is released

	handed chan *Lease // the handoff's outcome: a Lease, or nil to attempt
}

// enqueue registers w as a waiter for name.
func (c *Client) enqueue(name string, w *localWaiter) {
	c.localMu.Lock()
	c.local[name] = append(c.local[name], w)
	c.localMu.Unlock()
	c.nLocal.Add(1)
}

// leave unregisters w when its lock call returns. A claimed waiter is
// marked gone, and the release that claimed it frees whatever it passes to
// w; a lock handed to w that w did not take (its call returned for another
// reason at the same moment) is freed here.
func (c *Client) leave(name string, w *localWaiter) {
	c.unregister(name, w)
	select {
	case l := <-w.handed:
		if l != nil {
			c.releaseUnwanted(l)
		}
	default:
	}
}

func (c *Client) unregister(name string, w *localWaiter) {
	c.localMu.Lock()
	defer c.localMu.Unlock()
	if w.claimed {
		w.gone = true
	}
	ws := c.local[name]
	for i, x := range ws {
		if x == w {
			ws = append(ws[:i], ws[i+1:]...)
			break
		}
	}
	if len(ws) == 0 {
		delete(c.local, name)
	} else {
		c.local[name] = ws
	}
	c.nLocal.Add(-1)
}

// sleep marks w asleep (eligible for a handoff) or awake. Waking fails,
// returning false, when a release has claimed w: it must then wait for its
// handed outcome instead of attempting.
//
// Waking also drops a stale outcome. A release may claim w just as w wakes
// for another reason, fail to pass the lock on and hand w nil before w
// marks itself awake; w then attempts by itself and the nil stays behind.
// Left there, it would be read on a later sleep as the outcome of the next
// release that claims w, and w would attempt while that release passes it
// the lock: w would take the lock as its own, and the release, finding w
// gone, would free it under w's feet.
func (c *Client) sleep(w *localWaiter, asleep bool) bool {
	c.localMu.Lock()
	defer c.localMu.Unlock()
	if w.claimed {
		return false
	}
	w.asleep = asleep
	if !asleep {
		// Unclaimed, w can hold nothing but a stale nil.
		select {
		case <-w.handed:
		default:
		}
	}
	return true
}

// claim picks the oldest sleeping waiter of name and claims it.
func (c *Client) claim(name string) *localWaiter {
	if c.nLocal.Load() == 0 {
		return nil
	}
	c.localMu.Lock()
	defer c.localMu.Unlock()
	for _, w := range c.local[name] {
		if w.asleep && !w.claimed {
			w.claimed, w.asleep = true, false
			return w
		}
	}
	return nil
}

// deliver gives a claimed waiter its outcome. It reports false when the
// waiter has gone, leaving l (if any) to the caller to release.
func (c *Client) deliver(w *localWaiter, l *Lease) bool {
	c.localMu.Lock()
	defer c.localMu.Unlock()
	if w.gone {
		return false
	}
	if l == nil {
		w.claimed = false // it may attempt again
	}
	// Handed a lease, w stays claimed: it must take the lease, never
	// attempt, since an attempt would find its owner holding the lock and
	// take it as a second lease of the same hold. The channel is empty
	// here (see sleep); the send never blocks all the same.
	select {
	case w.handed <- l:
		return true
	default:
		return false
	}
}

// handOff releases l's hold, passing the lock to w if the script can. It
// returns what unlock.lua would (a negative value when the lock passed on).
func (m *Mutex) handOff(ctx context.Context, l *Lease, w *localWaiter, marker string, flag any) (int64, error) {
	sent := m.c.wd.Now()
	keys, args := m.handOffCall(l, w, marker, flag)
	r, err := scripts.Handoff.Run(ctx, m.c.rdb, keys, args...).Int64()
	if err != nil || r >= 0 {
		// Not passed on (or unknown): the waiter tries itself. A one-shot
		// owner that finds itself holding the lock takes it as its own.
		m.c.deliver(w, nil)
		return r, err
	}
	m.pass(w, uint64(-r), sent)
	return r, nil
}

// handOffCall returns the KEYS and ARGV of handoff.lua releasing l's hold
// for w, with the release marker and its flag as in unlock.lua.
func (m *Mutex) handOffCall(l *Lease, w *localWaiter, marker string, flag any) ([]string, []any) {
	return []string{m.name, m.channel, m.counter, m.named, marker},
		[]any{l.owner, argMsgUnlock, m.c.argPublish, flag, m.c.argMarkerTTL,
			w.owner, w.lease.Milliseconds(), m.c.numsub, m.c.argFencing}
}

// pass makes the Lease of a lock handed to w with the given token by a
// script sent at sent, and gives it to w, or frees it if w gave up
// meanwhile.
func (m *Mutex) pass(w *localWaiter, token uint64, sent int64) {
	next := &Lease{c: m.c, rel: m, name: m.name, owner: w.owner, token: token, done: make(chan struct{})}
	m.c.watch(next, m.group, w.lease, w.fixed, sent)
	m.c.stats.acquired.Add(1)
	m.c.stats.handoffs.Add(1)
	if !m.c.deliver(w, next) {
		m.c.releaseUnwanted(next)
	}
}

// releaseUnwanted releases a lock handed to a call that has gone, within
// the cleanup timeout.
func (c *Client) releaseUnwanted(l *Lease) {
	ctx, cancel := context.WithTimeout(c.ctx, c.cfg.cleanup)
	defer cancel()
	if err := l.Unlock(ctx); err != nil && !errors.Is(err, ErrNotHeld) {
		c.cfg.logger.Warn("relock: cannot release a lock handed to a waiter that left; it expires with its lease",
			"name", l.name, "err", err)
	}
}
