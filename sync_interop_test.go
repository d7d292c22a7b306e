package relock_test

import (
	"context"
	"encoding/hex"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/testkit"
)

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

func TestSemaphoreRedissonInterop(t *testing.T) {
	testkit.ForEach(t, func(t *testing.T, top testkit.Topology) {
		rdb := top.RDB(t)
		c := top.NewClient(t)
		name := testkit.LockName(t)
		s := c.Semaphore(name)
		java := newJavaSemaphore(top, rdb, name)
		ctx := testkit.CtxTimeout(t, 10*time.Second)

		// Java sets and takes; relock sees it, waits, and is woken by
		// Java's release.
		if v, err := java.trySetPermits(ctx, 1); v != 1 || err != nil {
			t.Fatal(v, err)
		}
		if ok, err := s.TrySetPermits(ctx, 4); ok || err != nil {
			t.Fatalf("TrySetPermits over Java's: %v %v", ok, err)
		}
		if v, err := java.tryAcquire(ctx, 1); v != 1 || err != nil {
			t.Fatal(v, err)
		}
		got := make(chan error, 1)
		go func() { got <- s.Acquire(ctx, 1) }()
		testkit.Eventually(t, 5*time.Second, "relock to wait", func() bool { return c.Stats().Asleep == 1 })
		if _, err := java.release(ctx, 1); err != nil {
			t.Fatal(err)
		}
		if err := <-got; err != nil {
			t.Fatal(err)
		}
		if c.Stats().Wakeups == 0 {
			t.Fatal("relock was not woken by Java's release message")
		}
		// relock releases: Java hears the new count and can take it.
		ps := subscribe(ctx, t, top, rdb, java.keys[1])
		if err := s.Release(ctx, 1); err != nil {
			t.Fatal(err)
		}
		if msg, err := ps.ReceiveMessage(ctx); err != nil || msg.Payload != "1" {
			t.Fatalf("Java heard %v, %v", msg, err)
		}
		if v, err := java.tryAcquire(ctx, 1); v != 1 || err != nil {
			t.Fatalf("Java tryAcquire after relock's release: %v %v", v, err)
		}
	})
}

// javaPermits acts on a permit semaphore the way Redisson's
// RPermitExpirableSemaphore does, written for this test from its source:
// permit ids are 16 random bytes (32 hex digits in Java's API), stored raw
// in the zset {name}:timeout and scored by an expiry on the client's clock
// (922337203685477 for a permit without a lease). Every acquisition first
// gives expired permits back and publishes the new free count on
// redisson_sc:{name}; it gives the zset the permits key's TTL, if any. A
// release publishes the new free count.
type javaPermits struct {
	rdb     redis.UniversalClient
	keys    []string
	publish string
}

// javaNoLease is Redisson's expiry of a permit without a lease.
const javaNoLease = 922337203685477

// acquire takes one permit with the given lease (negative: none); it
// returns 1 if taken, else 0.
func (j *javaPermits) acquire(ctx context.Context, id []byte, lease time.Duration) (int64, error) {
	expiry := int64(javaNoLease)
	if lease >= 0 {
		expiry = time.Now().Add(lease).UnixMilli()
	}
	v, err := j.rdb.Eval(ctx, `local expired = redis.call('zrangebyscore', KEYS[2], 0, ARGV[3], 'limit', 0, ARGV[1])
if #expired > 0 then
    redis.call('zrem', KEYS[2], unpack(expired))
    local value = redis.call('incrby', KEYS[1], #expired)
    if tonumber(value) > 0 then redis.call(ARGV[5], KEYS[3], value) end
end
local value = redis.call('get', KEYS[1])
if value ~= false and tonumber(value) >= tonumber(ARGV[1]) then
    redis.call('decrby', KEYS[1], ARGV[1])
    for i = 6, #ARGV do redis.call('zadd', KEYS[2], ARGV[2], ARGV[i]) end
    local ttl = redis.call('pttl', KEYS[1])
    if ttl > 0 then redis.call('pexpire', KEYS[2], ttl) end
    return 'OK'
end
local first = redis.call('zrange', KEYS[2], 0, 0, 'withscores')
if first[1] ~= nil and first[2] ~= ARGV[4] then return ':' .. tostring(first[2]) end
return nil`, j.keys, 1, expiry, time.Now().UnixMilli(), javaNoLease, j.publish, id).Result()
	if errors.Is(err, redis.Nil) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	if v == "OK" {
		return 1, nil
	}
	return 0, nil
}

// release gives back the permit of a hex id: 1 if it was held and had not
// expired, else 0.
func (j *javaPermits) release(ctx context.Context, hexID string) (int64, error) {
	id, err := hex.DecodeString(hexID)
	if err != nil {
		return 0, err
	}
	return j.rdb.Eval(ctx, `local expiry = redis.call('zscore', KEYS[2], ARGV[1])
if redis.call('zrem', KEYS[2], ARGV[1]) ~= 1 then return 0 end
local value = redis.call('incrby', KEYS[1], 1)
redis.call(ARGV[3], KEYS[3], value)
if tonumber(expiry) <= tonumber(ARGV[2]) then return 0 end
return 1`, j.keys, id, time.Now().UnixMilli(), j.publish).Int64()
}

func TestPermitSemaphoreRedissonInterop(t *testing.T) {
	testkit.ForEach(t, func(t *testing.T, top testkit.Topology) {
		rdb := top.RDB(t)
		c := top.NewClient(t, relock.WithWatchdogTimeout(300*time.Millisecond))
		ps := testkit.NewPermits(t, c, 1)
		name := ps.Name()
		java := &javaPermits{rdb: rdb, keys: []string{name, "{" + name + "}:timeout", "redisson_sc:{" + name + "}"}, publish: javaPublish(top)}
		ctx := testkit.CtxTimeout(t, 10*time.Second)

		// Java holds a permit: relock waits and is woken by Java's release.
		javaID := []byte("0123456789abcdef")
		if v, err := java.acquire(ctx, javaID, time.Minute); v != 1 || err != nil {
			t.Fatal(v, err)
		}
		if _, err := ps.TryAcquire(ctx); !errors.Is(err, relock.ErrNotAcquired) {
			t.Fatalf("TryAcquire over Java's permit: %v", err)
		}
		got := make(chan *relock.Permit, 1)
		go func() {
			p, err := ps.Acquire(ctx)
			if err != nil {
				t.Error(err)
			}
			got <- p
		}()
		testkit.Eventually(t, 5*time.Second, "relock to wait", func() bool { return c.Stats().Asleep == 1 })
		if v, err := java.release(ctx, hex.EncodeToString(javaID)); v != 1 || err != nil {
			t.Fatal(v, err)
		}
		p := <-got
		if p == nil {
			t.FailNow()
		}
		if c.Stats().Wakeups == 0 {
			t.Fatal("relock was not woken by Java's release message")
		}
		// A Java permit without a lease: relock waits for the release
		// message alone, and is woken by it.
		javaID2 := []byte("fedcba9876543210")
		if err := p.Release(ctx); err != nil {
			t.Fatal(err)
		}
		if v, err := java.acquire(ctx, javaID2, -1); v != 1 || err != nil {
			t.Fatal(v, err)
		}
		go func() {
			p, err := ps.Acquire(ctx)
			if err != nil {
				t.Error(err)
			}
			got <- p
		}()
		testkit.Eventually(t, 5*time.Second, "relock to wait", func() bool { return c.Stats().Asleep == 1 })
		wakes := c.Stats().Wakeups
		if v, err := java.release(ctx, hex.EncodeToString(javaID2)); v != 1 || err != nil {
			t.Fatal(v, err)
		}
		if p = <-got; p == nil {
			t.FailNow()
		}
		if c.Stats().Wakeups == wakes {
			t.Fatal("relock was not woken by Java's release of a permit without a lease")
		}
		// Java releases relock's permit by its id; the Permit learns of it.
		if v, err := java.release(ctx, p.ID()); v != 1 || err != nil {
			t.Fatalf("Java release of relock's permit %s: %v %v", p.ID(), v, err)
		}
		waitPermitDone(t, p, 5*time.Second)
		if !errors.Is(p.Err(), relock.ErrLockLost) {
			t.Fatalf("Err = %v", p.Err())
		}
		// relock releases a Java permit by id, and reclaims an expired one
		// (Java's clock is the test's).
		if v, err := java.acquire(ctx, javaID, time.Minute); v != 1 || err != nil {
			t.Fatal(v, err)
		}
		if err := ps.Release(ctx, hex.EncodeToString(javaID)); err != nil {
			t.Fatal(err)
		}
		if v, err := java.acquire(ctx, javaID, 50*time.Millisecond); v != 1 || err != nil {
			t.Fatal(v, err)
		}
		if p, err := ps.Acquire(ctx); err != nil {
			t.Fatalf("Acquire after Java's permit expired: %v", err)
		} else if err := p.Release(ctx); err != nil {
			t.Fatal(err)
		}
	})
}

// TestLatchRedissonInterop acts as Redisson's RCountDownLatch does: the
// count in a string, deleted at zero, "0" published on
// "redisson_countdownlatch__channel__{" + name + "}" at zero and "1" for a
// new count, also for a name with its own hash tag ("{batch}:done", whose
// channel is "redisson_countdownlatch__channel__{{batch}:done}"). On a
// cluster Redisson cannot use such a name: its script's channel key hashes
// to another slot (CROSSSLOT).
func TestLatchRedissonInterop(t *testing.T) {
	testkit.ForEach(t, func(t *testing.T, top testkit.Topology) {
		base := testkit.LockName(t)
		for _, name := range []string{base, "{" + base + "}:done"} {
			t.Run(strings.ReplaceAll(name, "{", "("), func(t *testing.T) { latchRedissonInterop(t, top, name) })
		}
	})
}

func latchRedissonInterop(t *testing.T, top testkit.Topology, name string) {
	rdb := top.RDB(t)
	c := top.NewClient(t)
	keys := []string{name, "redisson_countdownlatch__channel__{" + name + "}"}
	publish := javaPublish(top)
	ctx := testkit.CtxTimeout(t, 10*time.Second)
	if top.Name == "cluster" && strings.HasPrefix(name, "{") {
		err := rdb.Eval(ctx, "return redis.call('exists', KEYS[1])", keys).Err()
		if err == nil || !strings.Contains(err.Error(), "CROSSSLOT") {
			t.Fatalf("Redisson's latch keys of %q on a cluster: %v, want CROSSSLOT", name, err)
		}
		// relock's own latch of that name works there, on a channel of
		// the name's slot.
		l := c.CountDownLatch(name)
		if ok, err := l.TrySetCount(ctx, 1); !ok || err != nil {
			t.Fatal(ok, err)
		}
		done := make(chan error, 1)
		go func() { done <- l.Await(ctx) }()
		testkit.Eventually(t, 5*time.Second, "relock to await", func() bool { return c.Stats().Asleep == 1 })
		if err := top.NewClient(t).CountDownLatch(name).CountDown(ctx); err != nil {
			t.Fatal(err)
		}
		if err := <-done; err != nil || c.Stats().Wakeups == 0 {
			t.Fatalf("await: %v, woken %d times", err, c.Stats().Wakeups)
		}
		return
	}
	javaTrySet := func(n int) int64 {
		v, err := rdb.Eval(ctx, `if redis.call('exists', KEYS[1]) == 0 then
    redis.call('set', KEYS[1], ARGV[2]); redis.call(ARGV[3], KEYS[2], ARGV[1]); return 1 end
return 0`, keys, "1", n, publish).Int64()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	javaCountDown := func() {
		err := rdb.Eval(ctx, `local v = redis.call('decr', KEYS[1])
if v <= 0 then redis.call('del', KEYS[1]) end
if v == 0 then redis.call(ARGV[2], KEYS[2], ARGV[1]) end
return v`, keys, "0", publish).Err()
		if err != nil {
			t.Fatal(err)
		}
	}
	// Java sets and opens the latch; relock's awaiter hears it.
	if javaTrySet(1) != 1 {
		t.Fatal("java trySetCount failed")
	}
	l := c.CountDownLatch(name)
	if n, err := l.Count(ctx); n != 1 || err != nil {
		t.Fatalf("Count of Java's latch = %d, %v", n, err)
	}
	done := make(chan error, 1)
	go func() { done <- l.Await(ctx) }()
	testkit.Eventually(t, 5*time.Second, "relock to await", func() bool { return c.Stats().Asleep == 1 })
	javaCountDown()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if c.Stats().Wakeups == 0 {
		t.Fatal("relock was not woken by Java's zero message")
	}
	// relock sets and opens it; Java hears "1", then "0".
	ps := subscribe(ctx, t, top, rdb, keys[1])
	if ok, err := l.TrySetCount(ctx, 1); !ok || err != nil {
		t.Fatal(ok, err)
	}
	if javaTrySet(7) != 0 {
		t.Fatal("java trySetCount over relock's count succeeded")
	}
	if err := l.CountDown(ctx); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"1", "0"} {
		if msg, err := ps.ReceiveMessage(ctx); err != nil || msg.Payload != want {
			t.Fatalf("Java heard %v, %v; want %q", msg, err, want)
		}
	}
}
