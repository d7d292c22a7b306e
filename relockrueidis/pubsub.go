package relockrueidis

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/redis/rueidis"

	"github.com/relock-go/relock/internal/door"
)

// OpenPubSub opens a pub/sub connection: a dedicated connection of
// rueidis, its messages and confirmations taken by hooks. The connection
// is made by the connection's own goroutine, so that a server that does
// not answer holds up no caller. On a cluster, a sharded connection goes
// to the master of its channels' slot, as rueidis routes the first
// SSUBSCRIBE; a plain one to any node.
func (d *driver) OpenPubSub(_ context.Context, kind door.PubSubKind, channels ...string) door.PubSub {
	p := &pubSub{
		c:       d.c,
		sharded: kind == door.PubSubSharded,
		failed:  make(chan error, 1),
		arrived: make(chan struct{}, 1),
		toSend:  make(chan struct{}, 1),
		closed:  make(chan struct{}),
		done:    make(chan struct{}),
	}
	if len(channels) > 0 {
		_ = p.queue(send{verb: "SUBSCRIBE", channels: channels})
	}
	go p.run()
	return p
}

// SlotMoved reads the driver's slot map again. rueidis reads its own
// again by itself once a server answered MOVED, as the refused
// SSUBSCRIBE was.
func (d *driver) SlotMoved(ctx context.Context) { d.Reload(ctx) }

var _ door.PubSubDriver = (*driver)(nil)

// send is one command for the connection's goroutine.
type send struct {
	verb     string // SUBSCRIBE, UNSUBSCRIBE or PING
	channels []string
}

// pubSub is a rueidis dedicated connection as a door.PubSub. One
// goroutine (run) makes the connection and sends its commands in order,
// since rueidis's Do waits for a subscription's confirmation; the hooks
// and that goroutine put events on a queue that Receive takes from.
// rueidis never makes a dedicated connection again: once it fails,
// Receive reports ErrPubSubClosed and the caller opens another.
type pubSub struct {
	c       rueidis.Client
	sharded bool
	failed  chan error // the connection's end, with its reason, sent once by run
	end     error      // the failure Receive reported, which it reports again

	mu      sync.Mutex
	events  []door.Event
	sends   []send        // for run to send in order
	sent    bool          // a command went out: the connection is bound
	arrived chan struct{} // signalled when events grows
	toSend  chan struct{} // signalled when sends grows

	closed    chan struct{} // closed by Close
	closeOnce sync.Once
	done      chan struct{} // closed when run returns
}

// put queues ev for Receive. It never blocks: the hooks run on rueidis's
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

// run makes the dedicated connection, sends the queued commands in order
// until Close or the connection's end, and closes the connection (it is
// not given back to the pool with its subscriptions).
func (p *pubSub) run() {
	defer close(p.done)
	dc, cancel := p.c.Dedicate()
	defer cancel()
	defer dc.Close()
	ended := dc.SetPubSubHooks(rueidis.PubSubHooks{
		OnMessage: func(m rueidis.PubSubMessage) {
			p.put(door.Event{Kind: door.EventMessage, Channel: m.Channel, Payload: m.Message})
		},
		OnSubscription: func(s rueidis.PubSubSubscription) {
			switch s.Kind {
			case "subscribe", "ssubscribe":
				p.put(door.Event{Kind: door.EventSubscribed, Channel: s.Channel})
			case "unsubscribe", "sunsubscribe":
				p.put(door.Event{Kind: door.EventUnsubscribed, Channel: s.Channel})
			}
		},
	})
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	go func() {
		select {
		case <-p.closed:
			stop() // a command under way returns at Close
		case <-ctx.Done():
		}
	}()
	for {
		select {
		case <-p.toSend:
			for s, ok := p.next(); ok; s, ok = p.next() {
				p.do(ctx, dc, s)
			}
		case err, ok := <-ended:
			if !ok || err == nil {
				err = errors.New("connection ended")
			}
			p.failed <- err
			return
		case <-p.closed:
			return
		}
	}
}

// next returns the oldest command to send, if any.
func (p *pubSub) next() (send, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.sends) == 0 {
		return send{}, false
	}
	s := p.sends[0]
	p.sends = p.sends[1:]
	p.sent = true
	return s, true
}

// do sends s and queues what its answer says: a pong, a refusal by a
// cluster (EventMoved), or a failure, which the failed connection reports
// through the hooks' channel too.
func (p *pubSub) do(ctx context.Context, dc rueidis.DedicatedClient, s send) {
	b := dc.B()
	var cmd rueidis.Completed
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
	err := dc.Do(ctx, cmd).Error()
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
	var re *rueidis.RedisError
	if !errors.As(err, &re) {
		return false
	}
	msg := re.Error()
	return strings.HasPrefix(msg, "MOVED ") || strings.HasPrefix(msg, "ASK ")
}

// queue hands s to the sending goroutine. It never blocks: the caller
// may hold its own lock, and a command under way may wait for a server
// that does not answer.
func (p *pubSub) queue(s send) error {
	select {
	case <-p.closed:
		return door.ErrPubSubClosed
	default:
	}
	p.mu.Lock()
	p.sends = append(p.sends, s)
	p.mu.Unlock()
	select {
	case p.toSend <- struct{}{}:
	default:
	}
	return nil
}

func (p *pubSub) Subscribe(_ context.Context, channels ...string) error {
	return p.queue(send{verb: "SUBSCRIBE", channels: channels})
}

func (p *pubSub) Unsubscribe(_ context.Context, channels ...string) error {
	return p.queue(send{verb: "UNSUBSCRIBE", channels: channels})
}

// Ping asks for a pong. A sharded connection that has nothing to send
// yet has no server on a cluster: rueidis binds it to the slot of its
// first command, which must be the subscription. It answers at once.
func (p *pubSub) Ping(context.Context) error {
	p.mu.Lock()
	unbound := p.sharded && !p.sent && len(p.sends) == 0
	p.mu.Unlock()
	if unbound {
		p.put(door.Event{Kind: door.EventPong})
		return nil
	}
	return p.queue(send{verb: "PING"})
}

// Close stops the connection's goroutine, which closes the connection,
// and waits for it.
func (p *pubSub) Close() error {
	p.closeOnce.Do(func() {
		close(p.closed)
		<-p.done
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
		case err := <-p.failed:
			p.end = fmt.Errorf("%w: %w", door.ErrPubSubClosed, err)
			if ev, ok := p.take(); ok {
				return ev, nil // what arrived before the end comes first
			}
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
