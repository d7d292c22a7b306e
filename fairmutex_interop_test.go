package relock_test

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/testkit"
)

// javaFair acts on a fair lock name the way Redisson's RFairLock does,
// written for these tests from Redisson's source: the RLock hash, the
// queue list and the timeout zset scored with the client's clock. Every
// call first drops the queue's head while its score has passed (and
// changes no other score). A free lock goes to a caller when the queue is
// empty or starts with it, and then every remaining score is lowered by
// the caller's wait time (300000ms by default). A caller already queued
// learns the lock's PTTL; a new one is queued with the score of the last
// entry (or now + the lock's PTTL) plus its wait time. A release tells
// the queue's head "0" on its own channel, with Redisson's unlock latch.
type javaFair struct {
	java    *javaLock
	queue   string
	timeout string
	wait    time.Duration // Redisson's fairLockWaitTimeout
}

const javaFairPurge = `
while true do
    local first = redis.call('lindex', KEYS[2], 0)
    if not first then break end
    local score = redis.call('zscore', KEYS[3], first)
    if not score or tonumber(score) > tonumber(ARGV[4]) then break end
    redis.call('zrem', KEYS[3], first)
    redis.call('lpop', KEYS[2])
end
`

// javaFairAcquire: KEYS lock, queue, timeouts; ARGV lease ms, thread's
// lock name, wait ms, client time ms.
const javaFairAcquire = javaFairPurge + `
local held = redis.call('exists', KEYS[1]) == 1
if not held and (redis.call('exists', KEYS[2]) == 0 or redis.call('lindex', KEYS[2], 0) == ARGV[2]) then
    redis.call('lpop', KEYS[2])
    redis.call('zrem', KEYS[3], ARGV[2])
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
if redis.call('zscore', KEYS[3], ARGV[2]) then
    return math.max(0, redis.call('pttl', KEYS[1]))
end
local last = redis.call('lindex', KEYS[2], -1)
local ttl
if last and last ~= ARGV[2] and redis.call('zscore', KEYS[3], last) then
    ttl = tonumber(redis.call('zscore', KEYS[3], last)) - tonumber(ARGV[4])
else
    ttl = redis.call('pttl', KEYS[1])
end
if redis.call('zadd', KEYS[3], ttl + tonumber(ARGV[3]) + tonumber(ARGV[4]), ARGV[2]) == 1 then
    redis.call('rpush', KEYS[2], ARGV[2])
end
return ttl`

// javaFairUnlock: KEYS lock, queue, timeouts, channel, unlock latch; ARGV
// message, lease ms, thread's lock name, client time ms, publish command,
// latch PX.
const javaFairUnlock = `
local done = redis.call('get', KEYS[5])
if done then
    return tonumber(done)
end
` + javaFairPurge + `
if redis.call('exists', KEYS[1]) == 0 then
    local first = redis.call('lindex', KEYS[2], 0)
    if first then
        redis.call(ARGV[5], KEYS[4] .. ':' .. first, ARGV[1])
    end
    redis.call('set', KEYS[5], 1, 'px', ARGV[6])
    return 1
end
if redis.call('hexists', KEYS[1], ARGV[3]) == 0 then
    return nil
end
if redis.call('hincrby', KEYS[1], ARGV[3], -1) > 0 then
    redis.call('pexpire', KEYS[1], ARGV[2])
    redis.call('set', KEYS[5], 0, 'px', ARGV[6])
    return 0
end
redis.call('del', KEYS[1])
redis.call('set', KEYS[5], 1, 'px', ARGV[6])
local first = redis.call('lindex', KEYS[2], 0)
if first then
    redis.call(ARGV[5], KEYS[4] .. ':' .. first, ARGV[1])
end
return 1`

func newJavaFair(rdb redis.UniversalClient, name string, sharded bool) *javaFair {
	return &javaFair{java: newJavaLock(rdb, name, sharded), queue: testkit.FairQueueKey(name), timeout: testkit.FairTimeoutKey(name), wait: 5 * time.Minute}
}

// thread returns the same lock as used by another Java thread.
func (j *javaFair) thread(n int) *javaFair {
	t := *j
	java := *j.java
	java.field = java.field[:len(java.field)-1] + strconv.Itoa(n)
	t.java = &java
	return &t
}

// tryLock returns 0 when acquired, else a positive wait.
func (j *javaFair) tryLock(ctx context.Context, lease time.Duration) (int64, error) {
	v, err := j.java.rdb.Eval(ctx, javaFairAcquire, []string{j.java.name, j.queue, j.timeout}, lease.Milliseconds(), j.java.field,
		j.wait.Milliseconds(), time.Now().UnixMilli()).Result()
	if errors.Is(err, redis.Nil) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	return max(v.(int64), 1), nil
}

func (j *javaFair) unlock(ctx context.Context) error {
	latch := javaUnlockLatch(j.java.name, javaRequestID())
	err := j.java.rdb.Eval(ctx, javaFairUnlock, []string{j.java.name, j.queue, j.timeout, j.java.channel, latch},
		"0", 30000, j.java.field, time.Now().UnixMilli(), j.java.publish(), 10000).Err()
	if errors.Is(err, redis.Nil) {
		return errors.New("java unlock: not held")
	}
	if err != nil {
		return err
	}
	return j.java.rdb.Del(ctx, latch).Err()
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
	testkit.ForEach(t, func(t *testing.T, top testkit.Topology) {
		rdb := top.RDB(t)
		a, b := top.NewClient(t), top.NewClient(t)
		name := testkit.LockName(t)
		java := newJavaFair(rdb, name, top.Name == "cluster")
		ctx := testkit.CtxTimeout(t, 10*time.Second)
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
		testkit.WaitQueued(t, rdb, name, 1)
		testkit.Eventually(t, 5*time.Second, "relock to sleep", func() bool { return a.Stats().Asleep == 1 })
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
		testkit.WaitQueued(t, rdb, name, 2)
		if q := testkit.Queued(t, rdb, name); q[0] != java.java.field {
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
		testkit.NoKeysLeft(t, rdb, name)
	})
}

// TestFairMutexRedissonMixedQueue: the queue [Redisson R1, relock W2,
// Redisson R3] behind a Redisson holder. When R1 takes the lock, Redisson
// lowers every queued score by its wait time (5 minutes): W2 must keep its
// place, be told by R1's release, and be served before R3, whose turn
// comes at W2's release. The shared queue keys never get a TTL.
func TestFairMutexRedissonMixedQueue(t *testing.T) {
	testkit.ForEach(t, func(t *testing.T, top testkit.Topology) {
		rdb := top.RDB(t)
		c := top.NewClient(t)
		name := testkit.LockName(t)
		r0 := newJavaFair(rdb, name, top.Name == "cluster")
		r1, r3 := r0.thread(2), r0.thread(3)
		ctx := testkit.CtxTimeout(t, 20*time.Second)
		if w, err := r0.tryLock(ctx, 30*time.Second); err != nil || w != 0 {
			t.Fatalf("R0 tryLock: %v %v", w, err)
		}
		if w, err := r1.tryLock(ctx, 30*time.Second); err != nil || w == 0 {
			t.Fatalf("R1 tryLock over R0: %v %v", w, err)
		}
		got := make(chan *relock.Lease, 1)
		go func() {
			l, err := c.FairMutex(name).Lock(ctx)
			if err != nil {
				t.Error(err)
			}
			got <- l
		}()
		testkit.WaitQueued(t, rdb, name, 2)
		testkit.Eventually(t, 5*time.Second, "relock to sleep", func() bool { return c.Stats().Asleep == 1 })
		if w, err := r3.tryLock(ctx, 30*time.Second); err != nil || w == 0 {
			t.Fatalf("R3 tryLock: %v %v", w, err)
		}
		ps := r3.subscribe(t, ctx)
		for _, key := range []string{r0.queue, r0.timeout} {
			if ttl := rdb.PTTL(ctx, key).Val(); ttl != -1 {
				t.Fatalf("shared key %s has TTL %v", key, ttl)
			}
		}

		if err := r0.unlock(ctx); err != nil {
			t.Fatal(err)
		}
		if w, err := r1.tryLock(ctx, 30*time.Second); err != nil || w != 0 {
			t.Fatalf("R1 tryLock as the head: %v %v", w, err)
		}
		if q := testkit.Queued(t, rdb, name); len(q) != 2 || q[1] != r3.java.field {
			t.Fatalf("queue after R1's grant %v, want [relock waiter, R3]", q)
		}
		if err := r1.unlock(ctx); err != nil {
			t.Fatal(err)
		}
		l := <-got
		if l == nil {
			t.FailNow()
		}
		if c.Stats().Wakeups == 0 {
			t.Fatal("relock was not woken by R1's release")
		}
		// R1's release told relock, not R3: the first message R3 hears is
		// one published after relock was granted the lock.
		channel := r3.java.channel + ":" + r3.java.field
		if err := rdb.Do(ctx, r3.java.publish(), channel, "mark").Err(); err != nil {
			t.Fatal(err)
		}
		if msg, err := ps.ReceiveMessage(ctx); err != nil || msg.Payload != "mark" {
			t.Fatalf("R3 heard %+v, %v before relock's release", msg, err)
		}
		if w, err := r3.tryLock(ctx, 30*time.Second); err != nil || w == 0 {
			t.Fatalf("R3 tryLock over relock's hold: %v %v", w, err)
		}
		if err := l.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		msg, err := ps.ReceiveMessage(ctx)
		if err != nil || msg.Payload != "0" {
			t.Fatalf("R3 heard %+v, %v", msg, err)
		}
		if w, err := r3.tryLock(ctx, 30*time.Second); err != nil || w != 0 {
			t.Fatalf("R3 tryLock as the head: %v %v", w, err)
		}
		if err := r3.unlock(ctx); err != nil {
			t.Fatal(err)
		}
		testkit.NoKeysLeft(t, rdb, name)
	})
}
