package relock_test

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/layout"
	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/internal/scripts"
	"github.com/relock-go/relock/internal/testkit"
)

// rsTrip is one round trip a client made: one command, or a pipeline.
type rsTrip struct {
	node string     // the address of the client that rsTrip it
	cmds [][]string // each command's arguments, the name lower-cased
}

// names returns the command names of a round trip.
func (s rsTrip) names() []string {
	out := make([]string, len(s.cmds))
	for i, c := range s.cmds {
		out[i] = c[0]
	}
	return out
}

// rsLog is a go-redis hook recording the round trips of a client (or of
// a cluster client's nodes), leaving out each connection's handshake.
type rsLog struct {
	mu    sync.Mutex
	trips []rsTrip
}

// hook returns a hook that records what the client of address node sends.
func (l *rsLog) hook(node string) redis.Hook { return &rsHook{log: l, node: node} }

// onNodes records the round trips of every node client of cc. Call it
// before cc is used.
func (l *rsLog) onNodes(cc *redis.ClusterClient) {
	cc.OnNewNode(func(rdb *redis.Client) { rdb.AddHook(l.hook(rdb.Options().Addr)) })
}

func (l *rsLog) record(node string, cmds []redis.Cmder) {
	s := rsTrip{node: node}
	for _, c := range cmds {
		args := make([]string, len(c.Args()))
		for i, a := range c.Args() {
			args[i] = fmt.Sprint(a)
		}
		args[0] = strings.ToLower(args[0])
		if args[0] == "hello" || args[0] == "client" {
			return // a new connection's handshake
		}
		s.cmds = append(s.cmds, args)
	}
	l.mu.Lock()
	l.trips = append(l.trips, s)
	l.mu.Unlock()
}

// reset forgets what was recorded.
func (l *rsLog) reset() {
	l.mu.Lock()
	l.trips = nil
	l.mu.Unlock()
}

// all returns the round trips recorded.
func (l *rsLog) all() []rsTrip {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]rsTrip(nil), l.trips...)
}

// count returns how many commands of that name were recorded.
func (l *rsLog) count(name string) int {
	n := 0
	for _, s := range l.all() {
		for _, c := range s.cmds {
			if c[0] == name {
				n++
			}
		}
	}
	return n
}

type rsHook struct {
	log  *rsLog
	node string
}

func (h *rsHook) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *rsHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.log.record(h.node, []redis.Cmder{cmd})
		return next(ctx, cmd)
	}
}
func (h *rsHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		h.log.record(h.node, cmds)
		return next(ctx, cmds)
	}
}

// rsSink collects what a slog logger writes. It is safe for concurrent
// use.
type rsSink struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *rsSink) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *rsSink) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func (s *rsSink) logger() relock.Option {
	return relock.WithLogger(slog.New(slog.NewTextHandler(s, nil)))
}

// rsExists reports whether key exists on the server, replicas included.
func rsExists(t testing.TB, s *redistest.Server, key string) bool {
	t.Helper()
	v, err := s.Do(context.Background(), "EXISTS", key)
	if err != nil {
		t.Fatal(err)
	}
	return v.(int64) == 1
}

// rsVersion returns the major and minor version of a server: on Valkey,
// the Redis version it answers as (7.2 for Valkey 7.2 and 8).
func rsVersion(t testing.TB, s *redistest.Server) (int, int) {
	t.Helper()
	v, err := s.Do(context.Background(), "INFO", "server")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(v.(string), "\n") {
		if rest, ok := strings.CutPrefix(line, "redis_version:"); ok {
			parts := strings.Split(strings.TrimSpace(rest), ".")
			major, _ := strconv.Atoi(parts[0])
			minor := 0
			if len(parts) > 1 {
				minor, _ = strconv.Atoi(parts[1])
			}
			return major, minor
		}
	}
	t.Fatal("no redis_version in INFO server")
	return 0, 0
}

// countIn returns how many commands of that name a round trip holds.
func (l *rsLog) countIn(s rsTrip, name string) int {
	n := 0
	for _, c := range s.cmds {
		if c[0] == name {
			n++
		}
	}
	return n
}

// rsGet returns a string key's value on rdb ("" when there is none).
func rsGet(t *testing.T, rdb *redis.Client, key string) string {
	t.Helper()
	v, err := rdb.Get(context.Background(), key).Result()
	if errors.Is(err, redis.Nil) {
		return ""
	}
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// rsHeldPermits returns the ids held in a PermitSemaphore on rdb, with
// their expiry in unix ms.
func rsHeldPermits(t *testing.T, rdb *redis.Client, ps *relock.PermitSemaphore) map[string]float64 {
	t.Helper()
	zs, err := rdb.ZRangeWithScores(context.Background(), layout.PermitTimeouts(ps.Name()), 0, -1).Result()
	if err != nil {
		t.Fatal(err)
	}
	out := make(map[string]float64, len(zs))
	for _, z := range zs {
		out[hex.EncodeToString([]byte(z.Member.(string)))] = z.Score
	}
	return out
}

// rsWantUndone fails unless err says an acquisition fell short and was
// undone (not a change left applied).
func rsWantUndone(t *testing.T, what string, err error) {
	t.Helper()
	if !errors.Is(err, relock.ErrReplicaSync) || errors.Is(err, relock.ErrUnconfirmed) || strings.Contains(err.Error(), "applied on the master") {
		t.Fatalf("%s: %v, want ErrReplicaSync for an acquisition undone", what, err)
	}
}

// rsWantApplied fails unless err says a write fell short but was applied on
// the master.
func rsWantApplied(t *testing.T, what string, err error) {
	t.Helper()
	if !errors.Is(err, relock.ErrReplicaSync) || !errors.Is(err, relock.ErrUnconfirmed) || !strings.Contains(err.Error(), "applied on the master") ||
		!strings.Contains(err.Error(), "do not repeat it") {
		t.Fatalf("%s: %v, want ErrReplicaSync saying the change was applied on the master", what, err)
	}
}

// rsScriptTrips returns the round trips that carried s.
func rsScriptTrips(log *rsLog, s *scripts.Script) []rsTrip {
	var out []rsTrip
	for _, trip := range log.all() {
		for _, c := range trip.cmds {
			if (c[0] == "evalsha" && c[1] == s.SHA()) || (c[0] == "eval" && c[1] == s.Source()) {
				out = append(out, trip)
				break
			}
		}
	}
	return out
}

// rsDropPiped is a go-redis hook that, once armed, drops the reply of one
// call of script in a pipeline after the server ran it, as a connection
// lost at that moment would.
type rsDropPiped struct {
	script  *scripts.Script
	armed   atomic.Bool
	dropped atomic.Int32
}

func (d *rsDropPiped) DialHook(next redis.DialHook) redis.DialHook          { return next }
func (d *rsDropPiped) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }
func (d *rsDropPiped) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		err := next(ctx, cmds)
		for _, c := range cmds {
			args := c.Args()
			if err == nil && c.Name() == "evalsha" && len(args) > 1 && args[1] == d.script.SHA() && d.armed.CompareAndSwap(true, false) {
				d.dropped.Add(1)
				c.SetErr(testkit.ErrDropped)
				return testkit.ErrDropped
			}
		}
		return err
	}
}

// clusterWithLog returns a Client on the shared cluster, once every master
// has its replica online, its go-redis client, and a log of the commands
// that client's node clients send.
func clusterWithLog(t *testing.T) (*relock.Client, *redis.ClusterClient, *rsLog) {
	t.Helper()
	for _, m := range testkit.Cluster.Masters {
		testkit.WaitReplicasOnline(t, m, 1)
	}
	log := new(rsLog)
	cc := testkit.CloseLater(t, testkit.Cluster.Client())
	log.onNodes(cc)
	return testkit.NewClient(t, cc), cc, log
}
