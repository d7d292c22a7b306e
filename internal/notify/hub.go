// Package notify shares pub/sub connections among the waiters of one
// client: channels are reference-counted across waiters, a message wakes as
// many local waiters as its policy says, and after a reconnect every waiter
// of a re-subscribed channel is woken to re-check at once, and the client
// is told (Config.Reconnected). A sharded channel follows its slot: when
// the slot leaves the node (the server's sunsubscribe, or MOVED to a
// subscription), the connection is made again on the slot's new master,
// which is a reconnect like any other.
package notify

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/relock-go/relock/internal/door"
)

// Policy tells how many local waiters a message wakes: a positive number,
// or a negative one for all of them.
type Policy func(payload string) int

// WakeOne wakes one waiter per message.
func WakeOne(string) int { return 1 }

// Config sets up a Hub.
type Config struct {
	// Client opens the hub's pub/sub connections (the door's driver of the
	// user's Redis client, which the hub never closes).
	Client door.PubSubDriver
	// Sharded selects SSUBSCRIBE with one connection per cluster slot
	// (a connection re-subscribes all its channels in one command, which a
	// cluster accepts only for channels of one slot). Otherwise one
	// connection carries every channel.
	Sharded bool
	// Slot maps a channel to its cluster slot; used when Sharded.
	Slot func(channel string) int
	// Health is how long a connection may stay silent before it is pinged;
	// a ping left unanswered for as long again replaces the connection.
	Health time.Duration
	// Linger, if set, tells how long a channel stays subscribed once its
	// last waiter has gone, for waiters that come soon after (0: it is
	// unsubscribed at once).
	Linger func(channel string) time.Duration
	// Reconnected, if set, is called when a channel that was in force is
	// confirmed again: its connection was made again (the driver's
	// reconnect, or the hub's own), so the server may have restarted or failed over
	// meanwhile, and the holders of locks are worth checking now, as the
	// waiters are woken to. It may be called once per channel of the
	// connection, and must not block.
	Reconnected func()
	// Now, if set, is the clock of ConfirmedBefore (default: time since the
	// Hub was made).
	Now    func() int64
	Logger *slog.Logger
}

// Hub multiplexes the waiters of one client over shared subscriptions.
// It is safe for concurrent use.
type Hub struct {
	cfg    Config
	kind   door.PubSubKind // of its connections: from Config.Sharded
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu     sync.Mutex
	conns  map[int]*conn
	closed bool
}

// New returns a Hub; it opens no connection until the first Subscribe.
func New(cfg Config) *Hub {
	if cfg.Health <= 0 {
		cfg.Health = 15 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		base := time.Now()
		cfg.Now = func() int64 { return int64(time.Since(base)) }
	}
	kind := door.PubSubPlain
	if cfg.Sharded {
		kind = door.PubSubSharded
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Hub{cfg: cfg, kind: kind, ctx: ctx, cancel: cancel, conns: make(map[int]*conn)}
}

// ErrClosed is returned by Subscribe on a closed Hub.
var ErrClosed = errors.New("notify: hub closed")

// Subscribe registers a waiter on channel, subscribing the channel if no
// other local waiter has it. The waiter must be closed. The subscription is
// in force once Ready is closed; messages published before may be missed.
func (h *Hub) Subscribe(channel string, policy Policy) (*Waiter, error) {
	return h.subscribe(channel, policy, false)
}

// Keep registers a keeper of channel: it keeps the channel subscribed, as
// a waiter does, for the messages policy acts on and for Config.Reconnected,
// but is never woken, and a channel only keepers hold is not counted by
// Channels. It must be closed, as a waiter.
func (h *Hub) Keep(channel string, policy Policy) (*Waiter, error) {
	return h.subscribe(channel, policy, true)
}

func (h *Hub) subscribe(channel string, policy Policy, keep bool) (*Waiter, error) {
	if policy == nil {
		policy = WakeOne
	}
	key := 0
	if h.cfg.Sharded {
		key = h.cfg.Slot(channel)
	}
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return nil, ErrClosed
	}
	c := h.conns[key]
	if c == nil {
		c = &conn{hub: h, key: key, chans: make(map[string]*chanState), pending: make(map[string]int), leaving: make(map[string]int)}
		h.conns[key] = c
	}
	c.refs++ // keeps c registered until this waiter is added
	h.mu.Unlock()

	w := &Waiter{c: c, wake: make(chan struct{}, 1), keep: keep}
	if c.add(w, channel, policy) {
		h.release(c) // the reference the channel kept while it lingered
	}
	return w, nil
}

// lingerOf returns how long channel lingers without waiters.
func (h *Hub) lingerOf(channel string) time.Duration {
	if h.cfg.Linger == nil {
		return 0
	}
	return h.cfg.Linger(channel)
}

// ConfirmedBefore reports whether channel's subscription has been in
// force, without a break, since before t (on the Config's Now clock): every
// message published after t on channel reaches its waiters, or a
// re-subscription wakes them all (see Waiter.Wake).
func (h *Hub) ConfirmedBefore(channel string, t int64) bool {
	c := h.conn(channel)
	if c == nil {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	ch := c.chans[channel]
	return ch != nil && !c.stopped && ch.confirmed && ch.since < t
}

// conn returns the connection that carries channel, if there is one yet.
func (h *Hub) conn(channel string) *conn {
	key := 0
	if h.cfg.Sharded {
		key = h.cfg.Slot(channel)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.conns[key]
}

// Listening reports whether the hub has channel subscribed (or being
// subscribed) for a waiter.
func (h *Hub) Listening(channel string) bool {
	c := h.conn(channel)
	if c == nil {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.chans[channel] != nil
}

// Channels returns how many channels the hub has subscribed for waiters
// (not those only keepers hold: see Keep).
func (h *Hub) Channels() int { return h.count(false) }

// Lingering returns how many channels the hub keeps subscribed without
// waiters (see Config.Linger).
func (h *Hub) Lingering() int { return h.count(true) }

func (h *Hub) count(lingering bool) int {
	h.mu.Lock()
	conns := make([]*conn, 0, len(h.conns))
	for _, c := range h.conns {
		conns = append(conns, c)
	}
	h.mu.Unlock()
	n := 0
	for _, c := range conns {
		c.mu.Lock()
		for _, ch := range c.chans {
			if (ch.idle != nil) == lingering && (lingering || !kept(ch)) {
				n++
			}
		}
		c.mu.Unlock()
	}
	return n
}

// kept reports whether only keepers hold ch (see Keep).
func kept(ch *chanState) bool {
	for _, w := range ch.waiters {
		if !w.keep {
			return false
		}
	}
	return len(ch.waiters) > 0
}

// Close closes every connection and waits for their goroutines. Waiters
// still registered are never woken again.
func (h *Hub) Close() {
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return
	}
	h.closed = true
	conns := h.conns
	h.conns = nil
	h.mu.Unlock()
	h.cancel()
	for _, c := range conns {
		c.close()
	}
	h.wg.Wait()
}

// release drops the reference a Subscribe or a waiter had on c, and closes
// c when nothing uses it and it is one of many (sharded) connections.
func (h *Hub) release(c *conn) {
	h.mu.Lock()
	c.refs--
	drop := c.refs == 0 && h.cfg.Sharded && !h.closed
	if drop {
		delete(h.conns, c.key)
	}
	h.mu.Unlock()
	if drop {
		c.close()
	}
}

// Waiter is one local waiter on one channel.
type Waiter struct {
	c    *conn
	ch   *chanState
	wake chan struct{}
	keep bool // a keeper: never woken (see Keep)
	once sync.Once
}

// Ready is closed once the channel's subscription is confirmed.
func (w *Waiter) Ready() <-chan struct{} { return w.ch.ready }

// Wake receives a value when a message (or a reconnect) wakes this waiter.
func (w *Waiter) Wake() <-chan struct{} { return w.wake }

// Close unregisters the waiter, hands a wake it did not consume to another
// waiter of the channel, and unsubscribes the channel if it was the last
// (after the channel's linger, if it has one).
func (w *Waiter) Close() {
	if w == nil {
		return
	}
	w.once.Do(func() {
		if !w.c.remove(w) {
			w.c.hub.release(w.c)
		}
	})
}

// notify signals w without blocking; it reports whether w had no pending
// wake before.
func (w *Waiter) notify() bool {
	select {
	case w.wake <- struct{}{}:
		return true
	default:
		return false
	}
}
