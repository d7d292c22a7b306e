package notify

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/relock-go/relock/internal/door"
	"github.com/relock-go/relock/internal/door/goredis"
)

// onceDriver opens connections that are not made again once they fail,
// as a driver whose client does not reconnect a pub/sub connection by
// itself: from a connection's first error on, it answers every call with
// door.ErrPubSubClosed.
type onceDriver struct {
	door.PubSubDriver
	opened atomic.Int32
}

func (d *onceDriver) OpenPubSub(ctx context.Context, kind door.PubSubKind, channels ...string) door.PubSub {
	d.opened.Add(1)
	return &oncePubSub{PubSub: d.PubSubDriver.OpenPubSub(ctx, kind, channels...)}
}

type oncePubSub struct {
	door.PubSub
	dead atomic.Bool
}

func (p *oncePubSub) Receive(ctx context.Context, timeout time.Duration) (door.Event, error) {
	if p.dead.Load() {
		return door.Event{}, door.ErrPubSubClosed
	}
	ev, err := p.PubSub.Receive(ctx, timeout)
	if err != nil {
		p.dead.Store(true)
		_ = p.PubSub.Close()
		return ev, fmt.Errorf("%w: %w", door.ErrPubSubClosed, err)
	}
	return ev, nil
}

func (p *oncePubSub) Subscribe(ctx context.Context, channels ...string) error {
	if p.dead.Load() {
		return door.ErrPubSubClosed
	}
	return p.PubSub.Subscribe(ctx, channels...)
}

func (p *oncePubSub) Unsubscribe(ctx context.Context, channels ...string) error {
	if p.dead.Load() {
		return door.ErrPubSubClosed
	}
	return p.PubSub.Unsubscribe(ctx, channels...)
}

func (p *oncePubSub) Ping(ctx context.Context) error {
	if p.dead.Load() {
		return door.ErrPubSubClosed
	}
	return p.PubSub.Ping(ctx)
}

// TestClosedConnectionIsReplaced: a connection its driver will not make
// again (door.ErrPubSubClosed) is replaced by the hub with a new one
// carrying the same channels, which counts as a reconnect: the waiters
// are woken to re-check, the client is told, and messages wake them
// again.
func TestClosedConnectionIsReplaced(t *testing.T) {
	rdb := srv.Client()
	d := &onceDriver{PubSubDriver: goredis.New(rdb)}
	called := make(chan struct{}, 16)
	h := New(Config{Client: d, Reconnected: func() {
		select {
		case called <- struct{}{}:
		default:
		}
	}})
	t.Cleanup(func() { h.Close(); _ = rdb.Close() })
	w := subscribe(t, h, "closed:a", WakeOne)
	defer w.Close()
	if n, err := srv.KillPubSubClients(context.Background()); err != nil || n == 0 {
		t.Fatalf("killed %d: %v", n, err)
	}
	select {
	case <-called:
	case <-time.After(10 * time.Second):
		t.Fatal("Reconnected not called after the connection closed")
	}
	select {
	case <-w.Wake():
	case <-time.After(10 * time.Second):
		t.Fatal("the waiter not woken after the connection closed")
	}
	if n := d.opened.Load(); n < 2 {
		t.Fatalf("%d connections opened, want a second one", n)
	}
	publishAndSync(t, h, rdb, "closed:a", "0")
	if woken(w) != 1 {
		t.Fatal("a message on the new connection did not wake the waiter")
	}
}
