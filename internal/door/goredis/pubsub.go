package goredis

import (
	"context"
	"errors"
	"net"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/relock-go/relock/internal/door"
)

// OpenPubSub opens a go-redis pub/sub connection subscribed to channels.
// go-redis makes a failed connection again by itself at the next
// Receive, subscribing its channels again.
func (d *Driver) OpenPubSub(ctx context.Context, kind door.PubSubKind, channels ...string) door.PubSub {
	if kind == door.PubSubSharded {
		return &pubSub{ps: d.c.SSubscribe(ctx, channels...), sharded: true}
	}
	return &pubSub{ps: d.c.Subscribe(ctx, channels...)}
}

// SlotMoved has a cluster client read the slot map again (in the
// background: go-redis reloads it lazily).
func (d *Driver) SlotMoved(ctx context.Context) {
	if d.cluster != nil {
		d.cluster.ReloadState(ctx)
	}
}

// pubSub is a go-redis pub/sub connection as a door.PubSub.
type pubSub struct {
	ps      *redis.PubSub
	sharded bool
}

func (p *pubSub) Subscribe(ctx context.Context, channels ...string) error {
	if p.sharded {
		return p.ps.SSubscribe(ctx, channels...)
	}
	return p.ps.Subscribe(ctx, channels...)
}

func (p *pubSub) Unsubscribe(ctx context.Context, channels ...string) error {
	if p.sharded {
		return p.ps.SUnsubscribe(ctx, channels...)
	}
	return p.ps.Unsubscribe(ctx, channels...)
}

func (p *pubSub) Ping(ctx context.Context) error { return p.ps.Ping(ctx) }

func (p *pubSub) Close() error { return p.ps.Close() }

func (p *pubSub) Receive(ctx context.Context, timeout time.Duration) (door.Event, error) {
	msg, err := p.ps.ReceiveTimeout(ctx, timeout)
	switch {
	case err == nil:
	case receiveTimedOut(err):
		return door.Event{Kind: door.EventSilent}, nil
	case subscriptionMoved(err):
		return door.Event{Kind: door.EventMoved}, nil
	default:
		return door.Event{}, err
	}
	switch m := msg.(type) {
	case *redis.Message:
		return door.Event{Kind: door.EventMessage, Channel: m.Channel, Payload: m.Payload}, nil
	case *redis.Subscription:
		switch m.Kind {
		case "subscribe", "ssubscribe":
			return door.Event{Kind: door.EventSubscribed, Channel: m.Channel}, nil
		case "unsubscribe", "sunsubscribe":
			return door.Event{Kind: door.EventUnsubscribed, Channel: m.Channel}, nil
		}
	}
	return door.Event{Kind: door.EventPong}, nil
}

// receiveTimedOut reports whether err says that nothing arrived in time.
func receiveTimedOut(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// subscriptionMoved reports whether err is a cluster's answer that a
// channel's slot is served elsewhere (or on its way there).
func subscriptionMoved(err error) bool {
	var re redis.Error
	if !errors.As(err, &re) {
		return false
	}
	msg := err.Error()
	return strings.HasPrefix(msg, "MOVED ") || strings.HasPrefix(msg, "ASK ")
}

var _ door.PubSubDriver = (*Driver)(nil)
