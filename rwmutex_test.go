package relock_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/conformance"
	"github.com/relock-go/relock/internal/layout"
	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/internal/testkit"
)

func TestRWMutexReadersShare(t *testing.T) { conformance.RWMutexReadersShare(t) }

func TestRWMutexWriterExcludes(t *testing.T) { conformance.RWMutexWriterExcludes(t) }

// TestRWMutexDowngrade: a writer takes the read lock too, and keeps it
// after unlocking the write lock; other readers may then join.
func TestRWMutexDowngrade(t *testing.T) {
	testkit.ForEach(t, func(t *testing.T, top testkit.Topology) {
		c, other := top.NewClient(t), top.NewClient(t)
		rdb := top.RDB(t)
		name := testkit.LockName(t)
		ctx := testkit.CtxTimeout(t, 10*time.Second)
		owner := relock.WithOwner(ctx)
		must := testkit.RWMust(t)
		rw := c.RWMutex(name)
		wl := must(rw.Lock(owner))
		rl := must(rw.RLock(owner))
		if rl.Token() != wl.Token() {
			t.Fatalf("downgrade read token %d, writer's %d", rl.Token(), wl.Token())
		}
		if _, err := other.RWMutex(name).TryRLock(ctx); !errors.Is(err, relock.ErrNotAcquired) {
			t.Fatalf("another reader under the writer: %v", err)
		}
		testkit.RWUnlockAll(t, ctx, wl)
		if mode := rdb.HGet(ctx, name, "mode").Val(); mode != "read" {
			t.Fatalf("mode %q after the write unlock, want read", mode)
		}
		if err := rl.Err(); err != nil {
			t.Fatalf("read lease after the write unlock: %v", err)
		}
		if _, err := other.RWMutex(name).TryLock(ctx); !errors.Is(err, relock.ErrNotAcquired) {
			t.Fatalf("a writer over the downgraded reader: %v", err)
		}
		joined := must(other.RWMutex(name).TryRLock(ctx))
		testkit.RWUnlockAll(t, ctx, rl, joined)
		if locked, _ := rw.IsLocked(ctx); locked {
			t.Fatal("locked after every hold was unlocked")
		}
	})
}

// TestRWMutexUpgrade: a reader asking for the write lock gets ErrUpgrade
// at once, from Lock as from TryLock, and its read hold is intact.
func TestRWMutexUpgrade(t *testing.T) {
	testkit.ForEach(t, func(t *testing.T, top testkit.Topology) {
		c := top.NewClient(t)
		rdb := top.RDB(t)
		name := testkit.LockName(t)
		ctx := testkit.CtxTimeout(t, 10*time.Second)
		owner := relock.WithOwner(ctx)
		rw := c.RWMutex(name)
		rl := testkit.RWMust(t)(rw.RLock(owner))
		before := rdb.HGetAll(ctx, name).Val()
		if _, err := rw.TryLock(owner); !errors.Is(err, relock.ErrUpgrade) {
			t.Fatalf("TryLock by a reader: %v, want ErrUpgrade", err)
		}
		if _, err := rw.WLocker().Lock(owner); !errors.Is(err, relock.ErrUpgrade) {
			t.Fatalf("Lock by a reader: %v, want ErrUpgrade", err)
		}
		if after := rdb.HGetAll(ctx, name).Val(); fmt.Sprint(after) != fmt.Sprint(before) {
			t.Fatalf("upgrade attempts changed the lock from %v to %v", before, after)
		}
		if s := c.Stats(); s.Held != 1 || s.Channels != 0 || s.Waits != 0 {
			t.Fatalf("upgrade attempts left state: %+v", s)
		}
		if err := rl.Err(); err != nil {
			t.Fatal(err)
		}
		testkit.RWUnlockAll(t, ctx, rl)
		wl := testkit.RWMust(t)(rw.Lock(owner))
		testkit.RWUnlockAll(t, ctx, wl)
	})
}

// TestRWMutexReentrancy: an owner re-enters each side; every lease is
// unlocked on its own, and a second Unlock of one lease is ErrNotHeld.
func TestRWMutexReentrancy(t *testing.T) {
	testkit.ForEach(t, func(t *testing.T, top testkit.Topology) {
		c := top.NewClient(t)
		rdb := top.RDB(t)
		name := testkit.LockName(t)
		ctx := testkit.CtxTimeout(t, 10*time.Second)
		owner := relock.WithOwner(ctx)
		rw := c.RWMutex(name)
		must := testkit.RWMust(t)
		w1, w2 := must(rw.Lock(owner)), must(rw.Lock(owner))
		if w1.Token() != w2.Token() {
			t.Fatalf("write re-entry token %d, holder's %d", w2.Token(), w1.Token())
		}
		r1, r2 := must(rw.RLock(owner)), must(rw.TryRLock(owner))
		if n := testkit.HoldCount(t, rdb, name); n != 4 {
			t.Fatalf("hold count %d, want 4", n)
		}
		if s := c.Stats(); s.Held != 2 {
			t.Fatalf("%d watchdog entries, want one per owner and side", s.Held)
		}
		testkit.RWUnlockAll(t, ctx, w2)
		if err := w2.Unlock(ctx); !errors.Is(err, relock.ErrNotHeld) {
			t.Fatalf("second Unlock: %v", err)
		}
		testkit.RWUnlockAll(t, ctx, r1, w1)
		if err := r2.Err(); err != nil {
			t.Fatalf("remaining read lease: %v", err)
		}
		testkit.RWUnlockAll(t, ctx, r2)
		if locked, _ := rw.IsLocked(ctx); locked {
			t.Fatal("still locked")
		}
	})
}

// TestRWMutexWatchdog: reader and writer holds outlive several watchdog
// timeouts, and a ForceUnlock is reported to all of them as a loss.
func TestRWMutexWatchdog(t *testing.T) {
	testkit.ForEach(t, func(t *testing.T, top testkit.Topology) {
		const timeout = 500 * time.Millisecond
		c := top.NewClient(t, relock.WithWatchdogTimeout(timeout))
		other := top.NewClient(t)
		name := testkit.LockName(t)
		ctx := testkit.CtxTimeout(t, 10*time.Second)
		owner := relock.WithOwner(ctx)
		rw := c.RWMutex(name)
		must := testkit.RWMust(t)
		held := func(leases []*relock.Lease, d time.Duration) {
			t.Helper()
			start := time.Now()
			for time.Since(start) < d {
				time.Sleep(timeout / 4) // the passing of time is what is tested
				for _, l := range leases {
					if err := l.Err(); err != nil {
						t.Fatalf("lost after %v: %v", time.Since(start), err)
					}
				}
			}
		}
		wl := must(rw.Lock(owner))
		leases := []*relock.Lease{must(rw.RLock(owner)), must(rw.RLock(owner))}
		held(append(leases, wl), 3*timeout)
		testkit.RWUnlockAll(t, ctx, wl) // downgrade: one-shot readers may join
		second := top.NewClient(t, relock.WithWatchdogTimeout(timeout))
		leases = append(leases, must(rw.RLock(ctx)), must(second.RWMutex(name).RLock(ctx)))
		held(leases, 2*timeout)
		if ok, err := other.RWMutex(name).ForceUnlock(ctx); err != nil || !ok {
			t.Fatalf("ForceUnlock = %v, %v", ok, err)
		}
		for _, l := range leases {
			testkit.WaitDone(t, l, 5*time.Second)
			if !errors.Is(l.Err(), relock.ErrLockLost) {
				t.Fatalf("Err = %v after ForceUnlock", l.Err())
			}
		}
		for _, k := range testkit.KeysOf(t, top.RDB(t), name) {
			if !rwIsMarker(k) {
				t.Fatalf("ForceUnlock left %q", k)
			}
		}
		if ok, _ := other.RWMutex(name).ForceUnlock(ctx); ok {
			t.Fatal("ForceUnlock of a free lock reported true")
		}
	})
}

// isMarker reports whether key is a request or release marker, which
// outlives the holds of reentrant owners on purpose.
func rwIsMarker(key string) bool {
	_, request := layout.NameOf(layout.LockRequest, key)
	_, release := layout.NameOf(layout.UnlockLatch, key)
	return request || release
}

// TestRWMutexViews: the read and write views are Lockers that lock the
// sides of the RWMutex.
func TestRWMutexViews(t *testing.T) {
	testkit.ForEach(t, func(t *testing.T, top testkit.Topology) {
		c := top.NewClient(t)
		name := testkit.LockName(t)
		ctx := testkit.CtxTimeout(t, 10*time.Second)
		rw := c.RWMutex(name)
		lockers := []relock.Locker{rw.RLocker(), rw.RLocker(), rw.WLocker()}
		for _, l := range lockers {
			if l.Name() != name {
				t.Fatalf("Name = %q", l.Name())
			}
		}
		r1 := testkit.RWMust(t)(lockers[0].Lock(ctx))
		r2 := testkit.RWMust(t)(lockers[1].TryLock(ctx))
		if _, err := lockers[2].TryLock(ctx); !errors.Is(err, relock.ErrNotAcquired) {
			t.Fatalf("write view over two readers: %v", err)
		}
		testkit.RWUnlockAll(t, ctx, r1, r2)
		w := testkit.RWMust(t)(lockers[2].Lock(ctx))
		if _, err := lockers[0].TryLock(ctx); !errors.Is(err, relock.ErrNotAcquired) {
			t.Fatalf("read view over a writer: %v", err)
		}
		testkit.RWUnlockAll(t, ctx, w)
	})
}

// TestRWMutexSpin: WithSpin waits by backoff on either side, subscribing
// to nothing.
func TestRWMutexSpin(t *testing.T) {
	testkit.ForEach(t, func(t *testing.T, top testkit.Topology) {
		c, other := top.NewClient(t), top.NewClient(t)
		name := testkit.LockName(t)
		ctx := testkit.CtxTimeout(t, 10*time.Second)
		wl := testkit.RWMust(t)(other.RWMutex(name).Lock(ctx, relock.WithLease(100*time.Millisecond)))
		rl := testkit.RWMust(t)(c.RWMutex(name).RLock(ctx, relock.WithSpin(time.Millisecond, 10*time.Millisecond)))
		if s := c.Stats(); s.Waits != 1 || s.Channels != 0 {
			t.Fatalf("stats %+v: want one wait and no channel", s)
		}
		if !errors.Is(wl.Err(), relock.ErrLockLost) {
			t.Fatalf("writer's expired lease: %v", wl.Err())
		}
		testkit.RWUnlockAll(t, ctx, rl)
	})
}

// TestRWMutexTTL: TTL is the lock's time left in either mode, like the
// Mutex's: -2ns when free, at most the longest hold's lease while held.
func TestRWMutexTTL(t *testing.T) {
	testkit.ForEach(t, func(t *testing.T, top testkit.Topology) {
		c := top.NewClient(t)
		ctx := testkit.CtxTimeout(t, time.Minute)
		rw := c.RWMutex(testkit.LockName(t))
		if d, err := rw.TTL(ctx); d != -2*time.Nanosecond || err != nil {
			t.Fatalf("TTL of a free lock = %v, %v, want -2ns", d, err)
		}
		r, err := rw.RLock(ctx, relock.WithLease(time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		if d, err := rw.TTL(ctx); d <= 0 || d > time.Minute || err != nil {
			t.Fatalf("TTL while read-locked for 1m = %v, %v", d, err)
		}
		if err := r.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		w, err := rw.Lock(ctx, relock.WithLease(30*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		if d, err := rw.TTL(ctx); d <= 0 || d > 30*time.Second || err != nil {
			t.Fatalf("TTL while write-locked for 30s = %v, %v", d, err)
		}
		if err := w.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	})
}

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

func TestRWMutexBadInput(t *testing.T) {
	testkit.ForEach(t, func(t *testing.T, top testkit.Topology) {
		c := top.NewClient(t)
		ctx := testkit.CtxTimeout(t, 10*time.Second)
		long := strings.Repeat("x", relock.MaxNameLen+1)
		for _, tc := range []struct {
			name string
			lock string
			opts []relock.LockOption
			want error
		}{
			{"empty name", "", nil, relock.ErrInvalidName},
			{"long name", long, nil, relock.ErrInvalidName},
			{"open brace only", "bad{name", nil, relock.ErrInvalidName},
			{"close brace only", "bad}name", nil, relock.ErrInvalidName},
			{"empty hash tag", "{}bad", nil, relock.ErrInvalidName},
			{"zero lease", "test:rwbad:zero", []relock.LockOption{relock.WithLease(0)}, relock.ErrInvalidOption},
			{"negative lease", "test:rwbad:neg", []relock.LockOption{relock.WithLease(-time.Second)}, relock.ErrInvalidOption},
			{"sub-millisecond lease", "test:rwbad:tiny", []relock.LockOption{relock.WithLease(time.Microsecond)}, relock.ErrInvalidOption},
			{"bad spin", "test:rwbad:spin", []relock.LockOption{relock.WithSpin(0, time.Second)}, relock.ErrInvalidOption},
		} {
			t.Run(tc.name, func(t *testing.T) {
				rw := c.RWMutex(tc.lock)
				for op, f := range map[string]func(context.Context, ...relock.LockOption) (*relock.Lease, error){
					"RLock": rw.RLock, "TryRLock": rw.TryRLock, "Lock": rw.Lock, "TryLock": rw.TryLock,
					"RLocker().Lock": rw.RLocker().Lock, "WLocker().TryLock": rw.WLocker().TryLock,
				} {
					if _, err := f(ctx, tc.opts...); !errors.Is(err, tc.want) {
						t.Errorf("%s: %v, want %v", op, err, tc.want)
					}
				}
				if tc.want == relock.ErrInvalidName {
					if _, err := rw.IsLocked(ctx); !errors.Is(err, tc.want) {
						t.Errorf("IsLocked: %v", err)
					}
					if _, err := rw.ForceUnlock(ctx); !errors.Is(err, tc.want) {
						t.Errorf("ForceUnlock: %v", err)
					}
				}
			})
		}
		if s := c.Stats(); s.Held != 0 || s.Channels != 0 || s.Acquired != 0 {
			t.Fatalf("bad input left state behind: %+v", s)
		}
	})
}

// TestRWMutexWrongTypeAndClosed: a name holding another kind of value is
// refused with ErrWrongType and left alone; a closed Client refuses every
// call, and a waiter blocked when it closes returns ErrClosed.
func TestRWMutexWrongTypeAndClosed(t *testing.T) {
	testkit.ForEach(t, func(t *testing.T, top testkit.Topology) {
		c := top.NewClient(t)
		rdb := top.RDB(t)
		name := testkit.LockName(t)
		ctx := testkit.CtxTimeout(t, 10*time.Second)
		if err := rdb.Set(ctx, name, "not a lock", 0).Err(); err != nil {
			t.Fatal(err)
		}
		rw := c.RWMutex(name)
		if _, err := rw.RLock(ctx); !errors.Is(err, relock.ErrWrongType) {
			t.Fatalf("RLock: %v, want ErrWrongType", err)
		}
		if _, err := rw.TryLock(ctx); !errors.Is(err, relock.ErrWrongType) {
			t.Fatalf("TryLock: %v, want ErrWrongType", err)
		}
		if _, err := rw.ForceUnlock(ctx); !errors.Is(err, relock.ErrWrongType) {
			t.Fatalf("ForceUnlock: %v, want ErrWrongType", err)
		}
		if v, _ := rdb.Get(ctx, name).Result(); v != "not a lock" {
			t.Fatalf("value changed to %q", v)
		}
		rdb.Del(ctx, name)

		w := top.NewClient(t)
		held := testkit.RWMust(t)(c.RWMutex(name).Lock(ctx))
		blocked := make(chan error, 1)
		go func() {
			_, err := w.RWMutex(name).RLock(ctx)
			blocked <- err
		}()
		testkit.Eventually(t, 5*time.Second, "the waiter to wait", func() bool { return w.Stats().Channels >= 1 })
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		if err := <-blocked; !errors.Is(err, relock.ErrClosed) {
			t.Fatalf("blocked RLock after Close: %v, want ErrClosed", err)
		}
		for op, f := range map[string]func(context.Context, ...relock.LockOption) (*relock.Lease, error){
			"RLock": w.RWMutex(name).RLock, "TryRLock": w.RWMutex(name).TryRLock, "Lock": w.RWMutex(name).Lock,
		} {
			if _, err := f(ctx); !errors.Is(err, relock.ErrClosed) {
				t.Fatalf("%s on a closed client: %v", op, err)
			}
		}
		if _, err := w.RWMutex(name).IsLocked(ctx); !errors.Is(err, relock.ErrClosed) {
			t.Fatalf("IsLocked on a closed client: %v", err)
		}
		testkit.RWUnlockAll(t, ctx, held)
	})
}

// TestRWMutexCorruptFencingCounter: with the fencing counter holding no
// number, or a hash, RLock fails with ErrWrongType before it writes
// anything: no read hold and no hold key stays behind, neither on a free
// name nor beside another reader, and once the counter is repaired the
// name is free for a writer at once. The locks that draw a token fail
// with ErrWrongType too, and write nothing. The counter is shared by every lock
// of a server, so the test runs on a server of its own.
func TestRWMutexCorruptFencingCounter(t *testing.T) {
	srv, err := redistest.Start(redistest.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	rdb := testkit.CloseLater(t, srv.Client())
	c := testkit.NewClient(t, rdb)
	ctx := testkit.CtxTimeout(t, 20*time.Second)
	const counter = layout.FencingCounter
	for _, tc := range []struct {
		what    string
		corrupt func() error
	}{
		{"not a number", func() error { return rdb.Set(ctx, counter, "not a number", 0).Err() }},
		{"hash", func() error { return rdb.HSet(ctx, counter, "a", "1").Err() }},
	} {
		for _, owned := range []bool{false, true} {
			name := testkit.LockName(t)
			rctx := ctx
			if owned {
				rctx = relock.WithOwner(ctx)
			}
			// A reader that holds already: a second reader must leave it as
			// it is.
			first := testkit.RWMust(t)(c.RWMutex(name + ":shared").RLock(ctx))
			before := testkit.KeysOf(t, rdb, name)
			slices.Sort(before)
			// The writers' TryLocks of the round before made the counter anew.
			if err := rdb.Del(ctx, counter).Err(); err != nil {
				t.Fatal(err)
			}
			if err := tc.corrupt(); err != nil {
				t.Fatal(err)
			}
			for _, n := range []string{name, name + ":shared"} {
				if l, err := c.RWMutex(n).RLock(rctx); !errors.Is(err, relock.ErrWrongType) {
					t.Fatalf("%s, owner %v: RLock(%s) = %v, %v; want ErrWrongType", tc.what, owned, n, l, err)
				}
			}
			// The acquisitions that draw a token fail alike.
			for what, lock := range map[string]func(context.Context, ...relock.LockOption) (*relock.Lease, error){
				"Mutex": c.Mutex(name + ":m").TryLock, "RWMutex": c.RWMutex(name + ":w").TryLock, "FairMutex": c.FairMutex(name + ":f").TryLock,
			} {
				if l, err := lock(rctx); !errors.Is(err, relock.ErrWrongType) {
					t.Fatalf("%s, owner %v: %s.TryLock = %v, %v; want ErrWrongType", tc.what, owned, what, l, err)
				}
			}
			after := testkit.KeysOf(t, rdb, name)
			if slices.Sort(after); !slices.Equal(after, before) {
				t.Fatalf("%s, owner %v: keys %v after the failed RLocks, %v before", tc.what, owned, after, before)
			}
			if n, err := rdb.HLen(ctx, name+":shared").Result(); err != nil || n != 2 {
				t.Fatalf("%s, owner %v: the shared lock has %d fields (%v), want mode and its first reader", tc.what, owned, n, err)
			}
			if err := rdb.Del(ctx, counter).Err(); err != nil {
				t.Fatal(err)
			}
			testkit.RWUnlockAll(t, ctx, first)
			for _, n := range []string{name, name + ":shared"} {
				l, err := c.RWMutex(n).TryLock(ctx)
				if err != nil {
					t.Fatalf("%s, owner %v: TryLock(%s) after the repair: %v", tc.what, owned, n, err)
				}
				testkit.RWUnlockAll(t, ctx, l)
			}
		}
	}
}

// TestRWGrants: a release that frees a read-write lock grants it to the
// first of its queue when that is a writer: across Clients, in the order
// they queued, pushed so that the writer's Lock returns on it and confirms
// it to its full lease. A reader first in the queue is woken instead, with
// every other reader; a listener on the release channel that does not
// queue (a Redisson waiter) turns grants off; a writer granted the lock
// that has died costs the next one the short grant, of which it is told;
// a writer that gives up leaves the queue; and nothing is left in Redis.
func TestRWGrants(t *testing.T) {
	testkit.ForEach(t, func(t *testing.T, top testkit.Topology) {
		ctx := testkit.CtxTimeout(t, 30*time.Second)
		rdb := top.RDB(t)
		must := testkit.RWMust(t)
		newClient := func(t *testing.T) *relock.Client { return top.NewClient(t, relock.WithoutReplicaSync()) }
		// lockFor starts a Lock call of c and waits until it sleeps, its
		// subscriptions confirmed (a writer joins the queue before).
		lockFor := func(c *relock.Client, name string, write bool) <-chan *relock.Lease {
			t.Helper()
			lock, asleep := c.RWMutex(name).RLock, c.Stats().Asleep
			if write {
				lock = c.RWMutex(name).Lock
			}
			got := testkit.LockAsync(t, ctx, lock)
			testkit.Eventually(t, 5*time.Second, "the call to sleep", func() bool { return c.Stats().Asleep == asleep+1 })
			return got
		}
		queued := func(name string, n int64) {
			t.Helper()
			testkit.Eventually(t, 5*time.Second, "the waiters to queue", func() bool {
				return rdb.ZCard(ctx, rwQueueKey(name)).Val() == n
			})
		}
		received := func(got <-chan *relock.Lease) *relock.Lease {
			t.Helper()
			l := <-got
			if l == nil {
				t.FailNow()
			}
			return l
		}
		nothingLeft := func(name string) {
			t.Helper()
			testkit.Gone(t, rdb, name, rwQueueKey(name))
		}
		// queueWriters starts a write Lock call of each Client in turn,
		// each queued before the next starts.
		queueWriters := func(name string, cs ...*relock.Client) []<-chan *relock.Lease {
			t.Helper()
			got := make([]<-chan *relock.Lease, len(cs))
			for i, c := range cs {
				got[i] = lockFor(c, name, true)
				queued(name, int64(i+1))
			}
			return got
		}

		t.Run("writers-in-order", func(t *testing.T) {
			r, a, b := newClient(t), newClient(t), newClient(t)
			name := testkit.LockName(t)
			reader := must(r.RWMutex(name).RLock(ctx))
			got := queueWriters(name, a, b)
			testkit.RWUnlockAll(t, ctx, reader)
			la := received(got[0])
			if s := a.Stats(); s.Handoffs != 1 || s.Wakeups != 0 {
				t.Errorf("first writer: %d grants, %d wake-ups; want the grant pushed, no wake-up", s.Handoffs, s.Wakeups)
			}
			// The grant is confirmed to the writer's full lease.
			testkit.Eventually(t, 5*time.Second, "the grant to be confirmed", func() bool {
				return rdb.PTTL(ctx, name).Val() > 3*time.Second
			})
			if _, err := r.RWMutex(name).TryRLock(ctx); !errors.Is(err, relock.ErrNotAcquired) {
				t.Errorf("TryRLock over a granted writer: %v", err)
			}
			testkit.RWUnlockAll(t, ctx, la)
			lb := received(got[1])
			if s := b.Stats(); s.Handoffs != 1 {
				t.Errorf("second writer: %d grants, want 1", s.Handoffs)
			}
			if lb.Token() != la.Token()+1 {
				t.Errorf("granted token %d after %d", lb.Token(), la.Token())
			}
			testkit.RWUnlockAll(t, ctx, lb)
			nothingLeft(name)
		})

		t.Run("own-writer-handed", func(t *testing.T) {
			c, other := newClient(t), newClient(t)
			name := testkit.LockName(t)
			holder := must(c.RWMutex(name).Lock(ctx))
			got := queueWriters(name, c, other)
			// The writer's release hands the lock to its Client's writer,
			// first in the queue, on its reply: the hold has the writer's
			// full lease at once (a grant by message holds 2s until the
			// writer confirms it).
			testkit.RWUnlockAll(t, ctx, holder)
			lw := received(got[0])
			if ttl := rdb.PTTL(ctx, name).Val(); ttl < 3*time.Second {
				t.Errorf("TTL %v of a lock handed to the Client's own writer, want its lease", ttl)
			}
			if s := c.Stats(); s.Handoffs != 1 || lw.Token() != holder.Token()+1 {
				t.Errorf("%d handoffs, token %d after %d; want 1, the next token", s.Handoffs, lw.Token(), holder.Token())
			}
			// Then the other Client's writer, next in the queue, is granted
			// it by message.
			testkit.RWUnlockAll(t, ctx, lw)
			lo := received(got[1])
			if s := other.Stats(); s.Handoffs != 1 || lo.Token() != lw.Token()+1 {
				t.Errorf("other writer: %d grants, token %d after %d", s.Handoffs, lo.Token(), lw.Token())
			}
			testkit.RWUnlockAll(t, ctx, lo)
			// The last reader's release hands it to its Client's writer too.
			reader := must(c.RWMutex(name).RLock(ctx))
			gotW2 := lockFor(c, name, true)
			queued(name, 1)
			testkit.RWUnlockAll(t, ctx, reader)
			lw2 := received(gotW2)
			if ttl := rdb.PTTL(ctx, name).Val(); ttl < 3*time.Second {
				t.Errorf("TTL %v of a lock handed by a reader's release, want the writer's lease", ttl)
			}
			if s := c.Stats(); s.Handoffs != 2 {
				t.Errorf("%d handoffs in the reader's Client, want 2", s.Handoffs)
			}
			testkit.RWUnlockAll(t, ctx, lw2)
			nothingLeft(name)
			testkit.Idle(t, c, other)
		})

		t.Run("turn-writer-handed", func(t *testing.T) {
			c := newClient(t)
			name := testkit.LockName(t)
			holder := must(c.RWMutex(name).Lock(ctx))
			// A reentrant writer has the Client's turn and is in the queue
			// ("r", never handed the lock); a one-shot writer that comes
			// then waits for the turn, out of the queue.
			owner := relock.WithOwner(ctx)
			gotR := testkit.LockAsync(t, ctx, func(_ context.Context, opts ...relock.LockOption) (*relock.Lease, error) {
				return c.RWMutex(name).Lock(owner, opts...)
			})
			testkit.Eventually(t, 5*time.Second, "the reentrant writer to sleep", func() bool { return c.Stats().Asleep == 1 })
			queued(name, 1)
			gotO := lockFor(c, name, true)
			// The holder's release hands the lock to the one-shot writer on
			// its reply, ahead of the Client's own first in the queue.
			testkit.RWUnlockAll(t, ctx, holder)
			var lo *relock.Lease
			select {
			case lo = <-gotO:
			case <-gotR:
				t.Fatal("the reentrant writer took the lock; want it handed to the writer waiting for its turn")
			}
			if lo == nil {
				t.FailNow()
			}
			if ttl := rdb.PTTL(ctx, name).Val(); ttl < 3*time.Second {
				t.Errorf("TTL %v of a lock handed to the writer waiting for its turn, want its lease", ttl)
			}
			if s := c.Stats(); s.Handoffs != 1 || lo.Token() != holder.Token()+1 {
				t.Errorf("%d handoffs, token %d after %d; want 1, the next token", s.Handoffs, lo.Token(), holder.Token())
			}
			if q := rdb.ZRange(ctx, rwQueueKey(name), 0, -1).Val(); len(q) != 1 || !strings.Contains(q[0], "|r|") {
				t.Errorf("queue %v, want the reentrant writer in its place", q)
			}
			testkit.RWUnlockAll(t, ctx, lo)
			lr := received(gotR)
			if lr.Token() != lo.Token()+1 {
				t.Errorf("token %d after %d", lr.Token(), lo.Token())
			}
			testkit.RWUnlockAll(t, ctx, lr)
			nothingLeft(name)
			testkit.Idle(t, c)
		})

		t.Run("unheard-writers", func(t *testing.T) {
			h, a, b := newClient(t), newClient(t), newClient(t)
			name := testkit.LockName(t)
			// Behind a relock writer, writers of other Clients queue
			// without listening on the release channel, and are granted
			// the lock in turn.
			holder := must(h.RWMutex(name).Lock(ctx))
			got := queueWriters(name, a, b)
			if n := testkit.RWSubscribers(t, top, name); n != 0 {
				t.Errorf("%d subscribers of the release channel behind a relock writer, want 0", n)
			}
			testkit.RWUnlockAll(t, ctx, holder)
			la := received(got[0])
			testkit.RWUnlockAll(t, ctx, la)
			lb := received(got[1])
			for i, c := range []*relock.Client{a, b} {
				if s := c.Stats(); s.Handoffs != 1 || s.Wakeups != 0 {
					t.Errorf("writer %d: %d grants, %d wake-ups; want the grant pushed", i, s.Handoffs, s.Wakeups)
				}
			}
			testkit.RWUnlockAll(t, ctx, lb)
			// A downgrade tells a writer that does not listen; it listens
			// from then on, takes a member that says so, and the last
			// reader's release grants it the lock.
			owner := relock.WithOwner(ctx)
			wl := must(h.RWMutex(name).Lock(owner))
			gotB := lockFor(b, name, true)
			queued(name, 1)
			rl := must(h.RWMutex(name).RLock(owner))
			testkit.RWUnlockAll(t, ctx, wl) // downgrade: b's writer is told
			testkit.Eventually(t, 5*time.Second, "the writer to listen as \"O\"", func() bool {
				q := rdb.ZRange(ctx, rwQueueKey(name), 0, -1).Val()
				return testkit.RWSubscribers(t, top, name) == 1 && len(q) == 1 && strings.Contains(q[0], "|O|") && b.Stats().Asleep == 1
			})
			testkit.RWUnlockAll(t, ctx, rl)
			lb = received(gotB)
			if s := b.Stats(); s.Handoffs != 2 || s.Wakeups == 0 {
				t.Errorf("writer after the downgrade: %d grants, %d wake-ups in its Client; want woken, then granted", s.Handoffs, s.Wakeups)
			}
			testkit.RWUnlockAll(t, ctx, lb)
			nothingLeft(name)
			testkit.Idle(t, h, a, b)
		})

		t.Run("reader-first", func(t *testing.T) {
			h, r, w := newClient(t), newClient(t), newClient(t)
			name := testkit.LockName(t)
			holder := must(h.RWMutex(name).Lock(ctx))
			gotR1 := lockFor(r, name, false)
			queued(name, 1)
			gotW := lockFor(w, name, true)
			queued(name, 2)
			gotR2 := lockFor(r, name, false)
			queued(name, 3)
			// A reader is first: the lock is freed and announced, and every
			// waiter tries; readers are never granted. The writer may win.
			testkit.RWUnlockAll(t, ctx, holder)
			for range 3 {
				var l *relock.Lease
				select {
				case l = <-gotR1:
				case l = <-gotR2:
				case l = <-gotW:
				}
				if l == nil {
					t.FailNow()
				}
				testkit.RWUnlockAll(t, ctx, l)
			}
			if s := r.Stats(); s.Handoffs != 0 || s.Wakeups == 0 || s.Acquired != 2 {
				t.Errorf("readers: %+v; want both woken, none granted", s)
			}
			nothingLeft(name)
		})

		t.Run("foreign-listener", func(t *testing.T) {
			h, a := newClient(t), newClient(t)
			name := testkit.LockName(t)
			testkit.Listen(t, ctx, rdb, testkit.RWChannel(name))
			holder := must(h.RWMutex(name).Lock(ctx))
			got := lockFor(a, name, true)
			queued(name, 1)
			testkit.RWUnlockAll(t, ctx, holder)
			la := received(got)
			if s := a.Stats(); s.Handoffs != 0 || s.Wakeups == 0 {
				t.Errorf("with a listener that does not queue: %d grants, %d wake-ups; want the lock freed and announced", s.Handoffs, s.Wakeups)
			}
			testkit.RWUnlockAll(t, ctx, la)
			nothingLeft(name)
		})

		t.Run("dead-grantee", func(t *testing.T) {
			h, a := newClient(t), newClient(t)
			name := testkit.LockName(t)
			holder := must(h.RWMutex(name).Lock(ctx))
			// A writer of a Client that has died is first in the queue.
			if err := rdb.ZAdd(ctx, rwQueueKey(name), redis.Z{Score: 1, Member: "30000|o|0dead:1"}).Err(); err != nil {
				t.Fatal(err)
			}
			got := lockFor(a, name, true)
			queued(name, 2)
			testkit.RWUnlockAll(t, ctx, holder)
			// The holder's TTL was the 30s watchdog lease: the writer gets
			// the lock within the test's bound only if it is told to check
			// again when the dead writer's grant runs out.
			la := received(got)
			if la.Token() != holder.Token()+2 {
				t.Errorf("token %d after %d: want the dead writer's grant between", la.Token(), holder.Token())
			}
			testkit.RWUnlockAll(t, ctx, la)
			nothingLeft(name)
		})

		t.Run("gives-up", func(t *testing.T) {
			h, a, b := newClient(t), newClient(t), newClient(t)
			name := testkit.LockName(t)
			holder := must(h.RWMutex(name).Lock(ctx))
			actx, cancel := context.WithCancel(ctx)
			gave := make(chan error, 1)
			go func() {
				_, err := a.RWMutex(name).Lock(actx)
				gave <- err
			}()
			queued(name, 1)
			testkit.Eventually(t, 5*time.Second, "the call to sleep", func() bool { return a.Stats().Asleep == 1 })
			gotB := lockFor(b, name, true)
			queued(name, 2)
			cancel()
			if err := <-gave; !errors.Is(err, context.Canceled) {
				t.Fatalf("cancelled Lock: %v", err)
			}
			queued(name, 1)
			testkit.RWUnlockAll(t, ctx, holder)
			lb := received(gotB)
			if s := b.Stats(); s.Handoffs != 1 {
				t.Errorf("writer behind one that gave up: %d grants, want 1", s.Handoffs)
			}
			testkit.RWUnlockAll(t, ctx, lb)
			nothingLeft(name)
		})
	})
}

func rwQueueKey(name string) string { return layout.Companion(layout.RWQueue, name) }

// TestRWWriterWaitsTurnWithoutAttempt: a one-shot writer that comes while
// another writer of its Client has the turn sleeps for its turn without an
// attempt, and then takes the lock in turn.
func TestRWWriterWaitsTurnWithoutAttempt(t *testing.T) {
	if n := secondCallAttempts(t, testkit.Topologies()[0], true); n != 0 {
		t.Fatalf("a writer that came while another of its Client had the turn made %d attempts, want 0", n)
	}
}

// TestRWReaderJoinsAtFirstAttempt: a reader that comes while its Client
// listens on the lock's channels already joins the queue with its first
// attempt, and sleeps after it; the write lock's end lets both readers in.
func TestRWReaderJoinsAtFirstAttempt(t *testing.T) {
	testkit.ForEach(t, func(t *testing.T, top testkit.Topology) {
		if n := secondCallAttempts(t, top, false); n != 1 {
			t.Fatalf("a reader that came while its Client listened made %d attempts before it slept, want 1", n)
		}
	})
}

// secondCallAttempts starts two waiting calls of one Client, writers or
// readers, behind another Client's write lock, the second once the first
// is queued and asleep, and returns how many attempts the second made
// before it slept (a writer waiting for its turn stays out of the queue, a
// reader joins it). Then the write lock ends and both take the lock in
// turn, leaving nothing behind.
func secondCallAttempts(t *testing.T, top testkit.Topology, write bool) int64 {
	t.Helper()
	script, lock := "rw_read_lock.lua", (*relock.RWMutex).RLock
	if write {
		script, lock = "rw_write_lock.lua", (*relock.RWMutex).Lock
	}
	c, attempts := top.CountingClient(t, script, relock.WithoutReplicaSync())
	h, rdb := top.NewClient(t, relock.WithoutReplicaSync()), top.RDB(t)
	name := testkit.LockName(t)
	ctx := testkit.CtxTimeout(t, 20*time.Second)
	holder := testkit.RWMust(t)(h.RWMutex(name).Lock(ctx))
	call := func(ctx context.Context, opts ...relock.LockOption) (*relock.Lease, error) {
		return lock(c.RWMutex(name), ctx, opts...)
	}
	asleep := func(calls, queued int64) func() bool {
		return func() bool { return rdb.ZCard(ctx, rwQueueKey(name)).Val() == queued && c.Stats().Asleep == calls }
	}
	got1 := testkit.LockAsync(t, ctx, call)
	testkit.Eventually(t, 5*time.Second, "the first call to queue and sleep", asleep(1, 1))
	before := attempts.N.Load()
	got2 := testkit.LockAsync(t, ctx, call)
	queued := int64(2)
	if write {
		queued = 1 // the second writer waits for its turn out of the queue
	}
	testkit.Eventually(t, 5*time.Second, "the second call to sleep", asleep(2, queued))
	n := attempts.N.Load() - before
	testkit.RWUnlockAll(t, ctx, holder)
	for _, got := range []<-chan *relock.Lease{got1, got2} {
		l := <-got
		if l == nil {
			t.FailNow()
		}
		testkit.RWUnlockAll(t, ctx, l)
	}
	testkit.Gone(t, rdb, name, rwQueueKey(name))
	testkit.Idle(t, c, h)
	return n
}

// TestRWRedissonWriterNotStarved: relock writers of two Clients contend
// for a read-write lock with grants among them, and a Redisson writer on
// the same name, who does not queue, still takes the write lock again and
// again: while it listens on the release channel, releases free the lock
// and announce it instead of granting it, and the relock writers that do
// not listen are told on their grant channels.
func TestRWRedissonWriterNotStarved(t *testing.T) {
	testkit.ForEach(t, func(t *testing.T, top testkit.Topology) {
		rdb := top.RDB(t)
		name := testkit.LockName(t)
		java := newJavaRW(rdb, name, top.Name == "cluster")
		redissonNotStarved(t, top, java.subscribe,
			func(c *relock.Client) func(context.Context, ...relock.LockOption) (*relock.Lease, error) {
				return c.RWMutex(name).Lock
			},
			func(ctx context.Context) (time.Duration, error) { return java.writeLock(ctx, 5*time.Second) },
			java.writeUnlock)
		testkit.Gone(t, rdb, name, rwQueueKey(name))
	})
}
