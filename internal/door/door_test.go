package door_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/relock-go/relock/internal/door"
	"github.com/relock-go/relock/internal/door/goredis"
	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/internal/scripts"
	"github.com/relock-go/relock/internal/slots"
)

// newDoor returns a Door over drv, closed with the test.
func newDoor(t *testing.T, drv door.Driver) *door.Door {
	t.Helper()
	d := door.New(door.Config{Driver: drv, Cleanup: 5 * time.Second})
	t.Cleanup(d.Close)
	return d
}

func client(t *testing.T, s *redistest.Server) *redis.Client {
	t.Helper()
	rdb := s.Client()
	t.Cleanup(func() { _ = rdb.Close() })
	return rdb
}

// renew checks the hold of owner u:1 on key without extending it:
// renew.lua answers [0] for a key that holds nothing.
func renew(key string) ([]any, []any) { return []any{key}, []any{"u:1", "0"} }

// TestErrorClasses: the door classes the replies of a real server by
// their text, whatever the driver; and a table of the texts of replies a
// single server cannot be made to give on demand.
func TestErrorClasses(t *testing.T) {
	ctx := context.Background()
	rdb := client(t, srv)
	d := newDoor(t, goredis.New(rdb))
	if err := rdb.Set(ctx, "d:class:str", "x", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if err := rdb.Do(ctx, "acl", "setuser", "d-class-user", "on", ">pw", "~*", "&*", "+@all", "-get", "-set").Err(); err != nil {
		t.Fatal(err)
	}
	limited := redis.NewClient(&redis.Options{Addr: srv.Addr, Username: "d-class-user", Password: "pw", MaxRetries: -1})
	defer limited.Close()
	wrong := redis.NewClient(&redis.Options{Addr: srv.Addr, Username: "d-class-user", Password: "not-it", MaxRetries: -1})
	defer wrong.Close()
	closed := redis.NewClient(&redis.Options{Addr: srv.Addr})
	_ = closed.Close()

	cmd := func(key int, args ...any) door.Cmd { return door.Cmd{Args: args, Key: key} }
	live := []struct {
		name string
		drv  door.Driver
		cmd  door.Cmd
		want door.Class
	}{
		{"ok", d.Driver(), cmd(0, "ping"), door.OK},
		{"nil reply", d.Driver(), cmd(1, "get", "d:class:none"), door.NilReply},
		{"wrong type", d.Driver(), cmd(1, "hget", "d:class:str", "f"), door.WrongType},
		{"no script", d.Driver(), cmd(0, "evalsha", "0000000000000000000000000000000000000000", 0), door.NoScript},
		{"unknown command", d.Driver(), cmd(0, "no-such-command"), door.Other},
		{"refused by ACL", goredis.New(limited), cmd(1, "get", "d:class:str"), door.NoPerm},
		{"refused by ACL in a script", goredis.New(limited), cmd(0, "eval", "return redis.call('set', KEYS[1], 'y')", 1, "d:class:str"), door.NoPerm},
		{"wrong password", goredis.New(wrong), cmd(0, "ping"), door.Auth},
		{"closed client", goredis.New(closed), cmd(0, "ping"), door.Transport},
	}
	for _, c := range live {
		t.Run(c.name, func(t *testing.T) {
			err := c.drv.Do(ctx, c.cmd).Err()
			if got := door.ClassOf(err); got != c.want {
				t.Fatalf("class of %v = %d, want %d", err, got, c.want)
			}
			if door.IsServer(err) != (c.want >= door.Other) {
				t.Fatalf("IsServer(%v) = %v", err, door.IsServer(err))
			}
		})
	}

	texts := []struct {
		text       string
		want       door.Class
		redirected bool
	}{
		{"MOVED 3999 127.0.0.1:6381", door.Moved, true},
		{"ASK 3999 127.0.0.1:6381", door.Ask, true},
		{"TRYAGAIN Multiple keys request during rehashing of slot", door.TryAgain, true},
		{"CLUSTERDOWN The cluster is down", door.ClusterDown, true},
		{"READONLY You can't write against a read only replica.", door.ReadOnly, false},
		{"NOAUTH Authentication required.", door.Auth, false},
		{"BUSY Redis is busy running a script.", door.Busy, false},
		{"LOADING Redis is loading the dataset in memory", door.Loading, false},
		{"NOPERM User u has no permissions to run the 'get' command", door.NoPerm, false},
		{"ERR The user executing the script can't run this command or subcommand", door.NoPerm, false},
		{"ERR ACL failure in script: No permissions to access a key", door.NoPerm, false},
		{"OOM command not allowed when used memory > 'maxmemory'.", door.OutOfMemory, false},
		{"ERR Error running script: WRONGTYPE Operation against a key holding the wrong kind of value", door.WrongType, false},
	}
	for _, c := range texts {
		err := fmt.Errorf("relock: wrapped: %w", door.Error(c.text))
		if got := door.ClassOf(err); got != c.want {
			t.Errorf("class of %q = %d, want %d", c.text, got, c.want)
		}
		if door.Redirected(err) != c.redirected {
			t.Errorf("Redirected(%q) = %v, want %v", c.text, !c.redirected, c.redirected)
		}
	}
	if !door.Redirected(fmt.Errorf("probing WAIT: %w", door.ErrNotMaster)) {
		t.Error("ErrNotMaster is not a redirection")
	}
}

// TestNoScriptFallsBackToEval: once the server's script cache is flushed,
// a script call goes by EVAL, whether it goes on its own, in a shared
// pipeline, or in a replica-synced one, and the script is cached again.
func TestNoScriptFallsBackToEval(t *testing.T) {
	ctx := context.Background()
	rdb := client(t, srv)
	d := newDoor(t, goredis.New(rdb))
	cached := func() bool {
		v, err := rdb.ScriptExists(ctx, scripts.Renew.SHA()).Result()
		if err != nil {
			t.Fatal(err)
		}
		return v[0]
	}
	flush := func() {
		if err := rdb.ScriptFlush(ctx).Err(); err != nil {
			t.Fatal(err)
		}
	}

	flush()
	keys, args := renew("d:noscript:run")
	if v, err := d.Run(ctx, scripts.Renew, keys, args...).Int64Slice(); err != nil || fmt.Sprint(v) != "[0]" {
		t.Fatalf("Run = %v, %v; want [0]", v, err)
	}
	if !cached() {
		t.Fatal("Run: the script is not cached after EVAL")
	}

	// Queued calls share a pipeline: each falls back on its own.
	flush()
	release := d.Busy()
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			keys, args := lockArgs(fmt.Sprintf("d:noscript:batch:%d", i), "o:1")
			if v, err := d.Do(ctx, scripts.Lock, keys, args, nil); err != nil || v <= 0 {
				errs <- fmt.Errorf("Do = %d, %v", v, err)
			}
		}()
	}
	wg.Wait()
	release()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}

	// A synced call: EVAL and a WAIT of its own on the same connection.
	flush()
	node, err := d.Driver().Master(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	keys, args = renew("d:noscript:synced")
	reply, ack := d.Synced(ctx, scripts.Renew, keys, args, &door.Sync{Node: node, Ack: wait})
	if v, err := reply.Int64Slice(); err != nil || fmt.Sprint(v) != "[0]" {
		t.Fatalf("Synced = %v, %v; want [0]", v, err)
	}
	if n, err := ack.Int64(); err != nil || n != 0 {
		t.Fatalf("WAIT = %d, %v; want 0 (no replica)", n, err)
	}
	if !cached() {
		t.Fatal("Synced: the script is not cached after EVAL")
	}
}

// wait is the WAIT of a synced send.
func wait(n int) door.Cmd { return door.Cmd{Args: []any{"wait", n, 5000}, Once: true} }

// TestSyncedSendWaitsForReplica: a synced send's WAIT follows its script
// on the master's connection, alone or in a shared pipeline, and answers
// for the replica, which has the write when the WAIT returns.
func TestSyncedSendWaitsForReplica(t *testing.T) {
	ctx := context.Background()
	r := redistest.NewReplicated(t, 1)
	d := newDoor(t, goredis.New(client(t, r.Master)))
	replica := client(t, r.Replicas[0])
	node, err := d.Driver().Master(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	if node.Addr() != r.Master.Addr {
		t.Fatalf("Master = %s, want %s", node.Addr(), r.Master.Addr)
	}
	sync1 := &door.Sync{Node: node, Replicas: 1, Ack: wait}

	check := func(key string, v int64, ack *door.Reply, err error) {
		t.Helper()
		if err != nil || v <= 0 {
			t.Fatalf("%s: lock = %d, %v", key, v, err)
		}
		if n, err := ack.Int64(); err != nil || n != 1 {
			t.Fatalf("%s: WAIT = %d, %v; want 1", key, n, err)
		}
		if n := replica.Exists(ctx, key).Val(); n != 1 {
			t.Fatalf("%s: the replica lacks the key the WAIT covered", key)
		}
	}
	keys, args := lockArgs("d:synced:alone", "o:1")
	v, ack, err := d.DoSync(ctx, scripts.Lock, keys, args, nil, sync1)
	check("d:synced:alone", v, ack, err)

	release := d.Busy() // the next calls queue, and share a pipeline and its WAIT
	type out struct {
		key string
		v   int64
		ack *door.Reply
		err error
	}
	outs := make(chan out, 4)
	for i := range 4 {
		go func() {
			key := fmt.Sprintf("d:synced:shared:%d", i)
			keys, args := lockArgs(key, "o:1")
			v, ack, err := d.DoSync(ctx, scripts.Lock, keys, args, nil, sync1)
			outs <- out{key, v, ack, err}
		}()
	}
	for range 4 {
		o := <-outs
		check(o.key, o.v, o.ack, o.err)
	}
	release()
}

// moves counts the replies a driver got that a cluster redirected.
type moves struct {
	door.Driver
	mu sync.Mutex
	n  int
}

func (m *moves) Do(ctx context.Context, cmd door.Cmd) door.Reply {
	r := m.Driver.Do(ctx, cmd)
	m.count(r.Err())
	return r
}

func (m *moves) Pipe(ctx context.Context, xs []door.Exchange) {
	m.Driver.Pipe(ctx, xs)
	for _, x := range xs {
		m.count(x.Reply.Err())
	}
}

func (m *moves) count(err error) {
	if door.Redirected(err) {
		m.mu.Lock()
		m.n++
		m.mu.Unlock()
	}
}

func (m *moves) seen() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.n
}

// TestClusterRedirectResend: after a slot moved to another master, a
// client that does not follow redirections itself gets MOVED, and the
// door reloads the slot map and sends the call again, on its own (Run),
// batched (Do) and in a round (DoRound); the driver's Master then names
// the slot's new master.
func TestClusterRedirectResend(t *testing.T) {
	if err := redistest.RequireCluster(); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	cl := redistest.NewCluster(t, 3, 0)
	rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: cl.Addrs(), MaxRedirects: -1})
	t.Cleanup(func() { _ = rdb.Close() })
	drv := &moves{Driver: goredis.New(rdb)}
	d := newDoor(t, drv)
	if !drv.Cluster() {
		t.Fatal("Cluster() = false on a cluster client")
	}
	masters, err := drv.Masters(ctx)
	if err != nil || len(masters) != 3 {
		t.Fatalf("Masters = %v, %v; want 3", masters, err)
	}

	const key = "{d:moved}"
	slot := slots.Of(key)
	// announce.lua writes one hash (of one slot) and answers 1.
	keys, args := []any{key}, []any{60000, "f", "v"}
	if v, err := d.Do(ctx, scripts.Announce, keys, args, nil); err != nil || v != 1 {
		t.Fatalf("Do before the move = %d, %v", v, err)
	}
	from, err := cl.MasterForSlot(ctx, slot)
	if err != nil {
		t.Fatal(err)
	}
	move := func() *redistest.Server {
		t.Helper()
		for _, m := range cl.Masters {
			if m != from {
				if err := cl.MigrateSlot(ctx, slot, m); err != nil {
					t.Fatal(err)
				}
				from = m
				return m
			}
		}
		t.Fatal("no other master")
		return nil
	}

	to := move()
	keys, args = renew(key)
	if v, err := d.Run(ctx, scripts.Renew, keys, args...).Int64Slice(); err != nil || fmt.Sprint(v) != "[0]" {
		t.Fatalf("Run after the move = %v, %v", v, err)
	}
	if drv.seen() == 0 {
		t.Fatal("Run: no redirection seen; the test moved nothing")
	}
	if n, err := drv.Master(ctx, key); err != nil || n.Addr() != to.Addr {
		t.Fatalf("Master(%s) = %v, %v; want %s", key, n, err, to.Addr)
	}

	before := drv.seen()
	move()
	keys, args = []any{key}, []any{60000, "f", "w"}
	if v, err := d.Do(ctx, scripts.Announce, keys, args, nil); err != nil || v != 1 {
		t.Fatalf("Do after the move = %d, %v", v, err)
	}
	if v := rdb.HGet(ctx, key, "f").Val(); v != "w" {
		t.Fatalf("after Do, the hash holds %q, want w", v)
	}
	if drv.seen() == before {
		t.Fatal("Do: no redirection seen")
	}

	before = drv.seen()
	move()
	keys, args = renew(key)
	call := &door.Call{Script: scripts.Renew, Keys: keys, Args: args}
	d.DoRound(ctx, []*door.Call{call})
	if v, err := call.Reply.Int64Slice(); err != nil || fmt.Sprint(v) != "[0]" || !call.Resent {
		t.Fatalf("DoRound after the move = %v, %v, resent %v; want [0], resent", v, err, call.Resent)
	}
	if drv.seen() == before {
		t.Fatal("DoRound: no redirection seen")
	}
}

// TestStoppedDoor: a stopped Door refuses batched calls with its Stopped
// error, and still runs a call on its own, for its callers' cleanup.
func TestStoppedDoor(t *testing.T) {
	ctx := context.Background()
	stopped := errors.New("stopped for the test")
	d := door.New(door.Config{Driver: goredis.New(client(t, srv)), Stopped: stopped})
	d.Close()
	keys, args := renew("d:stopped")
	if _, err := d.Do(ctx, scripts.Renew, keys, args, nil); !errors.Is(err, stopped) {
		t.Fatalf("Do after Close: %v, want the Stopped error", err)
	}
	if v, err := d.Run(ctx, scripts.Renew, keys, args...).Int64Slice(); err != nil || fmt.Sprint(v) != "[0]" {
		t.Fatalf("Run after Close = %v, %v; want [0]", v, err)
	}
}
