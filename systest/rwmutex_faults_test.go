package systest

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/testkit"
)

const rwReaderEnv = "RELOCK_TEST_RW_READER"

// rwReaderProcess takes the read lock named by the environment with a
// watchdog lease, says "held", and waits to be killed.
func rwReaderProcess() int {
	timeout, _ := time.ParseDuration(os.Getenv("RELOCK_TEST_WATCHDOG"))
	rdb := redis.NewClient(&redis.Options{Addr: os.Getenv("RELOCK_TEST_ADDR")})
	c, err := relock.New(rdb, relock.WithWatchdogTimeout(timeout))
	if err != nil {
		fmt.Println("error", err)
		return 1
	}
	if _, err := c.RWMutex(os.Getenv(rwReaderEnv)).RLock(context.Background()); err != nil {
		fmt.Println("error", err)
		return 1
	}
	fmt.Println("held")
	select {}
}

// expiresAlone checks, with the dead reader's field known, that its hold
// key expires while the live reader keeps its hold and the writer waits,
// and that the writer gets the lock once the live reader leaves.
func rwExpiresAlone(t *testing.T, rdb redis.UniversalClient, writer *relock.Client, name, dead string, live *relock.Lease, timeout time.Duration) {
	t.Helper()
	ctx := testkit.CtxTimeout(t, 20*time.Second)
	testkit.Eventually(t, 10*time.Second, "the dead reader's hold to expire", func() bool {
		return rdb.Exists(ctx, testkit.RWHoldKey(name, dead, 1)).Val() == 0
	})
	got := make(chan *relock.Lease, 1)
	go func() {
		l, err := writer.RWMutex(name).Lock(ctx)
		if err != nil {
			t.Error(err)
		}
		got <- l
	}()
	testkit.Eventually(t, 5*time.Second, "the writer to wait", func() bool { return writer.Stats().Asleep == 1 })
	// Several renewals of the live reader later, it still holds and the
	// writer still waits.
	time.Sleep(2 * timeout) // the passing of time is what is tested
	if err := live.Err(); err != nil {
		t.Fatalf("live reader lost its hold: %v", err)
	}
	select {
	case <-got:
		t.Fatal("writer acquired beside a live reader")
	default:
	}
	if ttl := rdb.PTTL(ctx, name).Val(); ttl <= 0 {
		t.Fatalf("lock TTL %v while a reader holds", ttl)
	}
	testkit.RWUnlockAll(t, ctx, live)
	wl := <-got
	if wl == nil {
		t.FailNow()
	}
	if f := testkit.RWReaders(t, rdb, name); len(f) != 0 {
		t.Fatalf("reader fields %v left under the writer", f)
	}
	testkit.RWUnlockAll(t, ctx, wl)
}

// TestRWMutexDeadReaderExpiresAlone: a reader whose fixed lease runs out
// loses its hold alone; the watchdog-kept reader beside it keeps its own.
func TestRWMutexDeadReaderExpiresAlone(t *testing.T) {
	testkit.ForEach(t, func(t *testing.T, top testkit.Topology) {
		// A renewal every third of it: a second leaves a loaded machine
		// room for a late round without the live reader losing its hold.
		const timeout = time.Second
		c := top.NewClient(t, relock.WithWatchdogTimeout(timeout))
		writer := top.NewClient(t)
		rdb := top.RDB(t)
		name := testkit.LockName(t)
		ctx := testkit.CtxTimeout(t, 20*time.Second)
		short := testkit.RWMust(t)(c.RWMutex(name).RLock(ctx, relock.WithLease(150*time.Millisecond)))
		dead := testkit.RWReaders(t, rdb, name)
		live := testkit.RWMust(t)(c.RWMutex(name).RLock(ctx))
		testkit.WaitDone(t, short, 5*time.Second)
		if !errors.Is(short.Err(), relock.ErrLockLost) {
			t.Fatalf("short reader Err = %v", short.Err())
		}
		rwExpiresAlone(t, rdb, writer, name, dead[0], live, timeout)
	})
}

// TestRWMutexReaderKilled: a reader process killed with SIGKILL loses its
// hold within the watchdog timeout, while a reader of another process
// keeps its own.
func TestRWMutexReaderKilled(t *testing.T) {
	const timeout = 500 * time.Millisecond
	name := testkit.LockName(t)
	rdb := testkit.CloseLater(t, testkit.Standalone.Client())
	cmd := childCommand("rw-reader", rwReaderEnv+"="+name, "RELOCK_TEST_ADDR="+testkit.Standalone.Addr,
		"RELOCK_TEST_WATCHDOG="+timeout.String())
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	if line, err := bufio.NewReader(out).ReadString('\n'); err != nil || line != "held\n" {
		t.Fatalf("reader process said %q, %v", line, err)
	}
	dead := testkit.RWReaders(t, rdb, name)
	c := testkit.Topologies()[0].NewClient(t, relock.WithWatchdogTimeout(timeout))
	ctx := testkit.CtxTimeout(t, 20*time.Second)
	live := testkit.RWMust(t)(c.RWMutex(name).RLock(ctx))
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	rwExpiresAlone(t, rdb, testkit.Topologies()[0].NewClient(t), name, dead[0], live, timeout)
}

// TestRWMutexLostReplyIsUndone: an acquisition of either side applied by
// Redis whose reply is lost is undone, keeping the owner's earlier holds.
func TestRWMutexLostReplyIsUndone(t *testing.T) {
	for _, write := range []bool{false, true} {
		for _, reentrant := range []bool{false, true} {
			t.Run(fmt.Sprintf("write=%v/reentrant=%v", write, reentrant), func(t *testing.T) {
				script := map[bool]string{false: "rw_read_lock.lua", true: "rw_write_lock.lua"}[write]
				rdb := testkit.CloseLater(t, testkit.Standalone.Client())
				drop := &testkit.DropReply{Script: script}
				rdb.AddHook(drop)
				c := testkit.NewClient(t, rdb)
				rw := c.RWMutex(testkit.LockName(t))
				lock := map[bool]func(context.Context, ...relock.LockOption) (*relock.Lease, error){false: rw.RLock, true: rw.Lock}[write]
				ctx := testkit.CtxTimeout(t, 10*time.Second)
				if reentrant {
					ctx = relock.WithOwner(ctx)
					l := testkit.RWMust(t)(lock(ctx)) // an existing hold the undo must keep
					defer testkit.RWUnlockAll(t, ctx, l)
				}
				drop.Armed.Store(true)
				if _, err := lock(ctx); !errors.Is(err, testkit.ErrDropped) {
					t.Fatalf("lock = %v, want the dropped reply's error", err)
				}
				if drop.Dropped.Load() != 1 {
					t.Fatal("the reply was not dropped")
				}
				want := map[bool]int{false: 0, true: 1}[reentrant]
				if n := testkit.HoldCount(t, rdb, rw.Name()); n != want {
					t.Fatalf("hold count %d after an undone acquisition, want %d", n, want)
				}
				if !write && reentrant {
					owner := testkit.RWReaders(t, rdb, rw.Name())[0]
					if n := rdb.Exists(ctx, testkit.RWHoldKey(rw.Name(), owner, 1)).Val(); n != 1 {
						t.Fatal("the earlier hold's key was removed")
					}
					if n := rdb.Exists(ctx, testkit.RWHoldKey(rw.Name(), owner, 2)).Val(); n != 0 {
						t.Fatal("the undone hold's key is left")
					}
				}
				if !reentrant {
					if keys := testkit.KeysOf(t, rdb, rw.Name()); len(keys) > 0 {
						t.Fatalf("keys left after the undo: %v", keys)
					}
				}
				if s := c.Stats(); s.Held != want {
					t.Fatalf("%d holds watched, want %d", s.Held, want)
				}
			})
		}
	}
}

// TestRWMutexRetriedUnlockAppliedOnce: a release of either side whose
// reply was lost, retried, never releases another hold of the owner.
func TestRWMutexRetriedUnlockAppliedOnce(t *testing.T) {
	for _, write := range []bool{false, true} {
		t.Run(fmt.Sprintf("write=%v", write), func(t *testing.T) {
			script := map[bool]string{false: "rw_read_unlock.lua", true: "rw_write_unlock.lua"}[write]
			rdb := testkit.CloseLater(t, testkit.Standalone.Client())
			drop := &testkit.DropReply{Script: script}
			rdb.AddHook(drop)
			rw := testkit.NewClient(t, rdb).RWMutex(testkit.LockName(t))
			lock := map[bool]func(context.Context, ...relock.LockOption) (*relock.Lease, error){false: rw.RLock, true: rw.Lock}[write]
			ctx := relock.WithOwner(testkit.CtxTimeout(t, 10*time.Second))
			a, b := testkit.RWMust(t)(lock(ctx)), testkit.RWMust(t)(lock(ctx))
			drop.Armed.Store(true)
			if err := b.Unlock(ctx); !errors.Is(err, testkit.ErrDropped) {
				t.Fatalf("Unlock = %v, want the dropped reply's error", err)
			}
			if err := b.Unlock(ctx); err != nil {
				t.Fatalf("retried Unlock: %v", err)
			}
			if n := testkit.HoldCount(t, rdb, rw.Name()); n != 1 {
				t.Fatalf("hold count %d after a retried release, want 1", n)
			}
			if err := a.Err(); err != nil {
				t.Fatalf("the other hold was disturbed: %v", err)
			}
			testkit.RWUnlockAll(t, ctx, a)
			// A one-shot lease's retried release after a lost reply
			// succeeds too.
			l := testkit.RWMust(t)(lock(context.Background()))
			drop.Armed.Store(true)
			if err := l.Unlock(ctx); !errors.Is(err, testkit.ErrDropped) {
				t.Fatalf("Unlock = %v", err)
			}
			if err := l.Unlock(ctx); err != nil {
				t.Fatalf("retried one-shot Unlock: %v", err)
			}
			if locked, _ := rw.IsLocked(ctx); locked {
				t.Fatal("still locked")
			}
		})
	}
}
