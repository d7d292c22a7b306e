package notify

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/relock-go/relock/internal/redistest"
)

var srv *redistest.Server

func TestMain(m *testing.M) {
	os.Exit(redistest.Main(m, func(s *redistest.Server) func() { srv = s; return nil }))
}

func newHub(t *testing.T) (*Hub, *redis.Client) {
	rdb := srv.Client()
	h := New(Config{Client: rdb})
	t.Cleanup(func() { h.Close(); _ = rdb.Close() })
	return h, rdb
}

func subscribe(t *testing.T, h *Hub, channel string, p Policy) *Waiter {
	t.Helper()
	w, err := h.Subscribe(channel, p)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-w.Ready():
	case <-time.After(5 * time.Second):
		t.Fatal("subscription not confirmed")
	}
	return w
}

// woken counts the waiters with a wake pending, consuming them.
func woken(ws ...*Waiter) int {
	n := 0
	for _, w := range ws {
		select {
		case <-w.Wake():
			n++
		default:
		}
	}
	return n
}

// publishAndSync publishes, then waits until the hub has handled the
// message: a second message on a sync channel the test listens to arrives
// after it on the same connection.
func publishAndSync(t *testing.T, h *Hub, rdb *redis.Client, channel, payload string) {
	t.Helper()
	sync := subscribe(t, h, channel+":sync", WakeOne)
	defer sync.Close()
	ctx := context.Background()
	if err := rdb.Publish(ctx, channel, payload).Err(); err != nil {
		t.Fatal(err)
	}
	if err := rdb.Publish(ctx, channel+":sync", "x").Err(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-sync.Wake():
	case <-time.After(5 * time.Second):
		t.Fatal("sync message not received")
	}
}

func TestWakeOne(t *testing.T) {
	h, rdb := newHub(t)
	ws := []*Waiter{subscribe(t, h, "c1", WakeOne), subscribe(t, h, "c1", WakeOne), subscribe(t, h, "c1", WakeOne)}
	if n := h.Channels(); n != 1 {
		t.Fatalf("%d channels for three waiters of one", n)
	}
	publishAndSync(t, h, rdb, "c1", "0")
	if n := woken(ws...); n != 1 {
		t.Fatalf("one message woke %d waiters", n)
	}
	// The oldest waiter without a pending wake goes first.
	publishAndSync(t, h, rdb, "c1", "0")
	publishAndSync(t, h, rdb, "c1", "0")
	if n := woken(ws...); n != 2 {
		t.Fatalf("two messages woke %d waiters", n)
	}
	for _, w := range ws {
		w.Close()
	}
	if n := h.Channels(); n != 0 {
		t.Fatalf("%d channels after every waiter left", n)
	}
}

func TestWakeAllPolicy(t *testing.T) {
	h, rdb := newHub(t)
	all := func(p string) int {
		if p == "1" {
			return -1
		}
		return 1
	}
	ws := []*Waiter{subscribe(t, h, "c2", all), subscribe(t, h, "c2", all), subscribe(t, h, "c2", all)}
	defer func() {
		for _, w := range ws {
			w.Close()
		}
	}()
	publishAndSync(t, h, rdb, "c2", "1")
	if n := woken(ws...); n != 3 {
		t.Fatalf("a wake-all message woke %d of 3", n)
	}
}

func TestUnusedWakeIsHandedOn(t *testing.T) {
	h, rdb := newHub(t)
	a, b := subscribe(t, h, "c3", WakeOne), subscribe(t, h, "c3", WakeOne)
	defer b.Close()
	publishAndSync(t, h, rdb, "c3", "0") // wakes a
	a.Close()                            // a leaves without using it
	if n := woken(b); n != 1 {
		t.Fatal("the wake a did not use was lost")
	}
}

func TestReconnectWakesEveryWaiter(t *testing.T) {
	h, _ := newHub(t)
	ws := []*Waiter{subscribe(t, h, "c4", WakeOne), subscribe(t, h, "c4", WakeOne), subscribe(t, h, "c5", WakeOne)}
	defer func() {
		for _, w := range ws {
			w.Close()
		}
	}()
	if n, err := srv.KillPubSubClients(context.Background()); err != nil || n == 0 {
		t.Fatalf("killed %d: %v", n, err)
	}
	for i, w := range ws {
		select {
		case <-w.Wake():
		case <-time.After(10 * time.Second):
			t.Fatalf("waiter %d not woken after the reconnect", i)
		}
	}
}

func TestClosedHub(t *testing.T) {
	h, _ := newHub(t)
	w := subscribe(t, h, "c6", WakeOne)
	h.Close()
	w.Close() // safe after the hub closed
	if _, err := h.Subscribe("c6", WakeOne); err != ErrClosed {
		t.Fatalf("Subscribe on a closed hub: %v", err)
	}
}
