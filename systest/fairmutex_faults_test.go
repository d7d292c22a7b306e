package systest

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/scripts"
	"github.com/relock-go/relock/internal/testkit"
)

const fairHelperEnv = "RELOCK_TEST_FAIR_WAITER"

// fairHelperProcess runs in a child process of the test: it queues for the
// fair lock named by the environment, with a 300ms waiter timeout, says
// "waiting", and waits to be killed.
func fairHelperProcess() int {
	name, addrs := os.Getenv(fairHelperEnv), strings.Split(os.Getenv("RELOCK_TEST_ADDRS"), ",")
	var rdb redis.UniversalClient = redis.NewClient(&redis.Options{Addr: addrs[0]})
	if len(addrs) > 1 {
		rdb = redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs})
	}
	c, err := relock.New(rdb)
	if err != nil {
		fmt.Println("error", err)
		return 1
	}
	fmt.Println("waiting")
	_, err = c.FairMutex(name, relock.WithWaiterTimeout(300*time.Millisecond)).Lock(context.Background())
	fmt.Println("error", err)
	return 1
}

// TestFairMutexDeadWaiterSkipped: a waiter whose process is killed while
// queued is skipped once its deadline passes; the waiter behind it gets
// the lock and nothing is left.
func TestFairMutexDeadWaiterSkipped(t *testing.T) {
	testkit.ForEach(t, func(t *testing.T, top testkit.Topology) {
		rdb := top.RDB(t)
		a, b := top.NewClient(t), top.NewClient(t)
		name := testkit.LockName(t)
		ctx := testkit.CtxTimeout(t, 20*time.Second)
		holder, err := a.FairMutex(name).Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		addrs := testkit.Standalone.Addr
		if top.Name == "cluster" {
			addrs = strings.Join(testkit.Cluster.Addrs(), ",")
		}
		cmd := childCommand("fair-holder", fairHelperEnv+"="+name, "RELOCK_TEST_ADDRS="+addrs)
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
		if line, err := bufio.NewReader(out).ReadString('\n'); err != nil || line != "waiting\n" {
			t.Fatalf("waiter process said %q, %v", line, err)
		}
		testkit.WaitQueued(t, rdb, name, 1)
		dead := testkit.Queued(t, rdb, name)[0]
		got := make(chan *relock.Lease, 1)
		go func() {
			l, err := b.FairMutex(name, relock.WithWaiterTimeout(300*time.Millisecond)).Lock(ctx)
			if err != nil {
				t.Error(err)
			}
			got <- l
		}()
		testkit.WaitQueued(t, rdb, name, 2)
		if err := cmd.Process.Kill(); err != nil {
			t.Fatal(err)
		}
		_ = cmd.Wait()
		if err := holder.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		l := <-got
		if l == nil {
			t.FailNow()
		}
		if q := testkit.Queued(t, rdb, name); testkit.Contains(q, dead) {
			t.Fatalf("dead waiter still queued: %v", q)
		}
		if err := l.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		testkit.NoKeysLeft(t, rdb, name)
	})
}

// fairDrop is a go-redis hook that, once armed, lets one run of a script
// reach the server and then reports a transport error instead of its reply.
type fairDrop struct {
	script atomic.Pointer[scripts.Script]
	armed  atomic.Bool
}

func (d *fairDrop) DialHook(next redis.DialHook) redis.DialHook { return next }
func (d *fairDrop) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}
func (d *fairDrop) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		args := cmd.Args()
		s := d.script.Load()
		if err == nil && len(args) > 1 && (args[1] == s.SHA() || args[1] == s.Source()) && d.armed.CompareAndSwap(true, false) {
			cmd.SetErr(testkit.ErrDropped)
			return testkit.ErrDropped
		}
		return err
	}
}

// TestFairMutexLostReply: an attempt applied by Redis whose reply is lost
// is undone, whether it took the lock or joined the queue; a release that
// passed the lock on and lost its reply still lets the waiter have it.
func TestFairMutexLostReply(t *testing.T) {
	testkit.ForEach(t, func(t *testing.T, top testkit.Topology) {
		rdb := top.RDB(t)
		drop := &fairDrop{}
		drop.script.Store(scripts.FairLock)
		rdb.AddHook(drop)
		// Without replica sync: with it, the acquisitions go through the
		// cluster's node clients, which the hook does not see.
		c, other := testkit.NewClient(t, rdb, relock.WithoutReplicaSync()), top.NewClient(t)
		name := testkit.LockName(t)
		ctx := testkit.CtxTimeout(t, 10*time.Second)

		drop.armed.Store(true)
		if _, err := c.FairMutex(name).Lock(ctx); !errors.Is(err, testkit.ErrDropped) {
			t.Fatalf("Lock = %v, want the dropped reply's error", err)
		}
		testkit.NoKeysLeft(t, rdb, name) // the hold was undone

		held, err := other.FairMutex(name).Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		drop.armed.Store(true)
		if _, err := c.FairMutex(name).Lock(ctx); !errors.Is(err, testkit.ErrDropped) {
			t.Fatalf("Lock = %v, want the dropped reply's error", err)
		}
		if q := testkit.Queued(t, rdb, name); len(q) != 0 {
			t.Fatalf("queue %v after an undone attempt", q)
		}
		if err := held.Unlock(ctx); err != nil {
			t.Fatal(err)
		}

		// A handoff to a waiter of the same Client whose reply is lost.
		drop.script.Store(scripts.FairUnlock)
		l, err := c.FairMutex(name).Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		got := make(chan *relock.Lease, 1)
		go func() {
			l, err := c.FairMutex(name).Lock(ctx)
			if err != nil {
				t.Error(err)
			}
			got <- l
		}()
		testkit.WaitQueued(t, rdb, name, 1)
		testkit.Eventually(t, 5*time.Second, "the waiter to sleep", func() bool { return c.Stats().Asleep == 1 })
		drop.armed.Store(true)
		if err := l.Unlock(ctx); !errors.Is(err, testkit.ErrDropped) {
			t.Fatalf("Unlock = %v, want the dropped reply's error", err)
		}
		next := <-got
		if next == nil {
			t.FailNow()
		}
		if err := l.Unlock(ctx); err != nil {
			t.Fatalf("retried Unlock: %v", err)
		}
		if err := next.Err(); err != nil {
			t.Fatalf("the waiter's hold: %v", err)
		}
		if err := next.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		testkit.NoKeysLeft(t, rdb, name)
	})
}

// TestFairMutexClose: a waiter of a Client being closed returns ErrClosed
// and leaves the queue.
func TestFairMutexClose(t *testing.T) {
	testkit.ForEach(t, func(t *testing.T, top testkit.Topology) {
		rdb := top.RDB(t)
		a, b := top.NewClient(t), top.NewClient(t)
		name := testkit.LockName(t)
		ctx := testkit.CtxTimeout(t, 10*time.Second)
		held, err := a.FairMutex(name).Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		errc := make(chan error, 1)
		go func() {
			_, err := b.FairMutex(name).Lock(ctx)
			errc <- err
		}()
		testkit.WaitQueued(t, rdb, name, 1)
		_ = b.Close()
		if err := <-errc; !errors.Is(err, relock.ErrClosed) {
			t.Fatalf("Lock during Close: %v", err)
		}
		if q := testkit.Queued(t, rdb, name); len(q) != 0 {
			t.Fatalf("queue %v after Close", q)
		}
		if err := held.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		testkit.NoKeysLeft(t, rdb, name)
	})
}
