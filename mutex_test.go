package relock_test

import (
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"math/rand"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/conformance"
	"github.com/relock-go/relock/internal/history"
	"github.com/relock-go/relock/internal/testkit"
)

func TestMutexHammer(t *testing.T) { conformance.MutexHammer(t) }

func TestReentrancy(t *testing.T) { conformance.Reentrancy(t) }

func TestPlainContextIsNotReentrant(t *testing.T) {
	testkit.ForEach(t, func(t *testing.T, top testkit.Topology) {
		m := top.NewClient(t).Mutex(testkit.LockName(t))
		ctx := testkit.CtxTimeout(t, 10*time.Second)
		l, err := m.Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
		defer cancel()
		if _, err := m.Lock(short); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("second Lock with a plain context: %v, want it to block until the deadline", err)
		}
		if err := l.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	})
}

func TestFencingTokensGrow(t *testing.T) { conformance.FencingTokensGrow(t) }

// TestWatchdogKeepsLockAlive holds a lock for over three watchdog timeouts.
func TestWatchdogKeepsLockAlive(t *testing.T) {
	testkit.ForEach(t, func(t *testing.T, top testkit.Topology) {
		const timeout = 300 * time.Millisecond
		c := top.NewClient(t, relock.WithWatchdogTimeout(timeout))
		other := top.NewClient(t)
		m := c.Mutex(testkit.LockName(t))
		ctx := testkit.CtxTimeout(t, 10*time.Second)
		l, err := m.Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		for time.Since(start) < 4*timeout {
			time.Sleep(timeout / 4) // the passing of time is what is tested
			if err := l.Err(); err != nil {
				t.Fatalf("lost after %v: %v", time.Since(start), err)
			}
			if _, err := other.Mutex(m.Name()).TryLock(ctx); !errors.Is(err, relock.ErrNotAcquired) {
				t.Fatalf("another client's TryLock after %v: %v", time.Since(start), err)
			}
		}
		ttl, err := m.TTL(ctx)
		if err != nil || ttl <= 0 || ttl > timeout {
			t.Fatalf("TTL %v, %v: want in (0, %v]", ttl, err, timeout)
		}
		if err := l.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	})
}

func TestFixedLeaseExpires(t *testing.T) { conformance.FixedLeaseExpires(t) }

func TestTryLockAndTTL(t *testing.T) { conformance.TryLockAndTTL(t) }

func TestLeaseContext(t *testing.T) { conformance.LeaseContext(t) }

// TestMutexHammerWithCancellation: waiters that give up at random points,
// in the middle of a wait, an attempt or a handoff, never break mutual
// exclusion and leave nothing behind.
func TestMutexHammerWithCancellation(t *testing.T) {
	testkit.ForEach(t, func(t *testing.T, top testkit.Topology) {
		for _, nclients := range []int{1, 2} {
			t.Run(fmt.Sprintf("clients=%d", nclients), func(t *testing.T) {
				clients := top.NewClients(t, nclients)
				name := testkit.LockName(t)
				rec := history.New()
				ctx := testkit.CtxTimeout(t, time.Minute)
				var acquired, gaveUp atomic.Int64
				var wg sync.WaitGroup
				for i := 0; i < 12; i++ {
					c := clients[i%nclients]
					wg.Add(1)
					go func(seed int64) {
						defer wg.Done()
						rnd := rand.New(rand.NewSource(seed))
						m := c.Mutex(name)
						for j := 0; j < 30; j++ {
							wctx, cancel := context.WithTimeout(ctx, time.Duration(rnd.Intn(3000))*time.Microsecond)
							l, err := m.Lock(wctx)
							cancel()
							if err != nil {
								if !errors.Is(err, context.DeadlineExceeded) {
									t.Error(err)
									return
								}
								gaveUp.Add(1)
								continue
							}
							acquired.Add(1)
							h := rec.Begin(fmt.Sprint(seed), name, l.Token())
							runtime.Gosched()
							h.End()
							if err := l.Unlock(ctx); err != nil {
								t.Error(err)
								return
							}
						}
					}(int64(i))
				}
				wg.Wait()
				if v := rec.Check(); len(v) > 0 {
					t.Fatalf("%d violations, first: %+v", len(v), v[0])
				}
				if acquired.Load() == 0 || gaveUp.Load() == 0 {
					t.Fatalf("acquired %d, gave up %d: the test exercised one path only", acquired.Load(), gaveUp.Load())
				}
				if keys := testkit.KeysOf(t, top.RDB(t), name); len(keys) > 0 {
					t.Fatalf("keys left behind: %v", keys)
				}
				for _, c := range clients {
					if s := c.Stats(); s.Held != 0 || s.Channels != 0 || s.Asleep != 0 {
						t.Fatalf("state left behind: %+v", s)
					}
				}
			})
		}
	})
}

// javaLock acts on a lock name the way a Redisson RLock does: a hash
// field "<uuid>:<thread id>" holding the count, a PEXPIRE lease, and "0"
// published on redisson_lock__channel:{name} (sharded on a cluster) when
// the lock is freed. The scripts below are written for this test from that
// layout.
type javaLock struct {
	rdb     redis.UniversalClient
	name    string
	field   string
	channel string
	sharded bool
}

const javaTryLock = `
if redis.call('exists', KEYS[1]) == 0 or redis.call('hexists', KEYS[1], ARGV[2]) == 1 then
    redis.call('hincrby', KEYS[1], ARGV[2], 1)
    redis.call('pexpire', KEYS[1], ARGV[1])
    return nil
end
return redis.call('pttl', KEYS[1])`

// javaUnlock is Redisson's release: an unlock latch
// "redisson_unlock_latch:{name}:<request id>" (a random 32-digit hex id per
// call) answers a retried request; it is set to 0 (still held) or 1
// (freed) with the retry window as PX, and deleted by the client once
// answered.
const javaUnlock = `
local done = redis.call('get', KEYS[3])
if done then
    return tonumber(done)
end
if redis.call('hexists', KEYS[1], ARGV[3]) == 0 then
    return nil
end
if redis.call('hincrby', KEYS[1], ARGV[3], -1) > 0 then
    redis.call('pexpire', KEYS[1], ARGV[2])
    redis.call('set', KEYS[3], 0, 'px', ARGV[5])
    return 0
end
redis.call('del', KEYS[1])
redis.call(ARGV[4], KEYS[2], ARGV[1])
redis.call('set', KEYS[3], 1, 'px', ARGV[5])
return 1`

// javaRequestID returns a fresh request id as Redisson makes them: 16
// random bytes in hex.
func javaRequestID() string {
	var b [16]byte
	_, _ = crand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// javaUnlockLatch returns Redisson's unlock latch key of a request.
func javaUnlockLatch(name, request string) string {
	return "redisson_unlock_latch:{" + name + "}:" + request
}

func newJavaLock(rdb redis.UniversalClient, name string, sharded bool) *javaLock {
	return &javaLock{rdb: rdb, name: name, field: "7f1c9a52-9f1e-4a3e-9c1d-2b7e4c1d0a11:1",
		channel: "redisson_lock__channel:{" + name + "}", sharded: sharded}
}

// tryLock returns 0 when acquired, else the holder's TTL.
func (j *javaLock) tryLock(ctx context.Context, lease time.Duration) (time.Duration, error) {
	v, err := j.rdb.Eval(ctx, javaTryLock, []string{j.name}, lease.Milliseconds(), j.field).Result()
	if errors.Is(err, redis.Nil) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	return time.Duration(v.(int64)) * time.Millisecond, nil
}

func (j *javaLock) publish() string {
	if j.sharded {
		return "spublish"
	}
	return "publish"
}

func (j *javaLock) unlock(ctx context.Context) error {
	request := javaRequestID()
	latch := javaUnlockLatch(j.name, request)
	err := j.rdb.Eval(ctx, javaUnlock, []string{j.name, j.channel, latch}, "0", 30000, j.field, j.publish(), 10000).Err()
	if errors.Is(err, redis.Nil) {
		return errors.New("java unlock: not held")
	}
	if err != nil {
		return err
	}
	return j.rdb.Del(ctx, latch).Err()
}

func (j *javaLock) subscribe(ctx context.Context) *redis.PubSub {
	if j.sharded {
		return j.rdb.SSubscribe(ctx, j.channel)
	}
	return j.rdb.Subscribe(ctx, j.channel)
}

func TestRedissonInterop(t *testing.T) {
	testkit.ForEach(t, func(t *testing.T, top testkit.Topology) {
		rdb := top.RDB(t)
		c := top.NewClient(t)
		name := testkit.LockName(t)
		m := c.Mutex(name)
		java := newJavaLock(rdb, name, top.Name == "cluster")
		ctx := testkit.CtxTimeout(t, 10*time.Second)

		// Java holds (30s lease): relock is excluded, waits, and is woken by
		// Java's release message.
		if ttl, err := java.tryLock(ctx, 30*time.Second); err != nil || ttl != 0 {
			t.Fatalf("java tryLock: %v %v", ttl, err)
		}
		if _, err := m.TryLock(ctx); !errors.Is(err, relock.ErrNotAcquired) {
			t.Fatalf("relock TryLock over a Java hold: %v", err)
		}
		got := make(chan *relock.Lease, 1)
		go func() {
			l, err := m.Lock(ctx)
			if err != nil {
				t.Error(err)
			}
			got <- l
		}()
		testkit.Eventually(t, 5*time.Second, "relock to wait", func() bool { return c.Stats().Asleep == 1 && testkit.Subscribers(t, top, name) == 1 })
		if err := java.unlock(ctx); err != nil {
			t.Fatal(err)
		}
		l := <-got
		if l == nil {
			t.FailNow()
		}
		if c.Stats().Wakeups == 0 {
			t.Fatal("relock was not woken by Java's release message")
		}

		// relock holds: Java is excluded with a TTL, subscribes as Redisson
		// does, and hears relock's release.
		ttl, err := java.tryLock(ctx, 30*time.Second)
		if err != nil || ttl <= 0 {
			t.Fatalf("java tryLock over a relock hold: ttl %v, %v", ttl, err)
		}
		ps := java.subscribe(ctx)
		defer ps.Close()
		if _, err := ps.Receive(ctx); err != nil { // the subscription confirmation
			t.Fatal(err)
		}
		if err := l.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		msg, err := ps.ReceiveMessage(ctx)
		if err != nil || msg.Payload != "0" || msg.Channel != java.channel {
			t.Fatalf("java heard %+v, %v", msg, err)
		}
		if ttl, err := java.tryLock(ctx, 30*time.Second); err != nil || ttl != 0 {
			t.Fatalf("java tryLock after relock's release: %v %v", ttl, err)
		}
		if locked, _ := m.IsLocked(ctx); !locked {
			t.Fatal("Java's hold not seen")
		}
		if err := java.unlock(ctx); err != nil {
			t.Fatal(err)
		}
	})
}

// javaFencedLock is Redisson's RFencedLock acquisition, written for this
// test from its source: the RLock hash and, on every acquisition
// (re-entries included), INCR of redisson_lock_token:{name}; KEYS lock,
// token; ARGV lease ms, lock name. It replies {-1, token} when acquired,
// else {PTTL, -1}. Its release is RLock's.
const javaFencedLock = `
if redis.call('exists', KEYS[1]) == 0 or redis.call('hexists', KEYS[1], ARGV[2]) == 1 then
    local token = redis.call('incr', KEYS[2])
    redis.call('hincrby', KEYS[1], ARGV[2], 1)
    redis.call('pexpire', KEYS[1], ARGV[1])
    return {-1, token}
end
return {redis.call('pttl', KEYS[1]), -1}`

// fencedLock runs javaFencedLock: the token when acquired, else 0 and the
// holder's TTL.
func (j *javaLock) fencedLock(ctx context.Context, lease time.Duration) (int64, time.Duration, error) {
	v, err := j.rdb.Eval(ctx, javaFencedLock, []string{j.name, "redisson_lock_token:{" + j.name + "}"}, lease.Milliseconds(), j.field).Int64Slice()
	if err != nil {
		return 0, 0, err
	}
	if v[0] == -1 {
		return v[1], 0, nil
	}
	return 0, time.Duration(v[0]) * time.Millisecond, nil
}

// TestRedissonFencedLockInterop: a Redisson RFencedLock holder excludes a
// relock Mutex and its release wakes relock's waiter; a relock holder
// excludes RFencedLock, whose waiter hears relock's release.
func TestRedissonFencedLockInterop(t *testing.T) {
	testkit.ForEach(t, func(t *testing.T, top testkit.Topology) {
		rdb := top.RDB(t)
		c := top.NewClient(t)
		name := testkit.LockName(t)
		m := c.Mutex(name)
		java := newJavaLock(rdb, name, top.Name == "cluster")
		ctx := testkit.CtxTimeout(t, 10*time.Second)

		first, ttl, err := java.fencedLock(ctx, 30*time.Second)
		if err != nil || first <= 0 || ttl != 0 {
			t.Fatalf("java lockAndGetToken: %v %v %v", first, ttl, err)
		}
		if again, _, err := java.fencedLock(ctx, 30*time.Second); err != nil || again != first+1 {
			t.Fatalf("java re-entry token %v after %v, %v: want the next", again, first, err)
		}
		if _, err := m.TryLock(ctx); !errors.Is(err, relock.ErrNotAcquired) {
			t.Fatalf("relock TryLock over a Java hold: %v", err)
		}
		got := make(chan *relock.Lease, 1)
		go func() {
			l, err := m.Lock(ctx)
			if err != nil {
				t.Error(err)
			}
			got <- l
		}()
		testkit.Eventually(t, 5*time.Second, "relock to wait", func() bool { return c.Stats().Asleep == 1 && testkit.Subscribers(t, top, name) == 1 })
		for range 2 {
			if err := java.unlock(ctx); err != nil {
				t.Fatal(err)
			}
		}
		l := <-got
		if l == nil {
			t.FailNow()
		}
		if c.Stats().Wakeups == 0 {
			t.Fatal("relock was not woken by Java's release message")
		}

		if _, ttl, err := java.fencedLock(ctx, 30*time.Second); err != nil || ttl <= 0 {
			t.Fatalf("java lockAndGetToken over a relock hold: ttl %v, %v", ttl, err)
		}
		ps := java.subscribe(ctx)
		defer ps.Close()
		if _, err := ps.Receive(ctx); err != nil {
			t.Fatal(err)
		}
		if err := l.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		if msg, err := ps.ReceiveMessage(ctx); err != nil || msg.Payload != "0" || msg.Channel != java.channel {
			t.Fatalf("java heard %+v, %v", msg, err)
		}
		if tok, _, err := java.fencedLock(ctx, 30*time.Second); err != nil || tok <= first+1 {
			t.Fatalf("java lockAndGetToken after relock's release: %v, %v", tok, err)
		}
		if err := java.unlock(ctx); err != nil {
			t.Fatal(err)
		}
	})
}

// TestRedissonWaiterNotStarved: relock calls of two Clients contend for a
// lock with grants among them, and a Redisson waiter on the same name, who
// does not queue, still takes the lock again and again: while it listens
// on the release channel, releases free the lock and announce it instead
// of granting it.
func TestRedissonWaiterNotStarved(t *testing.T) {
	testkit.ForEach(t, func(t *testing.T, top testkit.Topology) {
		name := testkit.LockName(t)
		java := newJavaLock(top.RDB(t), name, top.Name == "cluster")
		redissonNotStarved(t, top, java.subscribe,
			func(c *relock.Client) func(context.Context, ...relock.LockOption) (*relock.Lease, error) {
				return c.Mutex(name).Lock
			},
			func(ctx context.Context) (time.Duration, error) { return java.tryLock(ctx, 5*time.Second) },
			java.unlock)
	})
}

// redissonNotStarved has relock calls of two Clients, four each, take the
// lock with lock and hold it for a millisecond, again and again, while a
// Redisson waiter, who does not queue, must take it 20 times within 30s:
// it tries with try and, refused, waits as Redisson does, for a message on
// the channel subscribe listens to or the TTL it was told; it releases
// with release.
func redissonNotStarved(t *testing.T, top testkit.Topology, subscribe func(context.Context) *redis.PubSub,
	lock func(*relock.Client) func(context.Context, ...relock.LockOption) (*relock.Lease, error),
	try func(context.Context) (time.Duration, error), release func(context.Context) error) {
	t.Helper()
	ctx := testkit.CtxTimeout(t, 30*time.Second)
	ps := subscribe(ctx)
	defer ps.Close()
	if _, err := ps.Receive(ctx); err != nil {
		t.Fatal(err)
	}
	messages := ps.Channel()

	wctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer wg.Wait()
	defer stop()
	var relockHolds atomic.Int64
	for i := range 2 {
		take := lock(top.NewClient(t, relock.WithoutReplicaSync()))
		for range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for wctx.Err() == nil {
					l, err := take(wctx)
					if err != nil {
						return
					}
					relockHolds.Add(1)
					time.Sleep(time.Millisecond) // the hold
					if err := l.Unlock(ctx); err != nil && ctx.Err() == nil {
						t.Errorf("client %d: %v", i, err)
						return
					}
				}
			}()
		}
	}
	const want = 20
	for got := 0; got < want; {
		ttl, err := try(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if ttl == 0 {
			got++
			if err := release(ctx); err != nil {
				t.Fatal(err)
			}
			continue
		}
		timer := time.NewTimer(ttl)
		select { // as Redisson waits: the release message, or the TTL
		case <-messages:
		case <-timer.C:
		case <-ctx.Done():
			t.Fatalf("the Redisson waiter took the lock %d times of %d before the deadline (relock: %d holds)", got, want, relockHolds.Load())
		}
		timer.Stop()
	}
	stop()
	wg.Wait()
	if relockHolds.Load() == 0 {
		t.Fatal("relock never held the lock: no contention was tested")
	}
}

// TestMutexWaiterListensOnceForeignHolderSeen: a waiting relock call
// listens only on its Client's grant channel while relock clients hold the
// lock, and on the lock's release channel too from the attempt that finds
// a Redisson holder, whose release only publishes there. The holder here
// changes under the waiter without a message: the relock hold vanishes
// and Java takes the lock for 30s; the waiter must learn of Java's release
// from its message, well within its 10s context.
func TestMutexWaiterListensOnceForeignHolderSeen(t *testing.T) {
	testkit.ForEach(t, func(t *testing.T, top testkit.Topology) {
		rdb := top.RDB(t)
		c := top.NewClient(t)
		name := testkit.LockName(t)
		m := c.Mutex(name)
		java := newJavaLock(rdb, name, top.Name == "cluster")
		ctx := testkit.CtxTimeout(t, 10*time.Second)

		// A lease long enough that the waiter sleeps through the swap below.
		if _, err := m.Lock(ctx, relock.WithLease(2*time.Second)); err != nil {
			t.Fatal(err)
		}
		got := testkit.LockAsync(t, ctx, m.Lock)
		testkit.Eventually(t, 5*time.Second, "relock to wait", func() bool { return c.Stats().Asleep == 1 })
		if n := testkit.Subscribers(t, top, name); n != 0 {
			t.Fatalf("%d listeners on the release channel while a relock client holds", n)
		}
		// The hold vanishes without a release (as if lost), and Java takes
		// the lock: no message reaches the waiter.
		if err := rdb.Del(ctx, name).Err(); err != nil {
			t.Fatal(err)
		}
		if ttl, err := java.tryLock(ctx, 30*time.Second); err != nil || ttl != 0 {
			t.Fatalf("java tryLock: %v %v", ttl, err)
		}
		// The waiter's next attempt (at the old hold's end) finds Java: it
		// listens, attempts once more when the subscription is confirmed,
		// and sleeps again (asleep is counted only once confirmed).
		testkit.Eventually(t, 5*time.Second, "relock to listen on the release channel and sleep", func() bool {
			return testkit.Subscribers(t, top, name) == 1 && c.Stats().Asleep == 1
		})
		wakeups := c.Stats().Wakeups
		if err := java.unlock(ctx); err != nil {
			t.Fatal(err)
		}
		l := <-got
		if l == nil {
			t.Fatal("the waiter did not get the lock after Java's release")
		}
		if c.Stats().Wakeups == wakeups {
			t.Fatal("the waiter was not woken by Java's release message")
		}
		if err := l.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		testkit.Eventually(t, 5*time.Second, "the release channel to be left", func() bool {
			return testkit.Subscribers(t, top, name) == 0
		})
	})
}
