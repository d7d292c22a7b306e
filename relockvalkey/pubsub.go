package relockvalkey

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	valkey "github.com/valkey-io/valkey-go"

	"github.com/relock-go/relock/internal/door"
)

// OpenPubSub opens a pub/sub connection: a dedicated connection of
// valkey-go, its messages and confirmations taken by hooks. On a cluster,
// a sharded connection goes to the master of its channels' slot, as
// valkey-go routes the first SSUBSCRIBE; a plain one to any node.
func (d *driver) OpenPubSub(ctx context.Context, kind door.PubSubKind, channels ...string) door.PubSub {
	dc, cancel := d.c.Dedicate()
	p := &pubSub{
		dc:      dc,
		cancel:  cancel,
		sharded: kind == door.PubSubSharded,
		arrived: make(chan struct{}, 1),
		sends:   make(chan send, 64),
		closed:  make(chan struct{}),
		done:    make(chan struct{}),
	}
	p.failed = dc.SetPubSubHooks(valkey.PubSubHooks{
		OnMessage: func(m valkey.PubSubMessage) {
			p.put(door.Event{Kind: door.EventMessage, Channel: m.Channel, Payload: m.Message})
		},
		OnSubscription: func(s valkey.PubSubSubscription) {
			switch s.Kind {
			case "subscribe", "ssubscribe":
				p.put(door.Event{Kind: door.EventSubscribed, Channel: s.Channel})
			case "unsubscribe", "sunsubscribe":
				p.put(door.Event{Kind: door.EventUnsubscribed, Channel: s.Channel})
			}
		},
	})
	go p.run()
	if len(channels) > 0 {
		_ = p.Subscribe(ctx, channels...)
	}
	return p
}

// SlotMoved reads the driver's slot map again. valkey-go reads its own
// again by itself once a server answered MOVED, as the refused
// SSUBSCRIBE was.
func (d *driver) SlotMoved(ctx context.Context) { d.Reload(ctx) }

var _ door.PubSubDriver = (*driver)(nil)

// send is one command for the connection's sending goroutine.
type send struct {
	verb     string // SUBSCRIBE, UNSUBSCRIBE or PING
	channels []string
}

// pubSub is a valkey-go dedicated connection as a door.PubSub. Its commands
// go out in order from one goroutine (run), since valkey-go's Do waits for
// a subscription's confirmation; the hooks and that goroutine put events
// on a queue that Receive takes from. valkey-go never makes a dedicated
// connection again: once it fails, Receive reports ErrPubSubClosed and
// the caller opens another.
type pubSub struct {
	dc      valkey.DedicatedClient
	cancel  func()
	sharded bool
	failed  <-chan error // the hooks' end, with its reason
	end     error        // the failure Receive reported, which it reports again

	mu      sync.Mutex
	events  []door.Event
	sent    bool          // a command went out: the connection is bound
	arrived chan struct{} // signalled when events grows

	sends     chan send
	closed    chan struct{} // closed by Close
	closeOnce sync.Once
	done      chan struct{} // closed when run returns
}

// put queues ev for Receive. It never blocks: the hooks run on valkey-go's
// reading goroutine.
func (p *pubSub) put(ev door.Event) {
	p.mu.Lock()
	p.events = append(p.events, ev)
	p.mu.Unlock()
	select {
	case p.arrived <- struct{}{}:
	default:
	}
}

// take returns the oldest queued event, if any.
func (p *pubSub) take() (door.Event, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.events) == 0 {
		return door.Event{}, false
	}
	ev := p.events[0]
	p.events = p.events[1:]
	if len(p.events) > 0 {
		select {
		case p.arrived <- struct{}{}:
		default:
		}
	}
	return ev, true
}

// run sends the queued commands in order until Close.
func (p *pubSub) run() {
	defer close(p.done)
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	go func() {
		<-p.closed
		stop() // a command under way returns at Close
	}()
	for {
		select {
		case s := <-p.sends:
			p.do(ctx, s)
		case <-p.closed:
			return
		}
	}
}

// do sends s and queues what its answer says: a pong, a refusal by a
// cluster (EventMoved), or a failure, which the failed connection reports
// through the hooks' channel too.
func (p *pubSub) do(ctx context.Context, s send) {
	b := p.dc.B()
	var cmd valkey.Completed
	switch {
	case s.verb == "PING":
		cmd = b.Ping().Build()
	case s.verb == "SUBSCRIBE" && p.sharded:
		cmd = b.Ssubscribe().Channel(s.channels...).Build()
	case s.verb == "SUBSCRIBE":
		cmd = b.Subscribe().Channel(s.channels...).Build()
	case p.sharded:
		cmd = b.Sunsubscribe().Channel(s.channels...).Build()
	default:
		cmd = b.Unsubscribe().Channel(s.channels...).Build()
	}
	p.mu.Lock()
	p.sent = true
	p.mu.Unlock()
	err := p.dc.Do(ctx, cmd).Error()
	switch {
	case err == nil:
		if s.verb == "PING" {
			p.put(door.Event{Kind: door.EventPong})
		}
	case moved(err):
		p.put(door.Event{Kind: door.EventMoved})
	}
}

// moved reports whether err is a cluster's answer that a channel's slot
// is served elsewhere (or on its way there).
func moved(err error) bool {
	var re *valkey.ValkeyError
	if !errors.As(err, &re) {
		return false
	}
	msg := re.Error()
	return strings.HasPrefix(msg, "MOVED ") || strings.HasPrefix(msg, "ASK ")
}

// queue hands s to the sending goroutine.
func (p *pubSub) queue(ctx context.Context, s send) error {
	select {
	case p.sends <- s:
		return nil
	case <-p.closed:
		return door.ErrPubSubClosed
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (p *pubSub) Subscribe(ctx context.Context, channels ...string) error {
	return p.queue(ctx, send{verb: "SUBSCRIBE", channels: channels})
}

func (p *pubSub) Unsubscribe(ctx context.Context, channels ...string) error {
	return p.queue(ctx, send{verb: "UNSUBSCRIBE", channels: channels})
}

// Ping asks for a pong. A sharded connection on a cluster that has sent
// nothing yet has no server: valkey-go binds it to the slot of its first
// command, which must be the subscription. It answers at once.
func (p *pubSub) Ping(ctx context.Context) error {
	p.mu.Lock()
	unbound := p.sharded && !p.sent
	p.mu.Unlock()
	if unbound {
		p.put(door.Event{Kind: door.EventPong})
		return nil
	}
	return p.queue(ctx, send{verb: "PING"})
}

// Close closes the dedicated connection (it is not given back to the
// pool with its subscriptions) and stops the sending goroutine.
func (p *pubSub) Close() error {
	p.closeOnce.Do(func() {
		close(p.closed)
		<-p.done
		p.dc.Close()
		p.cancel()
	})
	return nil
}

func (p *pubSub) Receive(ctx context.Context, timeout time.Duration) (door.Event, error) {
	if ev, ok := p.take(); ok {
		return ev, nil
	}
	if p.end != nil {
		return door.Event{}, p.end
	}
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	for {
		select {
		case <-p.arrived:
			if ev, ok := p.take(); ok {
				return ev, nil
			}
		case err, ok := <-p.failed:
			if ev, ok := p.take(); ok {
				return ev, nil // what arrived before the end comes first
			}
			if !ok || err == nil {
				err = errors.New("connection ended")
			}
			p.end = fmt.Errorf("%w: %w", door.ErrPubSubClosed, err)
			return door.Event{}, p.end
		case <-p.closed:
			return door.Event{}, door.ErrPubSubClosed
		case <-timer.C:
			return door.Event{Kind: door.EventSilent}, nil
		case <-ctx.Done():
			return door.Event{}, ctx.Err()
		}
	}
}
