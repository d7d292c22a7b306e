package door

import (
	"context"
	"errors"
	"time"
)

// PubSubDriver is the pub/sub side of a driver: it opens the connections
// on which the library listens for releases.
type PubSubDriver interface {
	// OpenPubSub opens a pub/sub connection of the kind given and
	// subscribes channels on it (there may be none yet). Failures to
	// connect come later, from Receive.
	OpenPubSub(ctx context.Context, kind PubSubKind, channels ...string) PubSub
	// SlotMoved tells the driver that a sharded channel's slot is served
	// elsewhere now (the server ended the subscription, or answered it
	// with MOVED), so that its view of the cluster is read again before
	// the next OpenPubSub goes to the slot's master.
	SlotMoved(ctx context.Context)
}

// PubSubKind tells how a pub/sub connection subscribes.
type PubSubKind uint8

// The kinds of pub/sub connection.
const (
	// PubSubPlain subscribes with SUBSCRIBE.
	PubSubPlain PubSubKind = iota
	// PubSubSharded subscribes with SSUBSCRIBE, on the master that serves
	// the channels' slot (all of them in one slot).
	PubSubSharded
)

// PubSub is one pub/sub connection. Subscribe, Unsubscribe, Ping and
// Close may be called while a Receive is under way, by another
// goroutine; Receive is called by one goroutine at a time.
//
// A driver may make the connection again by itself after a failure (as
// go-redis does); it then subscribes the connection's channels again, and
// their confirmations arrive again as EventSubscribed. This is how the
// caller learns that the connection was made again.
type PubSub interface {
	// Subscribe sends a subscription of channels. It does not wait for
	// the server's confirmation, which arrives as an EventSubscribed per
	// channel; an error says that the command could not be sent.
	Subscribe(ctx context.Context, channels ...string) error
	// Unsubscribe sends the end of channels' subscriptions; the server's
	// answer arrives as an EventUnsubscribed per channel.
	Unsubscribe(ctx context.Context, channels ...string) error
	// Receive returns the next event, or an EventSilent when nothing
	// arrived within timeout. An error says that the connection failed:
	// the driver makes it again at the next Receive, unless the error
	// wraps ErrPubSubClosed.
	Receive(ctx context.Context, timeout time.Duration) (Event, error)
	// Ping asks the server for a sign of life: an EventPong follows, or
	// an error from Receive.
	Ping(ctx context.Context) error
	// Close closes the connection; a Receive under way returns.
	Close() error
}

// ErrPubSubClosed is wrapped by the error of a PubSub's Receive when the
// connection is closed and its driver will not make it again: the caller
// opens another one.
var ErrPubSubClosed = errors.New("relock: pub/sub connection closed")

// EventKind tells what a pub/sub Event is.
type EventKind uint8

// The kinds of Event.
const (
	// EventMessage is a message published on Channel, with its Payload.
	EventMessage EventKind = iota + 1
	// EventSubscribed is the server's confirmation of Channel's
	// subscription.
	EventSubscribed
	// EventUnsubscribed is the end of Channel's subscription: the answer
	// to an Unsubscribe, or the server's own, when a sharded channel's
	// slot leaves the node (migrated, or failed over).
	EventUnsubscribed
	// EventMoved says that the server refused a sharded subscription
	// because its slot is served elsewhere (MOVED or ASK).
	EventMoved
	// EventPong is the answer to a Ping, or any other reply the caller
	// has no use for: a sign of life.
	EventPong
	// EventSilent says that nothing arrived within Receive's timeout.
	EventSilent
)

// Event is one thing a pub/sub connection received.
type Event struct {
	Kind    EventKind
	Channel string // of a message, a confirmation or an end
	Payload string // of a message
}
