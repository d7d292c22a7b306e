package relock_test

import (
	"context"
	"encoding/hex"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/conformance"
	"github.com/relock-go/relock/internal/layout"
	"github.com/relock-go/relock/internal/testkit"
)

func TestSemaphoreHammer(t *testing.T) { conformance.SemaphoreHammer(t) }

func TestSemaphoreBasics(t *testing.T) {
	testkit.ForEach(t, func(t *testing.T, top testkit.Topology) {
		s := top.NewClient(t).Semaphore(testkit.LockName(t))
		ctx := testkit.CtxTimeout(t, 10*time.Second)
		expect := func(want int) {
			t.Helper()
			if n, err := s.Available(ctx); n != want || err != nil {
				t.Fatalf("Available = %d, %v; want %d", n, err, want)
			}
		}
		expect(0)
		if err := s.TryAcquire(ctx, 1); !errors.Is(err, relock.ErrNotAcquired) {
			t.Fatalf("TryAcquire of an unset semaphore: %v, want ErrNotAcquired", err)
		}
		if ok, err := s.TrySetPermits(ctx, 2); !ok || err != nil {
			t.Fatalf("TrySetPermits: %v %v", ok, err)
		}
		if ok, err := s.TrySetPermits(ctx, 5); ok || err != nil {
			t.Fatalf("second TrySetPermits: %v %v", ok, err)
		}
		if err := s.TryAcquire(ctx, 3); !errors.Is(err, relock.ErrNotAcquired) {
			t.Fatalf("TryAcquire(3) of 2: %v, want ErrNotAcquired", err)
		}
		if err := s.TryAcquire(ctx, 2); err != nil {
			t.Fatalf("TryAcquire(2) of 2: %v", err)
		}
		expect(0)
		if err := s.AddPermits(ctx, 3); err != nil {
			t.Fatal(err)
		}
		if err := s.Release(ctx, 2); err != nil {
			t.Fatal(err)
		}
		expect(5)
		if n, err := s.Drain(ctx); n != 5 || err != nil {
			t.Fatalf("Drain = %d, %v", n, err)
		}
		if n, err := s.Drain(ctx); n != 0 || err != nil {
			t.Fatalf("second Drain = %d, %v", n, err)
		}
		expect(0)
	})
}

func TestSemaphoreWakesWhatFits(t *testing.T) { conformance.SemaphoreWakesWhatFits(t) }

// TestSemaphoreHandsToOwnWaiters: a Release hands its permits to waiting
// calls of its own Client, which return without an attempt, when no one
// else listens on the semaphore's channel; with another Client waiting
// there, the permits go to Redis and the calls attempt for them.
func TestSemaphoreHandsToOwnWaiters(t *testing.T) {
	testkit.ForEach(t, func(t *testing.T, top testkit.Topology) {
		c, attempts := top.CountingClient(t, "sem_acquire.lua", relock.WithoutReplicaSync())
		other := top.NewClient(t, relock.WithoutReplicaSync())
		name := testkit.LockName(t)
		ctx := testkit.CtxTimeout(t, 20*time.Second)
		s := c.Semaphore(name)
		if ok, err := s.TrySetPermits(ctx, 1); !ok || err != nil {
			t.Fatal(ok, err)
		}
		if n, err := s.Drain(ctx); n != 1 || err != nil {
			t.Fatal(n, err)
		}
		acquire := func(s *relock.Semaphore, n int) <-chan error {
			done := make(chan error, 1)
			go func() { done <- s.Acquire(ctx, n) }()
			return done
		}
		sleeping := func(cl *relock.Client, n int64) {
			t.Helper()
			testkit.Eventually(t, 5*time.Second, "the calls to sleep", func() bool { return cl.Stats().Asleep == n })
		}
		a, b := acquire(s, 1), acquire(s, 2)
		sleeping(c, 2)
		before := attempts.N.Load()
		if err := s.Release(ctx, 3); err != nil {
			t.Fatal(err)
		}
		for _, done := range []<-chan error{a, b} {
			if err := <-done; err != nil {
				t.Fatal(err)
			}
		}
		if n := attempts.N.Load() - before; n != 0 {
			t.Errorf("the calls handed their permits made %d attempts, want 0", n)
		}
		if st := c.Stats(); st.Handoffs != 2 {
			t.Errorf("%d handoffs, want 2", st.Handoffs)
		}
		if n, _ := s.Available(ctx); n != 0 {
			t.Fatalf("%d permits available after handing all 3, want 0", n)
		}
		// Another Client waits too: nothing is handed.
		mine, theirs := acquire(s, 1), acquire(other.Semaphore(name), 1)
		sleeping(c, 1)
		sleeping(other, 1)
		if err := s.Release(ctx, 2); err != nil {
			t.Fatal(err)
		}
		for _, done := range []<-chan error{mine, theirs} {
			if err := <-done; err != nil {
				t.Fatal(err)
			}
		}
		if st := c.Stats(); st.Handoffs != 2 {
			t.Errorf("%d handoffs with another Client waiting, want still 2", st.Handoffs)
		}
		if n, _ := s.Available(ctx); n != 0 {
			t.Fatalf("%d permits available, want 0", n)
		}
		testkit.Idle(t, c, other)
	})
}

// TestSemaphoreCancelledWaiterLeavesNothing: a waiter whose context ends
// leaves no subscription, key or goroutine (TestMain checks goroutines).
func TestSemaphoreCancelledWaiterLeavesNothing(t *testing.T) {
	testkit.ForEach(t, func(t *testing.T, top testkit.Topology) {
		c := top.NewClient(t)
		rdb := top.RDB(t)
		name := testkit.LockName(t)
		ctx := testkit.CtxTimeout(t, 10*time.Second)
		s := c.Semaphore(name)
		if ok, err := s.TrySetPermits(ctx, 1); !ok || err != nil {
			t.Fatal(ok, err)
		}
		if err := s.TryAcquire(ctx, 1); err != nil {
			t.Fatal(err)
		}
		before := testkit.KeysOf(t, rdb, name)
		waitCancelled(t, c, func(ctx context.Context) error { return s.Acquire(ctx, 1) })
		if s := c.Stats(); s.Channels != 0 || s.Asleep != 0 {
			t.Fatalf("waiter left %+v", s)
		}
		testkit.Eventually(t, 5*time.Second, "the server to drop the subscription", func() bool {
			return channelSubscribers(t, top, layout.Companion(layout.SemaphoreChannel, name)) == 0
		})
		noNewKeys(t, before, testkit.KeysOf(t, rdb, name))
		if n, _ := s.Available(ctx); n != 0 {
			t.Fatalf("%d permits available: a cancelled waiter changed the count", n)
		}
	})
}

func TestSemaphoreBadInput(t *testing.T) {
	testkit.ForEach(t, func(t *testing.T, top testkit.Topology) {
		c := top.NewClient(t)
		rdb := top.RDB(t)
		ctx := testkit.CtxTimeout(t, 10*time.Second)
		name := testkit.LockName(t)
		s := c.Semaphore(name)
		for _, n := range []int{0, -1} {
			if _, err := s.TrySetPermits(ctx, n); !errors.Is(err, relock.ErrInvalidOption) {
				t.Errorf("TrySetPermits(%d): %v", n, err)
			}
			if err := s.Acquire(ctx, n); !errors.Is(err, relock.ErrInvalidOption) {
				t.Errorf("Acquire(%d): %v", n, err)
			}
			if err := s.TryAcquire(ctx, n); !errors.Is(err, relock.ErrInvalidOption) {
				t.Errorf("TryAcquire(%d): %v", n, err)
			}
			if err := s.Release(ctx, n); !errors.Is(err, relock.ErrInvalidOption) {
				t.Errorf("Release(%d): %v", n, err)
			}
		}
		if err := s.AddPermits(ctx, 0); !errors.Is(err, relock.ErrInvalidOption) {
			t.Errorf("AddPermits(0): %v", err)
		}
		bad := c.Semaphore("bad}name")
		if err := bad.Acquire(ctx, 1); !errors.Is(err, relock.ErrInvalidName) {
			t.Errorf("Acquire of a bad name: %v", err)
		}
		if _, err := bad.Available(ctx); !errors.Is(err, relock.ErrInvalidName) {
			t.Errorf("Available of a bad name: %v", err)
		}
		if err := rdb.HSet(ctx, name, "f", "v").Err(); err != nil {
			t.Fatal(err)
		}
		if err := s.TryAcquire(ctx, 1); !errors.Is(err, relock.ErrWrongType) {
			t.Errorf("TryAcquire of a hash: %v", err)
		}
		if err := s.Release(ctx, 1); !errors.Is(err, relock.ErrWrongType) {
			t.Errorf("Release to a hash: %v", err)
		}
		if keys := testkit.KeysOf(t, rdb, name); len(keys) != 1 {
			t.Errorf("keys %v: bad input wrote something", keys)
		}
		closed := top.NewClient(t)
		_ = closed.Close()
		if err := closed.Semaphore(name).Release(ctx, 1); !errors.Is(err, relock.ErrClosed) {
			t.Errorf("Release on a closed client: %v", err)
		}
	})
}

// TestSemaphoreLostReply: an acquisition whose reply is lost is undone, and
// a release whose reply is lost is applied once.
func TestSemaphoreLostReply(t *testing.T) {
	rdb := testkit.CloseLater(t, testkit.Standalone.Client())
	c := testkit.NewClient(t, rdb)
	s := c.Semaphore(testkit.LockName(t))
	ctx := testkit.CtxTimeout(t, 10*time.Second)
	if ok, err := s.TrySetPermits(ctx, 2); !ok || err != nil {
		t.Fatal(ok, err)
	}
	drop := &testkit.DropReply{Script: "sem_acquire.lua"}
	rdb.AddHook(drop)
	drop.Armed.Store(true)
	if err := s.Acquire(ctx, 1); !errors.Is(err, testkit.ErrDropped) {
		t.Fatalf("Acquire = %v, want the dropped reply's error", err)
	}
	if n, _ := s.Available(ctx); n != 2 || drop.Dropped.Load() != 1 {
		t.Fatalf("%d permits available after an undone acquisition, want 2", n)
	}
	drop.Retarget("sem_release.lua")
	if err := s.TryAcquire(ctx, 1); err != nil {
		t.Fatal(err)
	}
	drop.Armed.Store(true)
	if err := s.Release(ctx, 1); err != nil {
		t.Fatalf("Release with a lost reply: %v, want it resolved", err)
	}
	if n, _ := s.Available(ctx); n != 2 || drop.Dropped.Load() != 2 {
		t.Fatalf("%d permits available after a resolved release, want 2", n)
	}
}

// TestSynchronizersHashTagNames: names with their own hash tag keep every
// key and channel of a synchronizer in one cluster slot.
func TestSynchronizersHashTagNames(t *testing.T) {
	testkit.ForEach(t, func(t *testing.T, top testkit.Topology) {
		c := top.NewClient(t)
		name := "test:{" + testkit.LockName(t) + "}:tagged"
		ctx := testkit.CtxTimeout(t, 10*time.Second)
		s := c.Semaphore(name + ":sem")
		if ok, err := s.TrySetPermits(ctx, 1); !ok || err != nil {
			t.Fatalf("semaphore: %v %v", ok, err)
		}
		if err := s.Acquire(ctx, 1); err != nil {
			t.Fatal(err)
		}
		if err := s.Release(ctx, 1); err != nil {
			t.Fatal(err)
		}
		ps := c.PermitSemaphore(name + ":psem")
		if ok, err := ps.TrySetPermits(ctx, 1); !ok || err != nil {
			t.Fatalf("permit semaphore: %v %v", ok, err)
		}
		p, err := ps.Acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := p.Release(ctx); err != nil {
			t.Fatal(err)
		}
		if n, err := ps.Available(ctx); n != 1 || err != nil {
			t.Fatalf("Available = %d, %v", n, err)
		}
		l := c.CountDownLatch(name + ":latch")
		if ok, err := l.TrySetCount(ctx, 1); !ok || err != nil {
			t.Fatalf("latch: %v %v", ok, err)
		}
		if err := l.CountDown(ctx); err != nil {
			t.Fatal(err)
		}
		if err := l.Await(ctx); err != nil {
			t.Fatal(err)
		}
	})
}

// TestSemaphoreAddPermitsResizes: AddPermits with a negative number takes
// free permits away, below zero if need be, so that an acquisition waits
// until holders have released enough; a positive one adds them back and
// wakes the waiter. Zero is refused.
func TestSemaphoreAddPermitsResizes(t *testing.T) {
	testkit.ForEach(t, func(t *testing.T, top testkit.Topology) {
		c := top.NewClient(t)
		ctx := testkit.CtxTimeout(t, time.Minute)
		s := c.Semaphore(testkit.LockName(t))
		if ok, err := s.TrySetPermits(ctx, 2); !ok || err != nil {
			t.Fatalf("TrySetPermits: %v %v", ok, err)
		}
		if err := s.Acquire(ctx, 2); err != nil {
			t.Fatal(err)
		}
		if err := s.AddPermits(ctx, -1); err != nil {
			t.Fatal(err)
		}
		if n, err := s.Available(ctx); n != -1 || err != nil {
			t.Fatalf("Available = %d, %v after shrinking a drained semaphore by 1, want -1", n, err)
		}
		if err := s.TryAcquire(ctx, 1); !errors.Is(err, relock.ErrNotAcquired) {
			t.Fatalf("TryAcquire with -1 available: %v, want ErrNotAcquired", err)
		}
		got := make(chan error, 1)
		go func() { got <- s.Acquire(ctx, 1) }()
		// Asleep, where a release of its Client may hand it permits: the
		// release hands it none, since that would leave -1 available.
		testkit.Eventually(t, 5*time.Second, "the waiter to sleep", func() bool { return c.Stats().Asleep == 1 })
		if err := s.Release(ctx, 1); err != nil { // 0 available: still none to take
			t.Fatal(err)
		}
		if n, _ := s.Available(ctx); n != 0 {
			t.Fatalf("Available = %d after a release, want 0", n)
		}
		if err := s.AddPermits(ctx, 1); err != nil { // 1: the waiter takes it
			t.Fatal(err)
		}
		if err := <-got; err != nil {
			t.Fatalf("waiter: %v", err)
		}
		if n, _ := s.Available(ctx); n != 0 {
			t.Fatalf("Available = %d after the waiter took the added permit, want 0", n)
		}
		if err := s.AddPermits(ctx, 0); !errors.Is(err, relock.ErrInvalidOption) {
			t.Fatalf("AddPermits(0) = %v, want ErrInvalidOption", err)
		}
	})
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
