package relockrueidis

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/relock-go/relock/internal/door"
	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/internal/slots"
	"github.com/relock-go/relock/internal/testkit"
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
	rdb := testkit.CloseLater(t, testkit.Standalone.Client())
	ctx := context.Background()
	ps := open(t, testkit.Deployment{Addr: testkit.Standalone.Addr}).OpenPubSub(ctx, door.PubSubPlain, "ps:a")
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
	must(t, rdb.Publish(ctx, "ps:a", "1").Err())
	must(t, rdb.Publish(ctx, "ps:b", "2").Err())
	expect(t, ps, door.Event{Kind: door.EventMessage, Channel: "ps:b", Payload: "2"})

	ev, err := ps.Receive(ctx, time.Millisecond)
	if err != nil || ev.Kind != door.EventSilent {
		t.Fatalf("receive with nothing sent: %+v, %v; want EventSilent", ev, err)
	}
}

// TestPubSubConnectionLost: rueidis never makes a dedicated connection
// again, so a connection the server drops fails Receive with
// ErrPubSubClosed, and goes on failing so: the caller opens another.
func TestPubSubConnectionLost(t *testing.T) {
	s := redistest.Standalone(t)
	ctx := context.Background()
	ps := open(t, testkit.Deployment{Addr: s.Addr}).OpenPubSub(ctx, door.PubSubPlain, "lost:a")
	defer ps.Close()
	expect(t, ps, door.Event{Kind: door.EventSubscribed, Channel: "lost:a"})
	if n, err := s.KillPubSubClients(ctx); err != nil || n != 1 {
		t.Fatalf("killed %d pub/sub clients: %v", n, err)
	}
	for range 2 {
		if _, err := ps.Receive(ctx, 5*time.Second); !errors.Is(err, door.ErrPubSubClosed) {
			t.Fatalf("receive on a dropped connection: %v; want ErrPubSubClosed", err)
		}
	}
}

// TestPubSubClose: Close ends a Receive under way.
func TestPubSubClose(t *testing.T) {
	ctx := context.Background()
	ps := open(t, testkit.Deployment{Addr: testkit.Standalone.Addr}).OpenPubSub(ctx, door.PubSubPlain, "cl:a")
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
// master is refused (Moved). The next connection goes to the slot's new
// master, where messages flow.
func TestPubSubShardedSlotMove(t *testing.T) {
	c := redistest.NewCluster(t, 3, 0)
	rdb := testkit.CloseLater(t, c.Client())
	ctx := context.Background()
	d := open(t, testkit.Deployment{Addrs: c.Addrs()})
	const channel = "ps:{slot-move}"
	slot := slots.Of(channel)
	ps := d.OpenPubSub(ctx, door.PubSubSharded, channel)
	defer ps.Close()
	expect(t, ps, door.Event{Kind: door.EventSubscribed, Channel: channel})
	must(t, rdb.SPublish(ctx, channel, "0").Err())
	expect(t, ps, door.Event{Kind: door.EventMessage, Channel: channel, Payload: "0"})

	from, err := c.MasterForSlot(ctx, slot)
	must(t, err)
	to := otherMaster(c, from)
	must(t, c.MigrateSlot(ctx, slot, to))
	expect(t, ps, door.Event{Kind: door.EventUnsubscribed, Channel: channel})
	must(t, ps.Subscribe(ctx, channel))
	expect(t, ps, door.Event{Kind: door.EventMoved})
	must(t, ps.Close())

	d.SlotMoved(ctx)
	// rueidis reads its slot map again in the background after the MOVED:
	// until it has, a new connection may still go to the old master.
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
	direct := testkit.CloseLater(t, to.Client())
	n, err := direct.PubSubShardNumSub(ctx, channel).Result()
	must(t, err)
	if n[channel] != 1 {
		t.Fatalf("the slot's new master counts %d subscribers of the channel, want 1", n[channel])
	}
	must(t, rdb.SPublish(ctx, channel, "1").Err())
	expect(t, moved, door.Event{Kind: door.EventMessage, Channel: channel, Payload: "1"})
}

// TestPubSubPausedServer: opening a connection to a server that does not
// answer, and subscribing on it, hold up no caller (the hub calls them
// under its lock): the connection is made in the background. Once the
// server answers again, the subscription is confirmed, or the connection
// reports its end and the caller opens another.
func TestPubSubPausedServer(t *testing.T) {
	s := redistest.Standalone(t)
	ctx := context.Background()
	// A long dial timeout also bounds the handshake: a connection made
	// in OpenPubSub would hold it up well past the test's bound.
	c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{s.Addr}, Dialer: net.Dialer{Timeout: time.Minute}})
	must(t, err)
	defer c.Close()
	d := newDriver(c)
	must(t, s.Pause())
	returned := make(chan door.PubSub, 1)
	go func() {
		ps := d.OpenPubSub(ctx, door.PubSubPlain, "paused:a")
		_ = ps.Subscribe(ctx, "paused:b")
		_ = ps.Ping(ctx)
		returned <- ps
	}()
	var ps door.PubSub
	select {
	case ps = <-returned:
	case <-time.After(10 * time.Second):
		_ = s.Resume()
		t.Fatal("OpenPubSub, Subscribe or Ping waited for the paused server")
	}
	defer ps.Close()
	must(t, s.Resume())
	ev, err := ps.Receive(ctx, 30*time.Second)
	switch {
	case errors.Is(err, door.ErrPubSubClosed):
	case err != nil:
		t.Fatalf("receive: %v, want an event or ErrPubSubClosed", err)
	case ev != door.Event{Kind: door.EventSubscribed, Channel: "paused:a"}:
		t.Fatalf("received %+v, want paused:a's confirmation", ev)
	}
}
