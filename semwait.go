package relock

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/relock-go/relock/internal/notify"
)

// Waiting for permits and for latches.
//
// A waiting call registers with the Client's pub/sub hub on the primitive's
// channel, tries again once the subscription is confirmed, then sleeps
// until it is woken, its retry time passes, ctx ends or the Client closes,
// and tries again.
//
// A semaphore's channel carries the number of permits available after a
// release. The hub hands each message to the channel's policy; for
// semaphore channels the policy wakes the local waiters itself, through
// the registry below, which knows how many permits each asks for: oldest
// first, every waiter whose request still fits in the number published
// (a request too large is skipped, not allowed to hold up smaller ones
// behind it: other clients compete for the permits anyway). A count of 0
// wakes every waiter: nothing was freed, but a permit's lease was cut below
// the earliest expiry the waiters were told (permit_updatelease.lua), and
// each must learn the new one. The policy tells the hub to wake nobody. A
// reconnect still wakes every waiter through the hub.

// fallbackRecheck bounds the sleep of a waiter that has no better time to
// try again: a missed message costs it at most this long.
const fallbackRecheck = 2 * time.Second

// permitWaiter is a call of this process waiting for n permits.
type permitWaiter struct {
	n    int
	wake chan struct{} // buffered: a wake is never lost
}

// permitRegistry holds a Client's waiting semaphore calls by channel,
// oldest first. Entries go when their last waiter does.
type permitRegistry struct {
	sync.Mutex
	m map[string][]*permitWaiter
}

func (r *permitRegistry) add(k string, w *permitWaiter) {
	r.Lock()
	if r.m == nil {
		r.m = make(map[string][]*permitWaiter)
	}
	r.m[k] = append(r.m[k], w)
	r.Unlock()
}

// remove unregisters w; a wake w did not use goes to the
// oldest waiter without one, so that it is never lost with w.
func (r *permitRegistry) remove(k string, w *permitWaiter) {
	r.Lock()
	defer r.Unlock()
	ws := r.m[k]
	for i, x := range ws {
		if x == w {
			ws = append(ws[:i], ws[i+1:]...)
			break
		}
	}
	if len(ws) == 0 {
		delete(r.m, k)
		return
	}
	r.m[k] = ws
	select {
	case <-w.wake:
		for _, x := range ws {
			if notifyWaiter(x.wake) {
				return
			}
		}
	default:
	}
}

// wake wakes the waiters of k that the number of permits in
// payload can satisfy, oldest first; a payload of 0 wakes every waiter to
// check again. A payload that is not a number wakes the oldest waiter.
func (r *permitRegistry) wake(k string, payload string) {
	free, err := strconv.Atoi(payload)
	r.Lock()
	defer r.Unlock()
	ws := r.m[k]
	if err != nil {
		if len(ws) > 0 {
			notifyWaiter(ws[0].wake)
		}
		return
	}
	recheck := free == 0
	for _, w := range ws {
		if recheck || w.n <= free {
			free -= w.n
			notifyWaiter(w.wake) // one with a wake pending re-checks anyway
		}
	}
}

// notifyWaiter signals a wake channel without blocking; it reports whether
// the channel had no wake pending.
func notifyWaiter(wake chan struct{}) bool {
	select {
	case wake <- struct{}{}:
		return true
	default:
		return false
	}
}

// waitPermits waits on a semaphore's channel for n permits: it sleeps
// between attempts until attempt reports success or an error. attempt
// returns whether it is done and, if not, how long to sleep at most.
//
// hold is the lease of what a successful attempt takes (0: no lease): the
// Client's other waiters on the channel are woken to re-check when it may
// run out (see passOn).
func (c *Client) waitPermits(ctx context.Context, op, name, channel string, n int, retry, hold time.Duration, attempt func() (bool, time.Duration, error)) error {
	k := channel
	w := &permitWaiter{n: n, wake: make(chan struct{}, 1)}
	c.permits.add(k, w)
	defer c.permits.remove(k, w)
	hw, err := c.hub.Subscribe(channel, func(payload string) int {
		c.permits.wake(k, payload)
		return 0
	})
	if err != nil {
		return ErrClosed
	}
	defer hw.Close()
	err = c.sleepOn(ctx, op, name, hw, w.wake, retry, attempt)
	if err == nil && hold > 0 {
		hw.WakeAnotherAfter(hold)
	}
	return err
}

// sleepOn runs attempt each time the waiter is woken (by its hub waiter,
// by own, when the subscription is confirmed, or when retry has passed)
// until attempt is done or fails, ctx ends, or the Client closes. A call
// that gives up passes its retry time on (see passOn).
func (c *Client) sleepOn(ctx context.Context, op, name string, hw *notify.Waiter, own <-chan struct{}, retry time.Duration, attempt func() (bool, time.Duration, error)) error {
	c.stats.waits.Add(1)
	timer := time.NewTimer(retry)
	defer timer.Stop()
	due := time.Now().Add(retry)
	ready := hw.Ready()
	for {
		// Once subscribed, only a message, a reconnect, the retry time or
		// the end of ctx wakes this call.
		asleep := ready == nil
		if asleep {
			c.stats.asleep.Add(1)
		}
		var err error
		select {
		case <-ready:
			ready = nil
		case <-own:
			c.stats.wakeups.Add(1)
		case <-hw.Wake():
			c.stats.wakeups.Add(1)
		case <-timer.C:
		case <-ctx.Done():
			err = fmt.Errorf("relock: %s %q: %w", op, name, ctx.Err())
		case <-c.closing:
			err = ErrClosed
		}
		if asleep {
			c.stats.asleep.Add(-1)
		}
		if err != nil {
			passOn(hw, false, 0, due)
			return err
		}
		done, next, err := attempt()
		if done || err != nil {
			return err
		}
		timer.Reset(next)
		due = time.Now().Add(next)
	}
}
