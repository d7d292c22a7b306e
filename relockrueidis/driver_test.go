package relockrueidis

import (
	"bytes"
	"context"
	"errors"
	"net"
	"os"
	"reflect"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/door"
	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/internal/slots"
	"github.com/relock-go/relock/internal/testkit"
)

// TestNewNil: a nil client is refused as an invalid option and an
// unsupported client.
func TestNewNil(t *testing.T) {
	_, err := New(nil)
	if !errors.Is(err, relock.ErrInvalidOption) || !errors.Is(err, relock.ErrUnsupportedClient) {
		t.Fatalf("New(nil): %v, want ErrInvalidOption and ErrUnsupportedClient", err)
	}
}

// TestReplies: the driver turns rueidis's replies into the door's values
// (integers, strings, nested arrays with their nil elements, maps), a nil
// reply into door.Nil, and a server's error into a door.Error of the
// server's text, whose class the door reads; in a pipeline, each reply
// is its own command's.
func TestReplies(t *testing.T) {
	ctx := testkit.CtxTimeout(t, 10*time.Second)
	d := open(t, testkit.Deployment{Addr: testkit.Standalone.Addr})
	eval := func(script string, args ...any) door.Cmd {
		return door.Cmd{Args: append([]any{"eval", script, 0}, args...)}
	}
	v, err := d.Do(ctx, eval("return {1, 'a', {ARGV[1], ARGV[2]}, redis.call('get', 'nothing:here'), 2}", 7, true)).Result()
	if want := []any{int64(1), "a", []any{"7", "1"}, nil, int64(2)}; err != nil || !reflect.DeepEqual(v, want) {
		t.Fatalf("array reply %#v, %v; want %#v", v, err, want)
	}
	if err := d.Do(ctx, door.Cmd{Args: []any{"get", "nothing:here"}, Key: 1}).Err(); !errors.Is(err, door.Nil) {
		t.Fatalf("nil reply: %v, want door.Nil", err)
	}
	err = d.Do(ctx, eval("return redis.error_reply('WRONGTYPE not a list')")).Err()
	if door.ClassOf(err) != door.WrongType || err.Error() != "WRONGTYPE not a list" {
		t.Fatalf("error reply %q of class %v, want the server's text of class WrongType", err, door.ClassOf(err))
	}
	m, err := d.Do(ctx, door.Cmd{Args: []any{"config", "get", "maxmemory-policy"}}).StringMap()
	if err != nil || m["maxmemory-policy"] == "" {
		t.Fatalf("map reply %v, %v; want the policy", m, err)
	}

	xs := []door.Exchange{
		{Cmd: door.Cmd{Args: []any{"set", "replies:k", 1.5}, Key: 1}},
		{Cmd: door.Cmd{Args: []any{"incr", "replies:k"}, Key: 1}},
		{Cmd: door.Cmd{Args: []any{"get", "replies:k"}, Key: 1}},
		{Cmd: door.Cmd{Args: []any{"del", "replies:k"}, Key: 1}},
	}
	d.Pipe(ctx, xs)
	if s, err := xs[0].Reply.Text(); err != nil || s != "OK" {
		t.Fatalf("set: %q, %v", s, err)
	}
	if door.ClassOf(xs[1].Reply.Err()) != door.Other {
		t.Fatalf("incr of 1.5: %v, want a server's error", xs[1].Reply.Err())
	}
	if s, err := xs[2].Reply.Text(); err != nil || s != "1.5" {
		t.Fatalf("get: %q, %v; want 1.5", s, err)
	}
	if n, err := xs[3].Reply.Int64(); err != nil || n != 1 {
		t.Fatalf("del: %d, %v; want 1", n, err)
	}
}

// TestClusterNodes: on a cluster, Master finds the master of a key's slot
// by the driver's own slot map, and its Pipe runs on that server alone:
// a command for a key of another master's slot gets MOVED from it, while
// one of its own slot runs. Masters lists every master once.
func TestClusterNodes(t *testing.T) {
	ctx := testkit.CtxTimeout(t, 10*time.Second)
	c := testkit.Cluster
	d := open(t, testkit.Deployment{Addrs: c.Addrs()})
	if !d.Cluster() {
		t.Fatal("a cluster client is not a cluster's")
	}
	masters, err := d.Masters(ctx)
	if err != nil || len(masters) != len(c.Masters) {
		t.Fatalf("masters %v, %v; want %d", masters, err, len(c.Masters))
	}
	const mine, theirs = "nodes:{a}", "nodes:{b}"
	n, err := d.Master(ctx, mine)
	if err != nil {
		t.Fatal(err)
	}
	want, err := c.MasterForSlot(ctx, slots.Of(mine))
	if err != nil {
		t.Fatal(err)
	}
	if n.Addr() != want.Addr {
		t.Fatalf("master of %s: %s, want %s", mine, n.Addr(), want.Addr)
	}
	other, err := c.MasterForSlot(ctx, slots.Of(theirs))
	if err != nil || other == want {
		t.Fatalf("the test's keys must be on two masters: %v", err)
	}
	xs := []door.Exchange{
		{Cmd: door.Cmd{Args: []any{"exists", mine}, Key: 1}},
		{Cmd: door.Cmd{Args: []any{"exists", theirs}, Key: 1}},
	}
	n.Pipe(ctx, xs)
	if _, err := xs[0].Reply.Int64(); err != nil {
		t.Fatalf("a key of the node's slot: %v", err)
	}
	if door.ClassOf(xs[1].Reply.Err()) != door.Moved {
		t.Fatalf("a key of another master's slot: %v, want MOVED", xs[1].Reply.Err())
	}
}

// TestReplicaSyncCluster: on a cluster with replicas, an acquisition
// waits for the replica of its slot's master, by a WAIT on the dedicated
// connection to that master.
func TestReplicaSyncCluster(t *testing.T) {
	c := redistest.NewCluster(t, 3, 1)
	ctx := testkit.CtxTimeout(t, 30*time.Second)
	locks := newLocks(t, testkit.Deployment{Addrs: c.Addrs()}, relock.WithReplicaSync(relock.ReplicaSync{Replicas: 1}))
	name := testkit.LockName(t)
	master, err := c.MasterForSlot(ctx, slots.Of(name))
	if err != nil {
		t.Fatal(err)
	}
	waitAcking(t, master, 1)
	before := waits(t, master)
	lease, err := locks.Mutex(name).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if after := waits(t, master); after <= before {
		t.Fatalf("the slot's master counts %d WAITs, as many as before the lock", after)
	}
	if err := lease.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestDeploymentDialer: the tests' deployments hand their dialer to the
// client, as fault proxies need: its connections are the dialer's.
func TestDeploymentDialer(t *testing.T) {
	ctx := testkit.CtxTimeout(t, 10*time.Second)
	var dials atomic.Int64
	var dialer net.Dialer
	d := open(t, testkit.Deployment{Addr: testkit.Standalone.Addr, Dialer: func(ctx context.Context, network, addr string) (net.Conn, error) {
		dials.Add(1)
		return dialer.DialContext(ctx, network, addr)
	}})
	if s, err := d.Do(ctx, door.Cmd{Args: []any{"ping"}}).Text(); err != nil || s != "PONG" {
		t.Fatalf("ping: %q, %v", s, err)
	}
	if dials.Load() == 0 {
		t.Fatal("the client did not dial through the deployment's dialer")
	}
}

// TestCutByContext: a transport error of a call whose context has ended
// also matches the context's error (rueidis may report a dial cut short
// by the deadline as a bare I/O timeout, as net does); while the context
// lives, the error is left as it is.
func TestCutByContext(t *testing.T) {
	dial := &net.OpError{Op: "dial", Net: "tcp", Err: os.ErrDeadlineExceeded}
	ended, cancel := context.WithDeadline(context.Background(), time.Now())
	defer cancel()
	<-ended.Done()
	err := cut(ended, dial)
	if !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("cut by an ended context: %v, want it to match both the context's error and the dial's", err)
	}
	if door.ClassOf(err) != door.Transport {
		t.Fatalf("cut by an ended context: class %v, want Transport", door.ClassOf(err))
	}
	if err := cut(ended, context.DeadlineExceeded); err != context.DeadlineExceeded {
		t.Fatalf("the context's own error: %v, want it unchanged", err)
	}
	if err := cut(context.Background(), dial); err != dial {
		t.Fatalf("with a live context: %v, want the dial's error unchanged", err)
	}
}

// TestSentAgainAfterRestart: after the server restarted, the connection
// rueidis holds is broken; a command that is not Once, by itself or in a
// pipeline, is sent again on a new connection instead of failing.
func TestSentAgainAfterRestart(t *testing.T) {
	s := redistest.Standalone(t)
	d := open(t, testkit.Deployment{Addr: s.Addr})
	ctx := testkit.CtxTimeout(t, 20*time.Second)
	ping := door.Cmd{Args: []any{"ping"}}
	for _, call := range []func() error{
		func() error { return d.Do(ctx, ping).Err() },
		func() error {
			xs := []door.Exchange{{Cmd: ping}, {Cmd: door.Cmd{Args: []any{"echo", "x"}}}}
			d.Pipe(ctx, xs)
			return errors.Join(xs[0].Reply.Err(), xs[1].Reply.Err())
		},
	} {
		if err := call(); err != nil {
			t.Fatal(err)
		}
		if err := s.Restart(); err != nil {
			t.Fatal(err)
		}
		if err := call(); err != nil {
			t.Fatalf("the first call after a restart: %v", err)
		}
	}
}

// TestReplyAwaitedAfterContextEnds: a command handed to rueidis before
// its call's context ended is waited for, and the call returns its reply
// once the server answers, so that an undo sent after the call cannot
// overtake the command on another connection. A server silent past the
// driver's bound leaves the call with the context's error, a transport
// error: the command may have run. A call whose context has ended sends
// nothing.
func TestReplyAwaitedAfterContextEnds(t *testing.T) {
	s := redistest.Standalone(t)
	key := testkit.LockName(t)
	written := make(chan struct{}, 1)
	dial := func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := new(net.Dialer).DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return &tapConn{Conn: c, marker: []byte(key), written: written}, nil
	}
	d := newDriver(client(t, testkit.Deployment{Addr: s.Addr, Dialer: dial}))
	d.settle = time.Minute // bounded by the test's timeout instead
	ctx := testkit.CtxTimeout(t, 30*time.Second)
	// A command without a key goes on the connection PING made.
	if err := d.Do(ctx, door.Cmd{Args: []any{"ping"}}).Err(); err != nil {
		t.Fatal(err)
	}
	incr := door.Cmd{Args: []any{"incr", key}}
	// cancelled sends incr with a context cancelled once the command was
	// written to the paused server, and returns the call's reply, the
	// server resumed after it when resume is set, or before returning.
	cancelled := func(resume bool) door.Reply {
		t.Helper()
		if err := s.Pause(); err != nil {
			t.Fatal(err)
		}
		// No deadline: rueidis queues the command for its connection's
		// writer, and then returns at once when the context ends.
		cctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		done := make(chan door.Reply, 1)
		go func() { done <- d.Do(cctx, incr) }()
		<-written
		cancel()
		if resume {
			if err := s.Resume(); err != nil {
				t.Fatal(err)
			}
		}
		r := <-done
		if !resume {
			if err := s.Resume(); err != nil {
				t.Fatal(err)
			}
		}
		return r
	}
	if n, err := cancelled(true).Int64(); err != nil || n != 1 {
		t.Fatalf("a call cancelled after its command was written: %v, %v; want the command's reply, 1", n, err)
	}
	d.settle = 20 * time.Millisecond
	r := cancelled(false)
	if !errors.Is(r.Err(), context.Canceled) || door.ClassOf(r.Err()) != door.Transport {
		t.Fatalf("a call whose server stayed silent past the bound: %v, want a transport error matching context.Canceled", r.Err())
	}
	ended, cancel := context.WithCancel(ctx)
	cancel()
	if err := d.Do(ended, incr).Err(); !errors.Is(err, context.Canceled) {
		t.Fatalf("a call with an ended context: %v, want context.Canceled", err)
	}
	// The command of the silent server's call ran once it resumed; the
	// ended context's did not (it would have gone before the GET).
	if v, err := d.Do(ctx, door.Cmd{Args: []any{"get", key}}).Text(); err != nil || v != "2" {
		t.Fatalf("counter %q, %v: want 2", v, err)
	}
}

// tapConn signals written whenever a write carries marker.
type tapConn struct {
	net.Conn
	marker  []byte
	written chan struct{}
}

func (c *tapConn) Write(b []byte) (int, error) {
	if bytes.Contains(b, c.marker) {
		select {
		case c.written <- struct{}{}:
		default:
		}
	}
	return c.Conn.Write(b)
}

// TestRetried: a command that is not Once is sent again after a transport
// error (such as a dial that another call's context cut short) while its
// context lives, at most retries times more; a Once command and a call
// whose context ended are not.
func TestRetried(t *testing.T) {
	dial := &net.OpError{Op: "dial", Net: "tcp", Err: os.ErrDeadlineExceeded}
	ended, cancel := context.WithCancel(context.Background())
	cancel()
	for _, tc := range []struct {
		name  string
		ctx   context.Context
		once  bool
		fails int // transport errors before the reply
		reply rueidis.RedisResult
		tries int
		ok    bool
	}{
		{"sent again", context.Background(), false, 2, rueidis.NewErrorResult(nil), 3, true},
		{"at most retries times more", context.Background(), false, retries + 5, rueidis.NewErrorResult(nil), retries + 1, false},
		{"once", context.Background(), true, 1, rueidis.NewErrorResult(nil), 1, false},
		{"context ended", ended, false, 1, rueidis.NewErrorResult(nil), 1, false},
	} {
		tries := 0
		r := retried(tc.ctx, tc.once, func() rueidis.RedisResult {
			tries++
			if tries <= tc.fails {
				return rueidis.NewErrorResult(dial)
			}
			return tc.reply
		})
		if tries != tc.tries || (r.NonRedisError() == nil) != tc.ok {
			t.Errorf("%s: %d tries, error %v; want %d tries, success %v", tc.name, tries, r.NonRedisError(), tc.tries, tc.ok)
		}
	}
}
