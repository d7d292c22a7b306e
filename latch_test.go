package relock_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/conformance"
	"github.com/relock-go/relock/internal/layout"
	"github.com/relock-go/relock/internal/testkit"
)

func TestLatchReleasesAll(t *testing.T) { conformance.LatchReleasesAll(t) }

func TestLatchReuse(t *testing.T) {
	testkit.ForEach(t, func(t *testing.T, top testkit.Topology) {
		l := top.NewClient(t).CountDownLatch(testkit.LockName(t))
		ctx := testkit.CtxTimeout(t, 10*time.Second)
		if err := l.Await(ctx); err != nil {
			t.Fatalf("Await of an unset latch: %v", err)
		}
		if err := l.CountDown(ctx); !errors.Is(err, relock.ErrLatchNotSet) {
			t.Fatalf("CountDown of an unset latch: %v", err)
		}
		for round := 0; round < 2; round++ {
			if ok, err := l.TrySetCount(ctx, 2); !ok || err != nil {
				t.Fatalf("round %d: TrySetCount: %v %v", round, ok, err)
			}
			if ok, err := l.TrySetCount(ctx, 5); ok || err != nil {
				t.Fatalf("round %d: TrySetCount of a set latch: %v %v", round, ok, err)
			}
			for want := 1; want >= 0; want-- {
				if err := l.CountDown(ctx); err != nil {
					t.Fatal(err)
				}
				if n, err := l.Count(ctx); n != want || err != nil {
					t.Fatalf("Count = %d, %v; want %d", n, err, want)
				}
			}
			if err := l.Await(ctx); err != nil {
				t.Fatal(err)
			}
			if err := l.CountDown(ctx); !errors.Is(err, relock.ErrLatchNotSet) {
				t.Fatalf("CountDown past zero: %v", err)
			}
		}
	})
}

func TestLatchCancelledAwaiterLeavesNothing(t *testing.T) {
	testkit.ForEach(t, func(t *testing.T, top testkit.Topology) {
		c := top.NewClient(t)
		rdb := top.RDB(t)
		name := testkit.LockName(t)
		ctx := testkit.CtxTimeout(t, 10*time.Second)
		l := c.CountDownLatch(name)
		if ok, err := l.TrySetCount(ctx, 1); !ok || err != nil {
			t.Fatal(ok, err)
		}
		before := testkit.KeysOf(t, rdb, name)
		waitCancelled(t, c, l.Await)
		if s := c.Stats(); s.Channels != 0 || s.Asleep != 0 {
			t.Fatalf("awaiter left %+v", s)
		}
		testkit.Eventually(t, 5*time.Second, "the server to drop the subscription", func() bool {
			return channelSubscribers(t, top, layout.LatchChannel(name, false)) == 0
		})
		noNewKeys(t, before, testkit.KeysOf(t, rdb, name))
		if n, _ := l.Count(ctx); n != 1 {
			t.Fatalf("count %d, want 1", n)
		}
	})
}

func TestLatchBadInput(t *testing.T) {
	testkit.ForEach(t, func(t *testing.T, top testkit.Topology) {
		c := top.NewClient(t)
		ctx := testkit.CtxTimeout(t, 10*time.Second)
		l := c.CountDownLatch(testkit.LockName(t))
		for _, n := range []int{0, -1} {
			if _, err := l.TrySetCount(ctx, n); !errors.Is(err, relock.ErrInvalidOption) {
				t.Errorf("TrySetCount(%d): %v", n, err)
			}
		}
		bad := c.CountDownLatch("{}")
		if err := bad.Await(ctx); !errors.Is(err, relock.ErrInvalidName) {
			t.Errorf("Await of a bad name: %v", err)
		}
		if err := bad.CountDown(ctx); !errors.Is(err, relock.ErrInvalidName) {
			t.Errorf("CountDown of a bad name: %v", err)
		}
		cancelled, cancel := context.WithCancel(ctx)
		cancel()
		if err := l.Await(cancelled); !errors.Is(err, context.Canceled) {
			t.Errorf("Await with a cancelled context: %v", err)
		}
	})
}

// TestLatchLostReply: a CountDown whose reply is lost is resolved, and
// counts once.
func TestLatchLostReply(t *testing.T) {
	rdb := testkit.CloseLater(t, testkit.Standalone.Client())
	drop := &testkit.DropReply{Script: "latch_countdown.lua"}
	rdb.AddHook(drop)
	l := testkit.NewClient(t, rdb).CountDownLatch(testkit.LockName(t))
	ctx := testkit.CtxTimeout(t, 10*time.Second)
	if ok, err := l.TrySetCount(ctx, 2); !ok || err != nil {
		t.Fatal(ok, err)
	}
	drop.Armed.Store(true)
	if err := l.CountDown(ctx); err != nil {
		t.Fatalf("CountDown with a lost reply: %v, want it resolved", err)
	}
	if n, err := l.Count(ctx); n != 1 || err != nil || drop.Dropped.Load() != 1 {
		t.Fatalf("Count = %d, %v after one CountDown whose reply was lost; want 1", n, err)
	}
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
	keys := []string{name, layout.LatchChannel(name, false)}
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
