package relock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/relock-go/relock"
)

// javaFair acts on a fair lock name the way Redisson's RFairLock does: the
// RLock hash, the queue list and the timeout zset scored with the client's
// clock, a purge of the queue heads whose time has passed, acquisition
// only by the first of the queue, a decrement of the others' timeouts by
// the thread wait time on acquisition, and "0" published on the new first
// waiter's own channel at release. Written for this test from that layout.
type javaFair struct {
	java    *javaLock
	queue   string
	timeout string
	wait    time.Duration // Redisson's threadWaitTime
}

const javaFairPurge = `
while true do
    local first = redis.call('lindex', KEYS[2], 0)
    if not first then break end
    local deadline = tonumber(redis.call('zscore', KEYS[3], first))
    if deadline and deadline > tonumber(ARGV[4]) then break end
    redis.call('lpop', KEYS[2])
    redis.call('zrem', KEYS[3], first)
end
`

const javaFairAcquire = javaFairPurge + `
local first = redis.call('lindex', KEYS[2], 0)
if redis.call('exists', KEYS[1]) == 0 and (not first or first == ARGV[2]) then
    if first then
        redis.call('lpop', KEYS[2])
        redis.call('zrem', KEYS[3], ARGV[2])
    end
    for _, w in ipairs(redis.call('zrange', KEYS[3], 0, -1)) do
        redis.call('zincrby', KEYS[3], -tonumber(ARGV[3]), w)
    end
    redis.call('hset', KEYS[1], ARGV[2], 1)
    redis.call('pexpire', KEYS[1], ARGV[1])
    return nil
end
if redis.call('hexists', KEYS[1], ARGV[2]) == 1 then
    redis.call('hincrby', KEYS[1], ARGV[2], 1)
    redis.call('pexpire', KEYS[1], ARGV[1])
    return nil
end
if not redis.call('zscore', KEYS[3], ARGV[2]) then
    redis.call('zadd', KEYS[3], tonumber(ARGV[4]) + tonumber(ARGV[3]), ARGV[2])
    redis.call('rpush', KEYS[2], ARGV[2])
end
return math.max(1, redis.call('pttl', KEYS[1]))`

const javaFairUnlock = javaFairPurge + `
if redis.call('hexists', KEYS[1], ARGV[1]) == 0 then
    return nil
end
if redis.call('hincrby', KEYS[1], ARGV[1], -1) > 0 then
    return 0
end
redis.call('del', KEYS[1])
local first = redis.call('lindex', KEYS[2], 0)
if first then
    redis.call(ARGV[2], KEYS[4] .. ':' .. first, '0')
end
return 1`

func newJavaFair(rdb redis.UniversalClient, name string, sharded bool) *javaFair {
	return &javaFair{java: newJavaLock(rdb, name, sharded), queue: fairQueueKey(name), timeout: fairTimeoutKey(name), wait: time.Second}
}

func (j *javaFair) keys() []string {
	return []string{j.java.name, j.queue, j.timeout, j.java.channel}
}

// tryLock returns 0 when acquired, else a positive wait.
func (j *javaFair) tryLock(ctx context.Context, lease time.Duration) (int64, error) {
	v, err := j.java.rdb.Eval(ctx, javaFairAcquire, j.keys(), lease.Milliseconds(), j.java.field,
		j.wait.Milliseconds(), time.Now().UnixMilli()).Result()
	if errors.Is(err, redis.Nil) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	return v.(int64), nil
}

func (j *javaFair) unlock(ctx context.Context) error {
	publish := "publish"
	if j.java.sharded {
		publish = "spublish"
	}
	err := j.java.rdb.Eval(ctx, javaFairUnlock, j.keys(), j.java.field, publish, 0, time.Now().UnixMilli()).Err()
	if errors.Is(err, redis.Nil) {
		return errors.New("java unlock: not held")
	}
	return err
}

// subscribe subscribes to the Java thread's own channel and waits for the
// confirmation.
func (j *javaFair) subscribe(t *testing.T, ctx context.Context) *redis.PubSub {
	t.Helper()
	channel := j.java.channel + ":" + j.java.field
	var ps *redis.PubSub
	if j.java.sharded {
		ps = j.java.rdb.SSubscribe(ctx, channel)
	} else {
		ps = j.java.rdb.Subscribe(ctx, channel)
	}
	t.Cleanup(func() { _ = ps.Close() })
	if _, err := ps.Receive(ctx); err != nil {
		t.Fatal(err)
	}
	return ps
}

func TestFairMutexRedissonInterop(t *testing.T) {
	forEach(t, func(t *testing.T, top topology) {
		rdb := top.rdb(t)
		a, b := top.newClient(t), top.newClient(t)
		name := lockName(t)
		java := newJavaFair(rdb, name, top.name == "cluster")
		ctx := ctxTimeout(t, 10*time.Second)
		lock := func(c *relock.Client) <-chan *relock.Lease {
			got := make(chan *relock.Lease, 1)
			go func() {
				l, err := c.FairMutex(name).Lock(ctx)
				if err != nil {
					t.Error(err)
				}
				got <- l
			}()
			return got
		}

		// Java holds: relock is excluded, queues, and is woken on its own
		// channel by Java's release.
		if w, err := java.tryLock(ctx, 30*time.Second); err != nil || w != 0 {
			t.Fatalf("java tryLock: %v %v", w, err)
		}
		if _, err := a.FairMutex(name).TryLock(ctx); !errors.Is(err, relock.ErrNotAcquired) {
			t.Fatalf("relock TryLock over a Java hold: %v", err)
		}
		first := lock(a)
		waitQueued(t, rdb, name, 1)
		eventually(t, 5*time.Second, "relock to sleep", func() bool { return a.Stats().Asleep == 1 })
		if err := java.unlock(ctx); err != nil {
			t.Fatal(err)
		}
		l := <-first
		if l == nil {
			t.FailNow()
		}
		if a.Stats().Wakeups == 0 {
			t.Fatal("relock was not woken by Java's release")
		}

		// relock holds: Java is excluded and queues; a relock waiter queues
		// behind Java. relock's release tells Java alone, on its channel.
		if w, err := java.tryLock(ctx, 30*time.Second); err != nil || w <= 0 {
			t.Fatalf("java tryLock over a relock hold: %v %v", w, err)
		}
		ps := java.subscribe(t, ctx)
		second := lock(b)
		waitQueued(t, rdb, name, 2)
		if q := queued(t, rdb, name); q[0] != java.java.field {
			t.Fatalf("queue %v: Java is not first", q)
		}
		if err := l.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		msg, err := ps.ReceiveMessage(ctx)
		if err != nil || msg.Payload != "0" || msg.Channel != java.java.channel+":"+java.java.field {
			t.Fatalf("java heard %+v, %v", msg, err)
		}
		if _, err := a.FairMutex(name).TryLock(ctx); !errors.Is(err, relock.ErrNotAcquired) {
			t.Fatalf("relock TryLock past Java, first in the queue: %v", err)
		}
		if w, err := java.tryLock(ctx, 30*time.Second); err != nil || w != 0 {
			t.Fatalf("java tryLock as the first waiter: %v %v", w, err)
		}
		if b.Stats().Wakeups != 0 {
			t.Fatal("a waiter behind the first was woken")
		}
		if err := java.unlock(ctx); err != nil {
			t.Fatal(err)
		}
		l = <-second
		if l == nil {
			t.FailNow()
		}
		if err := l.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		noKeysLeft(t, rdb, name)
	})
}
