package relock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/testkit"
)

// javaRW acts on a name the way a Redisson RReadWriteLock does: hash field
// "mode"; a reader's field "<uuid>:<thread id>" holding its count and one
// key "{name}:<field>:rwlock_timeout:<i>" per hold with the hold's TTL; a
// writer's field "<field>:write"; on the channel redisson_rwlock:{name}
// (sharded on a cluster) a read unlock that frees the lock publishes "0"
// and a write unlock "1". The scripts below are written for this test
// from that layout.
type javaRW struct {
	rdb     redis.UniversalClient
	name    string
	field   string
	channel string
	sharded bool
}

const javaReadLock = `
local mode = redis.call('hget', KEYS[1], 'mode')
if mode == false then
    redis.call('hset', KEYS[1], 'mode', 'read')
    redis.call('hset', KEYS[1], ARGV[2], 1)
    redis.call('set', KEYS[2] .. ':1', 1, 'px', ARGV[1])
    redis.call('pexpire', KEYS[1], ARGV[1])
    return nil
end
if mode == 'read' or (mode == 'write' and redis.call('hexists', KEYS[1], ARGV[3]) == 1) then
    local n = redis.call('hincrby', KEYS[1], ARGV[2], 1)
    redis.call('set', KEYS[2] .. ':' .. n, 1, 'px', ARGV[1])
    redis.call('pexpire', KEYS[1], math.max(redis.call('pttl', KEYS[1]), ARGV[1]))
    return nil
end
return redis.call('pttl', KEYS[1])`

// javaReadUnlock: KEYS lock, channel, the thread's hold key prefix, the
// hold key base "{name}", unlock latch; ARGV message, thread's lock name,
// publish command, latch PX.
const javaReadUnlock = `
local done = redis.call('get', KEYS[5])
if done then
    return tonumber(done)
end
local mode = redis.call('hget', KEYS[1], 'mode')
if mode == false then
    redis.call(ARGV[3], KEYS[2], ARGV[1])
    redis.call('set', KEYS[5], 1, 'px', ARGV[4])
    return nil
end
if redis.call('hexists', KEYS[1], ARGV[2]) == 0 then
    return nil
end
local c = redis.call('hincrby', KEYS[1], ARGV[2], -1)
if c == 0 then
    redis.call('hdel', KEYS[1], ARGV[2])
end
redis.call('del', KEYS[3] .. ':' .. (c + 1))
if redis.call('hlen', KEYS[1]) > 1 then
    local remain = -3
    for _, key in ipairs(redis.call('hkeys', KEYS[1])) do
        local n = tonumber(redis.call('hget', KEYS[1], key))
        if type(n) == 'number' then
            for i = n, 1, -1 do
                remain = math.max(redis.call('pttl', KEYS[4] .. ':' .. key .. ':rwlock_timeout:' .. i), remain)
            end
        end
    end
    if remain > 0 then
        redis.call('pexpire', KEYS[1], remain)
        redis.call('set', KEYS[5], 0, 'px', ARGV[4])
        return 0
    end
    if mode == 'write' then
        redis.call('set', KEYS[5], 0, 'px', ARGV[4])
        return 0
    end
end
redis.call('del', KEYS[1])
redis.call(ARGV[3], KEYS[2], ARGV[1])
redis.call('set', KEYS[5], 1, 'px', ARGV[4])
return 1`

// javaReadRenew is a Redisson reader's watchdog for one name: KEYS lock,
// hold key base "{name}"; ARGV lease ms, then the lock names of this
// client's reading threads. It extends those threads' hold keys only, and
// the hash.
const javaReadRenew = `
local alive = false
for k = 2, #ARGV do
    local n = redis.call('hget', KEYS[1], ARGV[k])
    if n then
        alive = true
        for i = tonumber(n), 1, -1 do
            redis.call('pexpire', KEYS[2] .. ':' .. ARGV[k] .. ':rwlock_timeout:' .. i, ARGV[1])
        end
    end
end
if alive then
    redis.call('pexpire', KEYS[1], ARGV[1])
    return 1
end
return 0`

const javaWriteLock = `
local mode = redis.call('hget', KEYS[1], 'mode')
if mode == false then
    redis.call('hset', KEYS[1], 'mode', 'write')
    redis.call('hset', KEYS[1], ARGV[2], 1)
    redis.call('pexpire', KEYS[1], ARGV[1])
    return nil
end
if mode == 'write' and redis.call('hexists', KEYS[1], ARGV[2]) == 1 then
    redis.call('hincrby', KEYS[1], ARGV[2], 1)
    redis.call('pexpire', KEYS[1], redis.call('pttl', KEYS[1]) + ARGV[1])
    return nil
end
return redis.call('pttl', KEYS[1])`

// javaWriteUnlock: KEYS lock, channel, unlock latch; ARGV message, lease
// ms, the writer's lock name, publish command, latch PX.
const javaWriteUnlock = `
local done = redis.call('get', KEYS[3])
if done then
    return tonumber(done)
end
local mode = redis.call('hget', KEYS[1], 'mode')
if mode == false then
    redis.call(ARGV[4], KEYS[2], ARGV[1])
    redis.call('set', KEYS[3], 1, 'px', ARGV[5])
    return nil
end
if mode ~= 'write' or redis.call('hexists', KEYS[1], ARGV[3]) == 0 then
    return nil
end
if redis.call('hincrby', KEYS[1], ARGV[3], -1) > 0 then
    redis.call('pexpire', KEYS[1], ARGV[2])
    redis.call('set', KEYS[3], 0, 'px', ARGV[5])
    return 0
end
redis.call('hdel', KEYS[1], ARGV[3])
if redis.call('hlen', KEYS[1]) == 1 then
    redis.call('del', KEYS[1])
    redis.call(ARGV[4], KEYS[2], ARGV[1])
else
    redis.call('hset', KEYS[1], 'mode', 'read')
end
redis.call('set', KEYS[3], 1, 'px', ARGV[5])
return 1`

func newJavaRW(rdb redis.UniversalClient, name string, sharded bool) *javaRW {
	return &javaRW{rdb: rdb, name: name, field: "1f0e3dad-9a8b-4c7d-8e6f-5a4b3c2d1e0f:77",
		channel: testkit.RWChannel(name), sharded: sharded}
}

func (j *javaRW) publish() string {
	if j.sharded {
		return "spublish"
	}
	return "publish"
}

// result turns a Redisson script reply into 0 (done) or the holder's TTL.
func javaResult(v any, err error) (time.Duration, error) {
	if errors.Is(err, redis.Nil) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	return time.Duration(v.(int64)) * time.Millisecond, nil
}

func (j *javaRW) readLock(ctx context.Context, lease time.Duration) (time.Duration, error) {
	return javaResult(j.rdb.Eval(ctx, javaReadLock, []string{j.name, "{" + j.name + "}:" + j.field + ":rwlock_timeout"},
		lease.Milliseconds(), j.field, j.field+":write").Result())
}

func (j *javaRW) readUnlock(ctx context.Context) error {
	latch := javaUnlockLatch(j.name, javaRequestID())
	err := j.rdb.Eval(ctx, javaReadUnlock, []string{j.name, j.channel, "{" + j.name + "}:" + j.field + ":rwlock_timeout", "{" + j.name + "}", latch},
		"0", j.field, j.publish(), 10000).Err()
	if err != nil && !errors.Is(err, redis.Nil) {
		return err
	}
	return j.rdb.Del(ctx, latch).Err()
}

// renewReader runs the Java reader's watchdog once.
func (j *javaRW) renewReader(ctx context.Context, lease time.Duration) (int64, error) {
	return j.rdb.Eval(ctx, javaReadRenew, []string{j.name, "{" + j.name + "}"}, lease.Milliseconds(), j.field).Int64()
}

func (j *javaRW) writeLock(ctx context.Context, lease time.Duration) (time.Duration, error) {
	return javaResult(j.rdb.Eval(ctx, javaWriteLock, []string{j.name}, lease.Milliseconds(), j.field+":write").Result())
}

func (j *javaRW) writeUnlock(ctx context.Context) error {
	latch := javaUnlockLatch(j.name, javaRequestID())
	err := j.rdb.Eval(ctx, javaWriteUnlock, []string{j.name, j.channel, latch}, "1", 30000, j.field+":write", j.publish(), 10000).Err()
	if err != nil && !errors.Is(err, redis.Nil) {
		return err
	}
	return j.rdb.Del(ctx, latch).Err()
}

func (j *javaRW) subscribe(ctx context.Context) *redis.PubSub {
	if j.sharded {
		return j.rdb.SSubscribe(ctx, j.channel)
	}
	return j.rdb.Subscribe(ctx, j.channel)
}

// hear waits for one message on ps and checks it.
func rwHear(t *testing.T, ctx context.Context, ps *redis.PubSub, channel, want string) {
	t.Helper()
	msg, err := ps.ReceiveMessage(ctx)
	if err != nil || msg.Payload != want || msg.Channel != channel {
		t.Fatalf("heard %+v, %v; want %q on %s", msg, err, want, channel)
	}
}

func TestRWMutexRedissonInterop(t *testing.T) {
	testkit.ForEach(t, func(t *testing.T, top testkit.Topology) {
		rdb := top.RDB(t)
		c := top.NewClient(t)
		name := testkit.LockName(t)
		rw := c.RWMutex(name)
		java := newJavaRW(rdb, name, top.Name == "cluster")
		ctx := testkit.CtxTimeout(t, 10*time.Second)
		must := testkit.RWMust(t)

		// A Java reader and a relock reader share the lock, in one hash.
		if ttl, err := java.readLock(ctx, 30*time.Second); err != nil || ttl != 0 {
			t.Fatalf("java readLock: %v %v", ttl, err)
		}
		rl := must(rw.TryRLock(ctx))
		fields := testkit.RWReaders(t, rdb, name)
		if len(fields) != 2 || rdb.HGet(ctx, name, "mode").Val() != "read" {
			t.Fatalf("hash %v", rdb.HGetAll(ctx, name).Val())
		}
		for _, f := range fields {
			if ttl := rdb.PTTL(ctx, testkit.RWHoldKey(name, f, 1)).Val(); ttl <= 0 || ttl > relock.DefaultWatchdogTimeout {
				t.Fatalf("hold key of %s: TTL %v", f, ttl)
			}
		}
		if _, err := rw.TryLock(ctx); !errors.Is(err, relock.ErrNotAcquired) {
			t.Fatalf("relock TryLock over a Java reader: %v", err)
		}
		// Java's reader watchdog extends its own hold keys only.
		if n, err := java.renewReader(ctx, 2*relock.DefaultWatchdogTimeout); n != 1 || err != nil {
			t.Fatalf("java renew: %v %v", n, err)
		}
		for _, f := range fields {
			ttl := rdb.PTTL(ctx, testkit.RWHoldKey(name, f, 1)).Val()
			if mine := f == java.field; mine != (ttl > relock.DefaultWatchdogTimeout) {
				t.Fatalf("hold key of %s after Java's renewal: TTL %v", f, ttl)
			}
		}
		// relock's read release keeps the lock for the Java reader.
		testkit.RWUnlockAll(t, ctx, rl)
		if f := testkit.RWReaders(t, rdb, name); len(f) != 1 || f[0] != java.field {
			t.Fatalf("readers %v after relock's release", f)
		}
		// A relock writer waits, and is woken by the Java reader's release.
		got := make(chan *relock.Lease, 1)
		go func() {
			l, err := rw.Lock(ctx)
			if err != nil {
				t.Error(err)
			}
			got <- l
		}()
		testkit.Eventually(t, 5*time.Second, "relock's writer to wait", func() bool {
			return c.Stats().Asleep == 1 && testkit.RWSubscribers(t, top, name) == 1
		})
		if err := java.readUnlock(ctx); err != nil {
			t.Fatal(err)
		}
		wl := <-got
		if wl == nil {
			t.FailNow()
		}
		if c.Stats().Wakeups == 0 {
			t.Fatal("relock's writer was not woken by Java's release message")
		}
		if rdb.HGet(ctx, name, "mode").Val() != "write" || testkit.HoldCount(t, rdb, name) != 1 {
			t.Fatalf("hash under relock's writer: %v", rdb.HGetAll(ctx, name).Val())
		}

		// Java is excluded by relock's writer, subscribes as Redisson does,
		// and hears "1" when it ends.
		if ttl, err := java.readLock(ctx, 30*time.Second); err != nil || ttl <= 0 {
			t.Fatalf("java readLock over relock's writer: %v %v", ttl, err)
		}
		if ttl, err := java.writeLock(ctx, 30*time.Second); err != nil || ttl <= 0 {
			t.Fatalf("java writeLock over relock's writer: %v %v", ttl, err)
		}
		ps := java.subscribe(ctx)
		defer ps.Close()
		if _, err := ps.Receive(ctx); err != nil { // the subscription confirmation
			t.Fatal(err)
		}
		testkit.RWUnlockAll(t, ctx, wl)
		rwHear(t, ctx, ps, java.channel, "1")

		// A Java writer excludes relock's readers; its release ("1") wakes
		// the waiting reader.
		if ttl, err := java.writeLock(ctx, 30*time.Second); err != nil || ttl != 0 {
			t.Fatalf("java writeLock: %v %v", ttl, err)
		}
		if _, err := rw.TryRLock(ctx); !errors.Is(err, relock.ErrNotAcquired) {
			t.Fatalf("relock TryRLock over a Java writer: %v", err)
		}
		gotR := make(chan *relock.Lease, 1)
		go func() {
			l, err := rw.RLock(ctx)
			if err != nil {
				t.Error(err)
			}
			gotR <- l
		}()
		testkit.Eventually(t, 5*time.Second, "relock's reader to wait", func() bool { return c.Stats().Asleep == 1 })
		if err := java.writeUnlock(ctx); err != nil {
			t.Fatal(err)
		}
		rwHear(t, ctx, ps, java.channel, "1")
		rl = <-gotR
		if rl == nil {
			t.FailNow()
		}

		// relock's last reader frees the lock with "0", as Redisson's does.
		testkit.RWUnlockAll(t, ctx, rl)
		rwHear(t, ctx, ps, java.channel, "0")

		// A relock writer downgrading to read lets the Java reader in, and
		// says so with "1" (Redisson itself publishes nothing there).
		owner := relock.WithOwner(ctx)
		wl, rl = must(rw.Lock(owner)), must(rw.RLock(owner))
		if ttl, err := java.readLock(ctx, 30*time.Second); err != nil || ttl <= 0 {
			t.Fatalf("java readLock under relock's writer: %v %v", ttl, err)
		}
		testkit.RWUnlockAll(t, ctx, wl)
		rwHear(t, ctx, ps, java.channel, "1")
		if ttl, err := java.readLock(ctx, 30*time.Second); err != nil || ttl != 0 {
			t.Fatalf("java readLock beside relock's downgraded reader: %v %v", ttl, err)
		}
		testkit.RWUnlockAll(t, ctx, rl)
		if err := java.readUnlock(ctx); err != nil {
			t.Fatal(err)
		}
		if locked, _ := rw.IsLocked(ctx); locked {
			t.Fatalf("still locked: %v", rdb.HGetAll(ctx, name).Val())
		}
	})
}
