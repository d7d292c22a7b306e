package systest

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/conformance"
	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/internal/testkit"
)

const helperEnv = "RELOCK_TEST_HOLDER"

// helperProcess runs in a child process of the test: it takes the lock
// named by the environment, says "held <token>", and waits to be killed.
func helperProcess() int {
	addr, name := os.Getenv("RELOCK_TEST_ADDR"), os.Getenv(helperEnv)
	timeout, _ := time.ParseDuration(os.Getenv("RELOCK_TEST_WATCHDOG"))
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	c, err := relock.New(rdb, relock.WithWatchdogTimeout(timeout))
	if err != nil {
		fmt.Println("error", err)
		return 1
	}
	l, err := c.Mutex(name).Lock(context.Background())
	if err != nil {
		fmt.Println("error", err)
		return 1
	}
	fmt.Println("held", l.Token())
	select {}
}

// TestHolderKilled: a holder process killed with SIGKILL leaves its lock
// to expire within the watchdog timeout.
func TestHolderKilled(t *testing.T) {
	const timeout = 500 * time.Millisecond
	name := testkit.LockName(t)
	cmd := childCommand("holder", helperEnv+"="+name, "RELOCK_TEST_ADDR="+testkit.Standalone.Addr,
		"RELOCK_TEST_WATCHDOG="+timeout.String())
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "held ") {
		t.Fatalf("holder process said %q, %v", line, err)
	}
	// Let its watchdog renew at least once, so that expiry after the kill
	// is the watchdog's lease and not the first one.
	c := testkit.Topologies()[0].NewClient(t)
	m := c.Mutex(name)
	ctx := testkit.CtxTimeout(t, 10*time.Second)
	if _, err := m.TryLock(ctx); !errors.Is(err, relock.ErrNotAcquired) {
		t.Fatalf("TryLock while the child holds: %v", err)
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	ttl, err := m.TTL(ctx)
	if err != nil || ttl > timeout {
		t.Fatalf("TTL after the kill %v, %v: want at most the watchdog timeout %v", ttl, err, timeout)
	}
	l, err := m.Lock(ctx)
	if err != nil {
		t.Fatalf("lock of a dead holder not freed: %v", err)
	}
	token, _ := strconv.ParseUint(strings.TrimSpace(strings.TrimPrefix(line, "held ")), 10, 64)
	if l.Token() <= token {
		t.Fatalf("token %d after the dead holder's %d", l.Token(), token)
	}
	if err := l.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}

func TestLossSignalled(t *testing.T) { conformance.LossSignalled(t) }

// TestLossBeforeOthersAcquire: with Redis paused past the lease, the
// holder is told of the loss before any other client can take the lock.
func TestLossBeforeOthersAcquire(t *testing.T) {
	srv := redistest.Standalone(t)
	const timeout = 400 * time.Millisecond
	c := testkit.Deployment{Addr: srv.Addr}.Open(t, relock.WithWatchdogTimeout(timeout))
	other := testkit.Deployment{Addr: srv.Addr}.Open(t)
	name := testkit.LockName(t)
	ctx := testkit.CtxTimeout(t, 20*time.Second)
	l, err := c.Mutex(name).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Pause(); err != nil {
		t.Fatal(err)
	}
	var lostFirst atomic.Bool
	acquired := make(chan *relock.Lease, 1)
	go func() {
		nl, err := other.Mutex(name).Lock(ctx)
		if err != nil {
			t.Error(err)
		}
		lostFirst.Store(l.Err() != nil)
		acquired <- nl
	}()
	testkit.WaitDone(t, l, 5*time.Second) // while Redis is still paused
	if !errors.Is(l.Err(), relock.ErrLockLost) {
		t.Fatalf("Err = %v, want ErrLockLost", l.Err())
	}
	// Past the server-side expiry too, then wake the server up.
	time.Sleep(timeout)
	if err := srv.Resume(); err != nil {
		t.Fatal(err)
	}
	nl := <-acquired
	if nl == nil {
		t.Fatal("other client did not acquire")
	}
	if !lostFirst.Load() {
		t.Fatal("another client acquired before the holder saw the loss")
	}
	if err := nl.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}

func TestWaiterWokenByRelease(t *testing.T) { conformance.WaiterWokenByRelease(t) }

func TestCancelledWaiterLeavesNothing(t *testing.T) { conformance.CancelledWaiterLeavesNothing(t) }

func TestRedisRestarted(t *testing.T) { conformance.RedisRestarted(t) }

// TestLostReplyIsUndone: an acquisition applied by Redis whose reply is
// lost is undone, so nothing stays locked behind a failed Lock.
func TestLostReplyIsUndone(t *testing.T) {
	for _, reentrant := range []bool{false, true} {
		t.Run(fmt.Sprintf("reentrant=%v", reentrant), func(t *testing.T) {
			rdb := testkit.CloseLater(t, testkit.Standalone.Client())
			drop := &testkit.DropReply{Script: "lock.lua"}
			rdb.AddHook(drop)
			c := testkit.NewClient(t, rdb)
			m := c.Mutex(testkit.LockName(t))
			ctx := testkit.CtxTimeout(t, 10*time.Second)
			if reentrant {
				ctx = relock.WithOwner(ctx)
				l, err := m.Lock(ctx) // an existing hold the undo must keep
				if err != nil {
					t.Fatal(err)
				}
				defer func() { _ = l.Unlock(ctx) }()
			}
			drop.Armed.Store(true)
			_, err := m.Lock(ctx)
			if !errors.Is(err, testkit.ErrDropped) {
				t.Fatalf("Lock = %v, want the dropped reply's error", err)
			}
			if drop.Dropped.Load() != 1 {
				t.Fatal("the reply was not dropped")
			}
			n := testkit.HoldCount(t, rdb, m.Name())
			if want := map[bool]int{false: 0, true: 1}[reentrant]; n != want {
				t.Fatalf("hold count %d after an undone acquisition, want %d", n, want)
			}
		})
	}
}

// TestRetriedUnlockAppliedOnce: a release whose reply was lost and that is
// retried never releases another hold of the same owner.
func TestRetriedUnlockAppliedOnce(t *testing.T) {
	rdb := testkit.CloseLater(t, testkit.Standalone.Client())
	drop := &testkit.DropReply{Script: "unlock.lua"}
	rdb.AddHook(drop)
	c := testkit.NewClient(t, rdb)
	m := c.Mutex(testkit.LockName(t))
	ctx := relock.WithOwner(testkit.CtxTimeout(t, 10*time.Second))
	a, err := m.Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	b, err := m.Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	drop.Armed.Store(true)
	if err := b.Unlock(ctx); !errors.Is(err, testkit.ErrDropped) {
		t.Fatalf("Unlock = %v, want the dropped reply's error", err)
	}
	if err := b.Unlock(ctx); err != nil { // the retry: applied already
		t.Fatalf("retried Unlock: %v", err)
	}
	if n := testkit.HoldCount(t, rdb, m.Name()); n != 1 {
		t.Fatalf("hold count %d after a retried release, want 1", n)
	}
	if err := a.Err(); err != nil {
		t.Fatalf("the other hold was disturbed: %v", err)
	}
	if err := a.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	// A one-shot owner's retried release after a lost reply succeeds too.
	l, err := m.Lock(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	drop.Armed.Store(true)
	if err := l.Unlock(ctx); !errors.Is(err, testkit.ErrDropped) {
		t.Fatalf("Unlock = %v", err)
	}
	if err := l.Unlock(ctx); err != nil {
		t.Fatalf("retried one-shot Unlock: %v", err)
	}
	if !errors.Is(l.Err(), relock.ErrReleased) {
		t.Fatalf("Err = %v, want ErrReleased", l.Err())
	}
}
