package relock_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/layout"
	"github.com/relock-go/relock/internal/testkit"
)

// waitCancelled runs wait once with a deadline and once with a context
// cancelled while it sleeps, and checks it returns the context's error.
func waitCancelled(t *testing.T, c *relock.Client, wait func(ctx context.Context) error) {
	t.Helper()
	for _, end := range []string{"deadline", "cancel"} {
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		want := context.DeadlineExceeded
		if end == "cancel" {
			ctx, cancel = context.WithCancel(context.Background())
			want = context.Canceled
			go func() {
				for c.Stats().Asleep == 0 && ctx.Err() == nil {
					time.Sleep(time.Millisecond)
				}
				cancel()
			}()
		}
		err := wait(ctx)
		cancel()
		if !errors.Is(err, want) {
			t.Fatalf("%s: %v, want %v", end, err, want)
		}
	}
}

func subscribe(ctx context.Context, t *testing.T, top testkit.Topology, rdb redis.UniversalClient, channel string) *redis.PubSub {
	t.Helper()
	var ps *redis.PubSub
	if top.Name == "cluster" {
		ps = rdb.SSubscribe(ctx, channel)
	} else {
		ps = rdb.Subscribe(ctx, channel)
	}
	t.Cleanup(func() { _ = ps.Close() })
	if _, err := ps.Receive(ctx); err != nil { // the confirmation
		t.Fatal(err)
	}
	return ps
}

// channelSubscribers counts the server's subscribers of a channel.
func channelSubscribers(t testing.TB, top testkit.Topology, channel string) int64 {
	t.Helper()
	ctx := testkit.CtxTimeout(t, 5*time.Second)
	if top.Name == "cluster" {
		c, err := top.RDB(t).(*redis.ClusterClient).MasterForKey(ctx, channel)
		if err != nil {
			t.Fatal(err)
		}
		n, err := c.PubSubShardNumSub(ctx, channel).Result()
		if err != nil {
			t.Fatal(err)
		}
		return n[channel]
	}
	n, err := testkit.CloseLater(t, testkit.Standalone.Client()).PubSubNumSub(ctx, channel).Result()
	if err != nil {
		t.Fatal(err)
	}
	return n[channel]
}

// noNewKeys fails if after holds a key before does not. (Calls may delete
// the request markers of earlier calls of their handle.)
func noNewKeys(t testing.TB, before, after []string) {
	t.Helper()
	for _, k := range after {
		if !testkit.Contains(before, k) {
			t.Fatalf("key %s left behind (keys before: %v)", k, before)
		}
	}
}

// grantChannelOf returns the grant channel on which the Client of waiter
// owner ("<uuid>:<n>") is told of locks of name.
func grantChannelOf(top testkit.Topology, name, owner string) string {
	return layout.Grants(owner[:strings.LastIndex(owner, ":")], name, top.Name == "cluster")
}

func javaPublish(top testkit.Topology) string {
	if top.Name == "cluster" {
		return "spublish"
	}
	return "publish"
}

// javaSemaphore acts on a semaphore the way Redisson's RSemaphore does:
// the string holds the permits available, and a release publishes the new
// count on redisson_sc:{name}. Written for this test from that layout.
type javaSemaphore struct {
	rdb     redis.UniversalClient
	keys    []string
	publish string
}

func newJavaSemaphore(top testkit.Topology, rdb redis.UniversalClient, name string) *javaSemaphore {
	return &javaSemaphore{rdb: rdb, keys: []string{name, "redisson_sc:{" + name + "}"}, publish: javaPublish(top)}
}

func (j *javaSemaphore) eval(ctx context.Context, script string, args ...any) (int64, error) {
	return j.rdb.Eval(ctx, script, j.keys, args...).Int64()
}

func (j *javaSemaphore) trySetPermits(ctx context.Context, n int) (int64, error) {
	return j.eval(ctx, `if redis.call('get', KEYS[1]) == false then
    redis.call('set', KEYS[1], ARGV[1]); redis.call(ARGV[2], KEYS[2], ARGV[1]); return 1 end
return 0`, n, j.publish)
}

func (j *javaSemaphore) tryAcquire(ctx context.Context, n int) (int64, error) {
	return j.eval(ctx, `local v = redis.call('get', KEYS[1])
if v ~= false and tonumber(v) >= tonumber(ARGV[1]) then redis.call('decrby', KEYS[1], ARGV[1]); return 1 end
return 0`, n)
}

func (j *javaSemaphore) release(ctx context.Context, n int) (int64, error) {
	return j.eval(ctx, `local v = redis.call('incrby', KEYS[1], ARGV[1]); redis.call(ARGV[2], KEYS[2], v); return v`, n, j.publish)
}
