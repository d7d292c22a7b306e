package notify

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/relock-go/relock/internal/door/goredis"
	"github.com/relock-go/relock/internal/redistest"
)

var srv *redistest.Server

func TestMain(m *testing.M) {
	os.Exit(redistest.Main(m, func(s *redistest.Server) func() { srv = s; return nil }))
}

func newHub(t *testing.T) (*Hub, *redis.Client) {
	rdb := srv.Client()
	h := New(Config{Client: goredis.New(rdb)})
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

// breakingConn fails its first write once armed, closing the connection as
// a server that has just dropped it would.
type breakingConn struct {
	net.Conn
	arm *atomic.Bool
}

func (c *breakingConn) Write(p []byte) (int, error) {
	if c.arm.CompareAndSwap(true, false) {
		_ = c.Conn.Close()
		return 0, errors.New("injected: connection reset")
	}
	return c.Conn.Write(p)
}

// TestSubscribeOnBrokenConnection: the SUBSCRIBE of a new channel is
// written to a connection the server has just closed. go-redis reconnects
// at once and re-subscribes the channels it knew, but not the one whose
// command failed, though it keeps it for the next reconnect. The hub
// subscribes it again: the waiter's subscription is confirmed, and a
// message published on the channel wakes it.
func TestSubscribeOnBrokenConnection(t *testing.T) {
	var arm atomic.Bool
	rdb := redis.NewClient(&redis.Options{
		Addr: srv.Addr,
		Dialer: func(ctx context.Context, network, addr string) (net.Conn, error) {
			var d net.Dialer
			c, err := d.DialContext(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			return &breakingConn{Conn: c, arm: &arm}, nil
		},
	})
	h := New(Config{Client: goredis.New(rdb)})
	t.Cleanup(func() { h.Close(); _ = rdb.Close() })

	a := subscribe(t, h, "c7", WakeOne)
	defer a.Close()
	arm.Store(true)
	b, err := h.Subscribe("c8", WakeOne)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if arm.Load() {
		t.Fatal("the subscription was not written to the broken connection")
	}
	select {
	case <-b.Ready():
	case <-time.After(10 * time.Second):
		n, _ := srv.Client().PubSubNumSub(context.Background(), "c8").Result()
		t.Fatalf("subscription on a broken connection never confirmed (server counts %d subscribers)", n["c8"])
	}
	ctx := context.Background()
	if err := srv.Client().Publish(ctx, "c8", "0").Err(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-b.Wake():
	case <-time.After(10 * time.Second):
		t.Fatal("a message on the re-subscribed channel did not wake its waiter")
	}
}

// signalHandler is a slog handler that reports records with a message.
type signalHandler struct {
	msg string
	got chan struct{}
}

func (h *signalHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h *signalHandler) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h *signalHandler) WithGroup(string) slog.Handler            { return h }

func (h *signalHandler) Handle(_ context.Context, r slog.Record) error {
	if strings.Contains(r.Message, h.msg) {
		select {
		case h.got <- struct{}{}:
		default:
		}
	}
	return nil
}

// TestOutageWakesReadyWaiters: while the server is down the hub sends the
// subscription of a confirmed channel again, in vain. When the server is
// back, the channel's confirmation is a re-subscription: a release may
// have been published during the outage, so the waiter that was already
// subscribed is woken to re-check.
func TestOutageWakesReadyWaiters(t *testing.T) {
	s := redistest.Standalone(t)
	resent := &signalHandler{msg: "subscribing again", got: make(chan struct{}, 1)}
	rdb := s.Client()
	h := New(Config{Client: goredis.New(rdb), Logger: slog.New(resent)})
	t.Cleanup(func() { h.Close(); _ = rdb.Close() })
	w := subscribe(t, h, "c9", WakeOne)
	defer w.Close()
	if err := s.Kill(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-resent.got:
	case <-time.After(10 * time.Second):
		t.Fatal("the subscription was not sent again during the outage")
	}
	if err := s.Restart(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-w.Wake():
	case <-time.After(10 * time.Second):
		t.Fatal("the waiter was not woken after the server came back")
	}
}

// TestLinger: a channel with a linger stays subscribed for that long after
// its last waiter leaves, is taken over at once by a waiter that comes
// meanwhile, and is unsubscribed when the linger runs out unused; others
// go at once.
func TestLinger(t *testing.T) {
	rdb := srv.Client()
	defer rdb.Close()
	ctx := context.Background()
	h := New(Config{Client: goredis.New(rdb), Linger: func(ch string) time.Duration {
		if strings.HasPrefix(ch, "linger:") {
			return time.Hour // until the test ends it by closing the hub
		}
		return 0
	}})
	defer h.Close()
	numsub := func(ch string) int64 { return rdb.PubSubNumSub(ctx, ch).Val()[ch] }

	w := subscribe(t, h, "linger:a", nil)
	plain := subscribe(t, h, "plain:a", nil)
	w.Close()
	plain.Close()
	if h.Channels() != 0 || h.Lingering() != 1 {
		t.Fatalf("after the last waiters left: %d channels for waiters, %d lingering; want 0 and 1", h.Channels(), h.Lingering())
	}
	if numsub("linger:a") != 1 {
		t.Fatal("the lingering channel was unsubscribed")
	}
	// A waiter that comes finds the subscription confirmed.
	w2, err := h.Subscribe("linger:a", nil)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-w2.Ready():
	default:
		t.Fatal("a waiter on a lingering channel is not ready at once")
	}
	if h.Lingering() != 0 || h.Channels() != 1 {
		t.Fatalf("%d lingering, %d channels with a waiter back; want 0 and 1", h.Lingering(), h.Channels())
	}
	publishAndSync(t, h, rdb, "linger:a", "0")
	if woken(w2) != 1 {
		t.Fatal("the waiter on the lingering channel was not woken")
	}
	w2.Close()
	h.Close()
	deadline := time.Now().Add(5 * time.Second)
	for numsub("linger:a") != 0 || numsub("plain:a") != 0 {
		if time.Now().After(deadline) {
			t.Fatal("channels still subscribed after the hub closed")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestLingerRunsOut: a lingering channel no waiter takes is unsubscribed.
func TestLingerRunsOut(t *testing.T) {
	rdb := srv.Client()
	defer rdb.Close()
	ctx := context.Background()
	h := New(Config{Client: goredis.New(rdb), Linger: func(string) time.Duration { return 20 * time.Millisecond }})
	defer h.Close()
	w := subscribe(t, h, "linger:b", nil)
	w.Close()
	deadline := time.Now().Add(5 * time.Second)
	for h.Lingering() != 0 || rdb.PubSubNumSub(ctx, "linger:b").Val()["linger:b"] != 0 {
		if time.Now().After(deadline) {
			t.Fatal("the linger did not run out")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestConfirmedBefore: a channel counts as in force from its last
// confirmation, which a re-subscription renews, and not at all once left.
func TestConfirmedBefore(t *testing.T) {
	rdb := srv.Client()
	defer rdb.Close()
	var now atomic.Int64
	h := New(Config{Client: goredis.New(rdb), Now: now.Load})
	defer h.Close()

	now.Store(10)
	if h.ConfirmedBefore("cb:a", 100) {
		t.Fatal("a channel never subscribed counts as in force")
	}
	w := subscribe(t, h, "cb:a", nil)
	if h.ConfirmedBefore("cb:a", 10) || !h.ConfirmedBefore("cb:a", 11) {
		t.Fatal("a channel confirmed at 10 is not in force from 10 only")
	}
	now.Store(20)
	if n, err := srv.KillPubSubClients(context.Background()); err != nil || n == 0 {
		t.Fatalf("killed %d: %v", n, err)
	}
	select {
	case <-w.Wake(): // re-subscribed and confirmed
	case <-time.After(10 * time.Second):
		t.Fatal("waiter not woken after the reconnect")
	}
	if h.ConfirmedBefore("cb:a", 11) || !h.ConfirmedBefore("cb:a", 21) {
		t.Fatal("a channel re-subscribed at 20 still counts as in force from before")
	}
	w.Close()
	if h.ConfirmedBefore("cb:a", 100) {
		t.Fatal("a channel left counts as in force")
	}
}
