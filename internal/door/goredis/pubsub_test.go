package goredis

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/relock-go/relock/internal/door"
	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/internal/slots"
)

// receive returns the next event of ps; nothing within a generous bound
// fails the test.
func receive(t *testing.T, ps door.PubSub) door.Event {
	t.Helper()
	ev, err := ps.Receive(context.Background(), 5*time.Second)
	if err != nil {
		t.Fatalf("receive: %v", err)
	}
	if ev.Kind == door.EventSilent {
		t.Fatal("nothing received")
	}
	return ev
}

func expect(t *testing.T, ps door.PubSub, want door.Event) {
	t.Helper()
	if got := receive(t, ps); got != want {
		t.Fatalf("received %+v, want %+v", got, want)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// TestPubSub: a plain connection confirms its subscriptions, delivers
// messages in order, answers a ping, ends a subscription on request and
// reports silence.
func TestPubSub(t *testing.T) {
	rdb := srv.Client()
	defer rdb.Close()
	ctx := context.Background()
	ps := New(rdb).OpenPubSub(ctx, door.PubSubPlain, "ps:a")
	defer ps.Close()
	expect(t, ps, door.Event{Kind: door.EventSubscribed, Channel: "ps:a"})
	must(t, rdb.Publish(ctx, "ps:a", "0").Err())
	expect(t, ps, door.Event{Kind: door.EventMessage, Channel: "ps:a", Payload: "0"})

	must(t, ps.Subscribe(ctx, "ps:b"))
	expect(t, ps, door.Event{Kind: door.EventSubscribed, Channel: "ps:b"})
	must(t, ps.Ping(ctx))
	expect(t, ps, door.Event{Kind: door.EventPong})
	must(t, ps.Unsubscribe(ctx, "ps:a"))
	expect(t, ps, door.Event{Kind: door.EventUnsubscribed, Channel: "ps:a"})
	// A message on the channel left is not delivered: the next one is
	// the message published after it on the other channel.
	must(t, rdb.Publish(ctx, "ps:a", "1").Err())
	must(t, rdb.Publish(ctx, "ps:b", "2").Err())
	expect(t, ps, door.Event{Kind: door.EventMessage, Channel: "ps:b", Payload: "2"})

	ev, err := ps.Receive(ctx, time.Millisecond)
	if err != nil || ev.Kind != door.EventSilent {
		t.Fatalf("receive with nothing sent: %+v, %v; want EventSilent", ev, err)
	}
}

// TestPubSubReconnects: a connection the server drops fails one Receive
// (not with ErrPubSubClosed: go-redis makes it again), and the next ones
// bring the confirmations of its channels again, by which the caller
// knows that it was made again; messages flow again.
func TestPubSubReconnects(t *testing.T) {
	s := redistest.Standalone(t)
	rdb := s.Client()
	defer rdb.Close()
	ctx := context.Background()
	ps := New(rdb).OpenPubSub(ctx, door.PubSubPlain, "rc:a", "rc:b")
	defer ps.Close()
	confirmed := func() map[string]bool {
		got := map[string]bool{}
		for range 2 {
			ev := receive(t, ps)
			if ev.Kind != door.EventSubscribed {
				t.Fatalf("received %+v, want a confirmation", ev)
			}
			got[ev.Channel] = true
		}
		return got
	}
	if got := confirmed(); !got["rc:a"] || !got["rc:b"] {
		t.Fatalf("confirmed %v, want rc:a and rc:b", got)
	}
	if n, err := s.KillPubSubClients(ctx); err != nil || n != 1 {
		t.Fatalf("killed %d pub/sub clients: %v", n, err)
	}
	_, err := ps.Receive(ctx, 5*time.Second)
	if err == nil || errors.Is(err, door.ErrPubSubClosed) {
		t.Fatalf("receive on a dropped connection: %v; want an error other than ErrPubSubClosed", err)
	}
	if got := confirmed(); !got["rc:a"] || !got["rc:b"] {
		t.Fatalf("confirmed again %v, want rc:a and rc:b", got)
	}
	must(t, rdb.Publish(ctx, "rc:b", "0").Err())
	expect(t, ps, door.Event{Kind: door.EventMessage, Channel: "rc:b", Payload: "0"})
}

// TestPubSubClose: Close ends a Receive under way.
func TestPubSubClose(t *testing.T) {
	rdb := srv.Client()
	defer rdb.Close()
	ctx := context.Background()
	ps := New(rdb).OpenPubSub(ctx, door.PubSubPlain, "cl:a")
	expect(t, ps, door.Event{Kind: door.EventSubscribed, Channel: "cl:a"})
	got := make(chan error, 1)
	go func() {
		_, err := ps.Receive(ctx, time.Minute)
		got <- err
	}()
	must(t, ps.Close())
	select {
	case err := <-got:
		if err == nil {
			t.Fatal("receive on a closed connection returned no error")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("receive did not return after Close")
	}
}

// TestPubSubShardedSlotMove: on a cluster a sharded connection subscribes
// on the master of its channel's slot. When the slot moves, the server
// ends the subscription (Unsubscribed), and a new subscription on the old
// master is refused (Moved). Once told (SlotMoved), the driver opens the
// next connection on the slot's new master, where messages flow.
func TestPubSubShardedSlotMove(t *testing.T) {
	c := redistest.NewCluster(t, 3, 0)
	rdb := c.Client()
	defer rdb.Close()
	ctx := context.Background()
	d := New(rdb)
	const channel = "ps:{slot-move}"
	slot := slots.Of(channel)
	ps := d.OpenPubSub(ctx, door.PubSubSharded, channel)
	defer ps.Close()
	expect(t, ps, door.Event{Kind: door.EventSubscribed, Channel: channel})
	must(t, rdb.SPublish(ctx, channel, "0").Err())
	expect(t, ps, door.Event{Kind: door.EventMessage, Channel: channel, Payload: "0"})

	from, err := c.MasterForSlot(ctx, slot)
	must(t, err)
	var to *redistest.Server
	for _, m := range c.Masters {
		if m != from {
			to = m
			break
		}
	}
	must(t, c.MigrateSlot(ctx, slot, to))
	expect(t, ps, door.Event{Kind: door.EventUnsubscribed, Channel: channel})
	must(t, ps.Subscribe(ctx, channel))
	expect(t, ps, door.Event{Kind: door.EventMoved})
	must(t, ps.Close())

	d.SlotMoved(ctx)
	// go-redis reads the slot map again in the background: until it has,
	// a new connection may still go to the old master and be refused.
	deadline := time.Now().Add(10 * time.Second)
	var moved door.PubSub
	for moved == nil {
		next := d.OpenPubSub(ctx, door.PubSubSharded, channel)
		switch ev := receive(t, next); ev.Kind {
		case door.EventSubscribed:
			moved = next
		case door.EventMoved:
			_ = next.Close()
			if time.Now().After(deadline) {
				t.Fatal("the subscription still goes to the slot's old master")
			}
			time.Sleep(10 * time.Millisecond)
		default:
			_ = next.Close()
			t.Fatalf("received %+v, want a confirmation or EventMoved", ev)
		}
	}
	defer moved.Close()
	direct := to.Client()
	defer direct.Close()
	n, err := direct.PubSubShardNumSub(ctx, channel).Result()
	must(t, err)
	if n[channel] != 1 {
		t.Fatalf("the slot's new master counts %d subscribers of the channel, want 1", n[channel])
	}
	must(t, rdb.SPublish(ctx, channel, "1").Err())
	expect(t, moved, door.Event{Kind: door.EventMessage, Channel: channel, Payload: "1"})
}
