package notify

import (
	"context"
	"testing"
	"time"

	"github.com/relock-go/relock/internal/door/goredis"
)

// TestReconnectedIsCalled: a connection made again calls
// Config.Reconnected, and a first subscription does not.
func TestReconnectedIsCalled(t *testing.T) {
	rdb := srv.Client()
	called := make(chan struct{}, 16)
	h := New(Config{Client: goredis.New(rdb), Reconnected: func() {
		select {
		case called <- struct{}{}:
		default:
		}
	}})
	t.Cleanup(func() { h.Close(); _ = rdb.Close() })
	w := subscribe(t, h, "r1", WakeOne)
	defer w.Close()
	select {
	case <-called:
		t.Fatal("Reconnected called for a first subscription")
	default:
	}
	if n, err := srv.KillPubSubClients(context.Background()); err != nil || n == 0 {
		t.Fatalf("killed %d: %v", n, err)
	}
	select {
	case <-called:
	case <-time.After(10 * time.Second):
		t.Fatal("Reconnected not called after the reconnect")
	}
}
