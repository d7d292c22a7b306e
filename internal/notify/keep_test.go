package notify

import (
	"context"
	"testing"
	"time"

	"github.com/relock-go/relock/internal/door/goredis"
)

// TestKeeper: a keeper keeps its channel subscribed and gets its messages
// to the policy and its reconnects to Config.Reconnected, but is never
// woken and is not counted by Channels; a waiter beside it is, and shares
// its subscription.
func TestKeeper(t *testing.T) {
	rdb := srv.Client()
	called := make(chan struct{}, 16)
	heard := make(chan string, 16)
	h := New(Config{Client: goredis.New(rdb), Reconnected: func() {
		select {
		case called <- struct{}{}:
		default:
		}
	}})
	t.Cleanup(func() { h.Close(); _ = rdb.Close() })
	policy := func(p string) int { heard <- p; return -1 }
	k, err := h.Keep("k1", policy)
	if err != nil {
		t.Fatal(err)
	}
	defer k.Close()
	select {
	case <-k.Ready():
	case <-time.After(5 * time.Second):
		t.Fatal("subscription not confirmed")
	}
	if n := h.Channels(); n != 0 {
		t.Fatalf("Channels = %d with a keeper alone, want 0", n)
	}
	ctx := context.Background()
	if n := rdb.PubSubNumSub(ctx, "k1").Val()["k1"]; n != 1 {
		t.Fatalf("%d subscribers, want 1", n)
	}
	if err := rdb.Publish(ctx, "k1", "m").Err(); err != nil {
		t.Fatal(err)
	}
	select {
	case p := <-heard:
		if p != "m" {
			t.Fatalf("policy got %q", p)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the keeper's message did not reach the policy")
	}
	w := subscribe(t, h, "k1", policy)
	defer w.Close()
	if n := h.Channels(); n != 1 {
		t.Fatalf("Channels = %d with a waiter beside the keeper, want 1", n)
	}
	if n, err := srv.KillPubSubClients(ctx); err != nil || n == 0 {
		t.Fatalf("killed %d: %v", n, err)
	}
	select {
	case <-called:
	case <-time.After(10 * time.Second):
		t.Fatal("Reconnected not called after the reconnect")
	}
	select {
	case <-w.Wake():
	case <-time.After(10 * time.Second):
		t.Fatal("the waiter not woken after the reconnect")
	}
	if woken(k) != 0 {
		t.Fatal("the keeper was woken")
	}
}
