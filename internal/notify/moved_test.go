package notify

import (
	"context"
	"testing"
	"time"

	"github.com/relock-go/relock/internal/door/goredis"
	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/internal/slots"
)

// TestSlotMoveResubscribes: when a sharded channel's slot moves to another
// master (migrated, or failed over), the server ends the subscription
// (sunsubscribe) and the old node answers a new one with MOVED. The hub
// subscribes the channel again on the slot's new master and wakes every
// waiter of it to re-check; a message published after the move reaches
// them.
func TestSlotMoveResubscribes(t *testing.T) {
	c := redistest.NewCluster(t, 3, 1)
	rdb := c.Client()
	h := New(Config{Client: goredis.New(rdb), Sharded: true, Slot: slots.Of, Health: time.Second})
	t.Cleanup(func() { h.Close(); _ = rdb.Close() })
	ctx := context.Background()
	const channel = "moved:{slot-move-test}"
	slot := slots.Of(channel)
	w := subscribe(t, h, channel, WakeOne)
	defer w.Close()
	other := subscribe(t, h, channel, WakeOne)
	defer other.Close()

	awaitWake := func(what string, ws ...*Waiter) {
		t.Helper()
		for _, w := range ws {
			select {
			case <-w.Wake():
			case <-time.After(5 * time.Second):
				t.Fatalf("%s: a waiter was not woken", what)
			}
		}
	}
	published := func(what string) {
		t.Helper()
		// The channel is confirmed on the slot's new master before the
		// message, which must then reach one waiter.
		deadline := time.Now().Add(5 * time.Second)
		for !h.ConfirmedBefore(channel, h.cfg.Now()) {
			if time.Now().After(deadline) {
				t.Fatalf("%s: the channel is not subscribed again", what)
			}
			time.Sleep(5 * time.Millisecond)
		}
		if err := rdb.SPublish(ctx, channel, "0").Err(); err != nil {
			t.Fatal(err)
		}
		select {
		case <-w.Wake():
		case <-other.Wake():
		case <-time.After(5 * time.Second):
			t.Fatalf("%s: a message published after the move woke no waiter", what)
		}
	}

	from, err := c.MasterForSlot(ctx, slot)
	if err != nil {
		t.Fatal(err)
	}
	var to *redistest.Server
	for _, m := range c.Masters {
		if m != from {
			to = m
			break
		}
	}
	if err := c.MigrateSlot(ctx, slot, to); err != nil {
		t.Fatal(err)
	}
	awaitWake("migration", w, other)
	published("migration")

	if err := c.Failover(ctx, to); err != nil {
		t.Fatal(err)
	}
	awaitWake("failover", w, other)
	published("failover")
}
