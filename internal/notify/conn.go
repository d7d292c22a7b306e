package notify

import (
	"errors"
	"sync"
	"time"

	"github.com/relock-go/relock/internal/door"
)

// conn is one pub/sub connection and the channels it carries.
type conn struct {
	hub  *Hub
	key  int
	refs int // guarded by hub.mu

	mu      sync.Mutex
	ps      door.PubSub
	chans   map[string]*chanState
	pending map[string]int // subscribe commands sent and not yet confirmed
	leaving map[string]int // unsubscribe commands sent and not yet answered
	done    chan struct{}
	stopped bool
}

// chanState is one subscribed channel and its local waiters.
type chanState struct {
	name      string
	policy    Policy
	waiters   []*Waiter // in arrival order
	confirmed bool      // by the current connection
	since     int64     // when it was last confirmed (Config.Now)
	ready     chan struct{}

	// A subscription not confirmed in time is sent again (see watch).
	retry *time.Timer
	delay time.Duration
	gen   uint64 // tells a timer that fired late from the current one

	idle *time.Timer // while it lingers without waiters (see linger)
}

// Re-subscription delays: the first, and the most the delay doubles to.
const (
	firstResend = 200 * time.Millisecond
	maxResend   = 2 * time.Second
)

// add registers w on channel, subscribing it if needed. It reports whether
// it ended the channel's linger, whose reference on c the caller must then
// release.
func (c *conn) add(w *Waiter, channel string, policy Policy) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	ch := c.chans[channel]
	if ch == nil {
		ch = &chanState{name: channel, policy: policy, ready: make(chan struct{})}
		c.chans[channel] = ch
		c.subscribe(ch)
	}
	ch.waiters = append(ch.waiters, w)
	w.ch = ch
	return c.unlinger(ch)
}

// unlinger stops ch's linger, if any. It reports whether it stopped it
// before its timer ran, so that the linger's reference on c is the
// caller's to release. c.mu is held.
func (c *conn) unlinger(ch *chanState) bool {
	if ch.idle == nil {
		return false
	}
	stopped := ch.idle.Stop()
	ch.idle = nil
	if stopped {
		c.hub.wg.Done()
	}
	return stopped
}

// linger keeps ch subscribed, without waiters, for d; then it is
// unsubscribed unless a waiter came. The linger keeps the reference on c
// of the waiter that left last. c.mu is held.
func (c *conn) linger(ch *chanState, d time.Duration) {
	c.hub.wg.Add(1)
	var t *time.Timer
	t = time.AfterFunc(d, func() {
		defer c.hub.wg.Done()
		c.mu.Lock()
		if ch.idle == t {
			ch.idle = nil
			if len(ch.waiters) == 0 && c.chans[ch.name] == ch {
				c.drop(ch)
			}
		}
		c.mu.Unlock()
		c.hub.release(c)
	})
	ch.idle = t
}

// subscribe sends the subscription for ch, opening the connection and its
// receive loop on first use, and watches for its confirmation. c.mu is
// held.
func (c *conn) subscribe(ch *chanState) {
	if c.stopped {
		return
	}
	c.pending[ch.name]++
	c.watch(ch)
	ctx := c.hub.ctx
	if c.ps == nil {
		c.ps = c.hub.cfg.Client.OpenPubSub(ctx, c.hub.kind, ch.name)
		c.done = make(chan struct{})
		c.hub.wg.Add(1)
		go c.loop(c.ps, c.done)
		return
	}
	if err := c.ps.Subscribe(ctx, ch.name); err != nil {
		c.hub.cfg.Logger.Debug("relock: subscribe failed", "channel", ch.name, "err", err)
	}
}

// watch arms ch's re-subscription timer, unless it is armed. A command
// whose write fails may make the driver reconnect at once (go-redis does)
// and re-subscribe the channels it knew before that command, not the one
// it was sending; a connection may also be replaced without its loop
// seeing an error. So a subscription not confirmed within the delay is
// sent again, with the delay doubling up to maxResend. SUBSCRIBE is
// idempotent: a duplicate confirmation only wakes the channel's waiters
// to re-check. c.mu is held.
func (c *conn) watch(ch *chanState) {
	if ch.retry != nil || c.stopped {
		return
	}
	if ch.delay == 0 {
		ch.delay = firstResend
	}
	ch.gen++
	gen := ch.gen
	c.hub.wg.Add(1)
	ch.retry = time.AfterFunc(ch.delay, func() {
		defer c.hub.wg.Done()
		c.resend(ch, gen)
	})
}

// unwatch disarms ch's re-subscription timer. c.mu is held.
func (c *conn) unwatch(ch *chanState) {
	if ch.retry != nil && ch.retry.Stop() {
		c.hub.wg.Done()
	}
	ch.retry, ch.delay = nil, 0
}

// resend subscribes ch again if its confirmation is still owed.
func (c *conn) resend(ch *chanState, gen uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if ch.gen != gen || ch.retry == nil {
		return // disarmed, or re-armed, since this timer was set
	}
	ch.retry = nil
	if c.stopped || ch.confirmed || c.chans[ch.name] != ch {
		ch.delay = 0
		return
	}
	c.hub.cfg.Logger.Debug("relock: subscription not confirmed; subscribing again", "channel", ch.name, "after", ch.delay)
	ch.delay = min(2*ch.delay, maxResend)
	// Earlier commands are lost or will be confirmed before this one;
	// either confirmation makes the channel ready.
	c.pending[ch.name] = 0
	c.subscribe(ch)
}

// remove unregisters w. It reports whether w's channel now lingers with
// w's reference on c (see linger).
func (c *conn) remove(w *Waiter) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	ch := w.ch
	for i, x := range ch.waiters {
		if x == w {
			ch.waiters = append(ch.waiters[:i], ch.waiters[i+1:]...)
			break
		}
	}
	select {
	case <-w.wake: // a wake this waiter will not use goes to another
		wakeN(ch.waiters, 1)
	default:
	}
	if len(ch.waiters) > 0 || c.chans[ch.name] != ch {
		return false
	}
	if d := c.hub.lingerOf(ch.name); d > 0 && !c.stopped && ch.idle == nil {
		c.linger(ch, d)
		return true
	}
	c.drop(ch)
	return false
}

// drop unsubscribes ch, which has no waiter. c.mu is held.
func (c *conn) drop(ch *chanState) {
	delete(c.chans, ch.name)
	c.unwatch(ch)
	if c.ps == nil || c.stopped {
		return
	}
	if c.hub.cfg.Sharded {
		c.leaving[ch.name]++
	}
	if err := c.ps.Unsubscribe(c.hub.ctx, ch.name); err != nil {
		c.hub.cfg.Logger.Debug("relock: unsubscribe failed", "channel", ch.name, "err", err)
	}
}

// close stops the receive loop and waits for it.
func (c *conn) close() {
	c.mu.Lock()
	c.stopped = true
	for _, ch := range c.chans {
		c.unwatch(ch)
		c.unlinger(ch)
	}
	ps, done := c.ps, c.done
	c.mu.Unlock()
	if ps == nil {
		return
	}
	_ = ps.Close()
	<-done
}

// loop receives from ps until the connection is closed or replaced.
func (c *conn) loop(ps door.PubSub, done chan struct{}) {
	defer c.hub.wg.Done()
	defer close(done)
	ctx := c.hub.ctx
	health := c.hub.cfg.Health
	pinged := false
	backoff := time.Duration(0)
	pause := func() bool {
		backoff = min(max(2*backoff, 10*time.Millisecond), time.Second)
		select {
		case <-time.After(backoff):
			return true
		case <-ctx.Done():
			return false
		}
	}
	for {
		ev, err := ps.Receive(ctx, health)
		if c.isStopped(ps) || ctx.Err() != nil {
			return
		}
		switch {
		case err == nil && (ev.Kind == door.EventMoved || c.ended(ev)):
			// The slot left the node: go where it is now. The map may
			// still be old for a moment; a new MOVED brings us back here.
			c.hub.cfg.Client.SlotMoved(ctx)
			if !pause() {
				return
			}
			if ps, done = c.replace(ps, done); ps == nil {
				return
			}
			pinged = false
		case err == nil && ev.Kind == door.EventSilent && !pinged:
			pinged = true
			_ = ps.Ping(ctx)
		case err == nil && ev.Kind == door.EventSilent:
			// No answer to a ping: the connection is half-open.
			if ps, done = c.replace(ps, done); ps == nil {
				return
			}
			pinged = false
		case errors.Is(err, door.ErrPubSubClosed):
			// The driver does not make this connection again: the hub does.
			if !pause() {
				return
			}
			if ps, done = c.replace(ps, done); ps == nil {
				return
			}
			pinged = false
		case err != nil:
			// The driver makes the connection again at the next Receive.
			c.broken()
			if !pause() {
				return
			}
		default:
			backoff, pinged = 0, false
			switch ev.Kind {
			case door.EventSubscribed:
				c.confirmed(ev.Channel)
			case door.EventMessage:
				c.deliver(ev.Channel, ev.Payload)
			}
		}
	}
}

// ended reports whether ev is the server's end of a sharded subscription
// the hub did not ask to end: Redis 7 sends sunsubscribe to the
// subscribers of a slot that leaves the node (migrated, or failed over).
func (c *conn) ended(ev door.Event) bool {
	if ev.Kind != door.EventUnsubscribed || !c.hub.cfg.Sharded {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.leaving[ev.Channel] > 0 {
		c.leaving[ev.Channel]--
		if c.leaving[ev.Channel] == 0 {
			delete(c.leaving, ev.Channel)
		}
		return false
	}
	return c.chans[ev.Channel] != nil
}

func (c *conn) isStopped(ps door.PubSub) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.stopped || c.ps != ps
}

// replace swaps a silent connection for a new one carrying the same
// channels; the loop goes on with the new one.
//
// A connection closed meanwhile (close has run, or runs) gets no new one:
// replace returns nil, and the loop ends, so that close, which waits for
// the loop, does not wait for a new connection's receive to time out.
func (c *conn) replace(old door.PubSub, done chan struct{}) (door.PubSub, chan struct{}) {
	c.mu.Lock()
	if c.stopped {
		c.mu.Unlock()
		_ = old.Close()
		return nil, done
	}
	names := make([]string, 0, len(c.chans))
	for name := range c.chans {
		names = append(names, name)
	}
	c.markBroken()
	c.ps = c.hub.cfg.Client.OpenPubSub(c.hub.ctx, c.hub.kind, names...)
	for _, name := range names {
		c.pending[name]++
	}
	ps := c.ps
	c.mu.Unlock()
	_ = old.Close()
	return ps, done
}

func (c *conn) broken() {
	c.mu.Lock()
	c.markBroken()
	c.mu.Unlock()
}

// markBroken forgets confirmations owed by a dead connection, and watches
// for the confirmations the re-subscription owes. c.mu is held.
func (c *conn) markBroken() {
	clear(c.pending)
	clear(c.leaving)
	for _, ch := range c.chans {
		ch.confirmed = false
		c.watch(ch)
	}
}

// confirmed records the server's confirmation of a subscription.
//
// The first confirmation of a channel makes it ready, once every
// subscribe command sent for it is confirmed: an earlier command's reply
// may belong to a subscription the channel had before it was last left.
// Its waiters re-check when they see it ready.
//
// A confirmation of a channel that was ready before comes from a
// re-subscription: the driver's after a reconnect, or the hub's own resend.
// A message may have been missed while the channel was not subscribed,
// so every waiter of the channel re-checks at once, and the hub's client
// hears of it (Config.Reconnected). This does not depend on the pending
// count, which a resend during an outage leaves owed.
func (c *conn) confirmed(channel string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.pending[channel] > 0 {
		c.pending[channel]--
		if c.pending[channel] == 0 {
			delete(c.pending, channel)
		}
	}
	ch := c.chans[channel]
	if ch == nil {
		return
	}
	// Any confirmation may follow a break the loop did not see (a
	// connection the driver made again): the channel counts as in force from
	// its last one.
	ch.since = c.hub.cfg.Now()
	select {
	case <-ch.ready:
		ch.confirmed = true
		c.unwatch(ch)
		wakeN(ch.waiters, -1)
		if f := c.hub.cfg.Reconnected; f != nil {
			f()
		}
	default:
		if c.pending[channel] > 0 {
			return
		}
		ch.confirmed = true
		c.unwatch(ch)
		close(ch.ready)
	}
}

func (c *conn) deliver(channel, payload string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if ch := c.chans[channel]; ch != nil {
		wakeN(ch.waiters, ch.policy(payload))
	}
}

// wakeN wakes up to n waiters (all when n < 0), oldest first, skipping
// those that already have a wake pending, and keepers.
func wakeN(waiters []*Waiter, n int) {
	for _, w := range waiters {
		if n == 0 {
			return
		}
		if !w.keep && w.notify() {
			n--
		}
	}
}
