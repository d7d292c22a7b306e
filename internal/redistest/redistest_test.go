package redistest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// eventually retries f until it succeeds or the timeout passes.
func eventually(t *testing.T, timeout time.Duration, what string, f func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := f()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: still failing after %v: %v", what, timeout, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestStartFailureShowsLog(t *testing.T) {
	t.Parallel()
	if err := Require(); err != nil {
		t.Fatal(err)
	}
	_, err := Start(Options{Args: []string{"no-such-directive yes"}})
	if err == nil {
		t.Fatal("Start accepted a bad directive")
	}
	if !strings.Contains(err.Error(), "no-such-directive") {
		t.Fatalf("error lacks the log tail: %v", err)
	}
}

func TestStandaloneKillRestart(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := Standalone(t)
	if s.Addr != fmt.Sprintf("127.0.0.1:%d", s.Port) {
		t.Fatalf("Addr %q does not match Port %d", s.Addr, s.Port)
	}
	c := s.Client()
	defer c.Close()
	if err := c.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}

	if err := s.Kill(); err != nil {
		t.Fatal(err)
	}
	if s.Running() {
		t.Fatal("Running after Kill")
	}
	if _, err := s.Do(ctx, "PING"); err == nil {
		t.Fatal("PING succeeded on a killed server")
	}
	if err := s.Kill(); err != nil {
		t.Fatalf("second Kill: %v", err)
	}

	port, dir := s.Port, s.Dir
	if err := s.Restart(); err != nil {
		t.Fatal(err)
	}
	if s.Port != port || s.Dir != dir {
		t.Fatalf("Restart moved the server: %d %s -> %d %s", port, dir, s.Port, s.Dir)
	}
	if v, err := s.Do(ctx, "PING"); err != nil || v != "PONG" {
		t.Fatalf("PING after Restart = %v, %v", v, err)
	}
	if err := c.Get(ctx, "k").Err(); err != redis.Nil {
		t.Fatalf("GET after Restart without persistence: %v, want redis.Nil", err)
	}

	// Restart of a running server kills it first.
	if err := s.Restart(); err != nil {
		t.Fatal(err)
	}
	if err := c.Ping(ctx).Err(); err != nil {
		// The pooled connection died with the old process; a new one works.
		if err := c.Ping(ctx).Err(); err != nil {
			t.Fatal(err)
		}
	}

	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("directory left after Close: %v", err)
	}
	if err := s.Restart(); err == nil {
		t.Fatal("Restart after Close succeeded")
	}
}

func TestDo(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := Standalone(t)
	if v, err := s.Do(ctx, "INCRBY", "n", 5); err != nil || v != int64(5) {
		t.Fatalf("INCRBY = %#v, %v", v, err)
	}
	if _, err := s.Do(ctx, "GET", "missing"); err != redis.Nil {
		t.Fatalf("GET missing: %v, want redis.Nil", err)
	}
	_, err := s.Do(ctx, "NO-SUCH-COMMAND")
	var rerr redis.Error
	if !errors.As(err, &rerr) {
		t.Fatalf("unknown command: %v (%T), want a redis.Error", err, err)
	}
	if _, err := s.Do(ctx, "RPUSH", "l", "a", []byte("b"), 1.5, true); err != nil {
		t.Fatal(err)
	}
	v, err := s.Do(ctx, "LRANGE", "l", 0, -1)
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(v) != "[a b 1.5 1]" {
		t.Fatalf("LRANGE = %v", v)
	}
}

func TestPersistenceSurvivesRestart(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := Standalone(t, Options{Persistence: true, Args: []string{"maxmemory-policy allkeys-lru"}})
	if _, err := s.Do(ctx, "SET", "k", "v"); err != nil {
		t.Fatal(err)
	}
	if err := s.Kill(); err != nil {
		t.Fatal(err)
	}
	if err := s.Restart(); err != nil {
		t.Fatal(err)
	}
	if v, err := s.Do(ctx, "GET", "k"); err != nil || v != "v" {
		t.Fatalf("GET after Restart = %v, %v", v, err)
	}
	v, err := s.Do(ctx, "CONFIG", "GET", "maxmemory-policy")
	if err != nil {
		t.Fatal(err)
	}
	if list, _ := v.([]any); len(list) != 2 || list[1] != "allkeys-lru" {
		t.Fatalf("extra directive not applied: %v", v)
	}
}

func TestPauseResume(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := Standalone(t)
	c := redis.NewClient(&redis.Options{
		Addr:         s.Addr,
		ReadTimeout:  200 * time.Millisecond,
		WriteTimeout: 200 * time.Millisecond,
		MaxRetries:   -1,
	})
	defer c.Close()
	if err := c.Ping(ctx).Err(); err != nil {
		t.Fatal(err)
	}

	if err := s.Pause(); err != nil {
		t.Fatal(err)
	}
	if !s.Paused() {
		t.Fatal("Paused() is false after Pause")
	}
	start := time.Now()
	err := c.Ping(ctx).Err()
	var netErr interface{ Timeout() bool }
	if err == nil || !errors.As(err, &netErr) || !netErr.Timeout() {
		t.Fatalf("PING while paused: %v, want a timeout", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("PING while paused took %v", d)
	}

	if err := s.Resume(); err != nil {
		t.Fatal(err)
	}
	if s.Paused() {
		t.Fatal("Paused() is true after Resume")
	}
	// The resumed server first works through what queued up meanwhile; on
	// a loaded machine one 200ms attempt may not be enough.
	eventually(t, 5*time.Second, "PING after Resume", func() error { return c.Ping(ctx).Err() })

	// A paused server can still be killed and closed.
	if err := s.Pause(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestKillPubSubClients(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := Standalone(t)
	c := s.Client()
	defer c.Close()

	sub := c.Subscribe(ctx, "events")
	defer sub.Close()
	if _, err := sub.Receive(ctx); err != nil {
		t.Fatal(err)
	}
	ssub := c.SSubscribe(ctx, "shard-events")
	defer ssub.Close()
	if _, err := ssub.Receive(ctx); err != nil {
		t.Fatal(err)
	}

	n, err := s.KillPubSubClients(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if n < 2 {
		t.Fatalf("killed %d pub/sub clients, want at least 2", n)
	}
	rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if _, err := sub.ReceiveTimeout(rctx, 5*time.Second); err == nil {
		t.Fatal("subscription still delivered after its connection was killed")
	}
}

func TestReplicated(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	r := NewReplicated(t, 2)
	if len(r.Replicas) != 2 {
		t.Fatalf("%d replicas", len(r.Replicas))
	}
	m := r.Master.Client()
	defer m.Close()
	if err := m.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	n, err := m.Wait(ctx, 1, time.Second).Result()
	if err != nil || n < 1 {
		t.Fatalf("WAIT 1 = %d, %v", n, err)
	}
	// WAIT 1 guarantees one replica; read the value from whichever has it,
	// and expect both to have it soon.
	for _, rep := range r.Replicas {
		rc := rep.Client()
		eventually(t, 5*time.Second, "GET on replica "+rep.Addr, func() error {
			v, err := rc.Get(ctx, "k").Result()
			if err != nil {
				return err
			}
			if v != "v" {
				return fmt.Errorf("got %q", v)
			}
			return nil
		})
		rc.Close()
	}
}

func TestSentinelFailover(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := NewSentinel(t)
	if len(s.Sentinels) != 3 || len(s.Replicas) != 2 || s.MasterName == "" {
		t.Fatalf("unexpected group: %d sentinels, %d replicas, name %q", len(s.Sentinels), len(s.Replicas), s.MasterName)
	}
	fc := s.FailoverClient()
	defer fc.Close()
	if err := fc.Set(ctx, "k", "before", 0).Err(); err != nil {
		t.Fatal(err)
	}

	old, err := s.CurrentMaster(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if old != s.Master {
		t.Fatalf("CurrentMaster = %v, want %v", old, s.Master)
	}
	if err := old.Kill(); err != nil {
		t.Fatal(err)
	}

	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	nm, err := s.WaitForNewMaster(wctx, old)
	if err != nil {
		t.Fatal(err)
	}
	if cur, err := s.CurrentMaster(ctx); err != nil || cur != nm {
		t.Fatalf("CurrentMaster after failover = %v, %v; want %v", cur, err, nm)
	}
	eventually(t, 30*time.Second, "write through the failover client", func() error {
		return fc.Set(ctx, "k", "after", 0).Err()
	})
	if v, err := nm.Do(ctx, "GET", "k"); err != nil || v != "after" {
		t.Fatalf("GET on new master = %v, %v", v, err)
	}
}

func TestCluster(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := NewCluster(t, 3, 1)
	if len(c.Masters) != 3 || len(c.Replicas) != 3 || len(c.Nodes) != 6 || len(c.Addrs()) != 6 {
		t.Fatalf("topology: %d masters, %d replicas, %d nodes", len(c.Masters), len(c.Replicas), len(c.Nodes))
	}
	for _, s := range c.Nodes {
		if s.Port >= maxClusterPort {
			t.Fatalf("cluster port %d leaves no room for the bus port", s.Port)
		}
	}

	cc := c.Client()
	defer cc.Close()
	slots := make(map[int64]bool)
	for i := range 200 {
		key := fmt.Sprintf("key-%d", i)
		if err := cc.Set(ctx, key, i, 0).Err(); err != nil {
			t.Fatal(err)
		}
		slot, err := cc.ClusterKeySlot(ctx, key).Result()
		if err != nil {
			t.Fatal(err)
		}
		slots[slot] = true
	}
	if len(slots) < 100 {
		t.Fatalf("keys hit only %d slots", len(slots))
	}
	for i := range 200 {
		v, err := cc.Get(ctx, fmt.Sprintf("key-%d", i)).Int()
		if err != nil || v != i {
			t.Fatalf("GET key-%d = %d, %v", i, v, err)
		}
	}

	m0, err := c.MasterForSlot(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	if m0 != c.Masters[0] {
		t.Fatalf("MasterForSlot(0) = %v, want Masters[0] %v", m0, c.Masters[0])
	}
	last, err := c.MasterForSlot(ctx, 16383)
	if err != nil || last != c.Masters[2] {
		t.Fatalf("MasterForSlot(16383) = %v, %v; want %v", last, err, c.Masters[2])
	}

	sub := cc.Subscribe(ctx, "events")
	defer sub.Close()
	if _, err := sub.Receive(ctx); err != nil {
		t.Fatal(err)
	}
	if n, err := c.KillPubSubClients(ctx); err != nil || n < 1 {
		t.Fatalf("KillPubSubClients = %d, %v", n, err)
	}

	fctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := c.Failover(fctx, m0); err != nil {
		t.Fatal(err)
	}
	now, err := c.MasterForSlot(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	if now == m0 || now != c.Masters[0] {
		t.Fatalf("after Failover slot 0 is served by %v (old %v, Masters[0] %v)", now, m0, c.Masters[0])
	}
	eventually(t, 10*time.Second, "cluster writes after failover", func() error {
		for i := range 200 {
			if err := cc.Set(ctx, fmt.Sprintf("key-%d", i), -i, 0).Err(); err != nil {
				return err
			}
		}
		return nil
	})

	// A killed master is replaced with CLUSTER FAILOVER FORCE.
	m1 := c.Masters[1]
	if err := m1.Kill(); err != nil {
		t.Fatal(err)
	}
	if err := c.Failover(fctx, m1); err != nil {
		t.Fatal(err)
	}
	if got, err := c.MasterForSlot(ctx, 16383/2); err != nil || got == m1 {
		t.Fatalf("after forced failover the middle slot is served by %v, %v", got, err)
	}
}

func TestMasters(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	m := NewMasters(t, 3)
	seen := make(map[string]bool)
	for _, s := range m {
		if seen[s.Addr] {
			t.Fatalf("duplicate address %s", s.Addr)
		}
		seen[s.Addr] = true
		if v, err := s.Do(ctx, "PING"); err != nil || v != "PONG" {
			t.Fatalf("PING %s = %v, %v", s.Addr, v, err)
		}
		if _, err := s.Do(ctx, "SET", "who", s.Addr); err != nil {
			t.Fatal(err)
		}
	}
	for _, s := range m {
		if v, err := s.Do(ctx, "GET", "who"); err != nil || v != s.Addr {
			t.Fatalf("masters are not independent: %s has %v, %v", s.Addr, v, err)
		}
	}
	if got := m.Addrs(); len(got) != 3 {
		t.Fatalf("Addrs = %v", got)
	}
}
