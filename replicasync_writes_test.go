package relock_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/internal/scripts"
	"github.com/relock-go/relock/internal/testkit"
)

// TestReplicaSyncLostWriteReply: a synced write whose reply is lost is run
// again with its request marker, followed by PEXPIRE of the marker and a
// WAIT in one pipeline, and is applied once. With the replica stopped, the
// WAIT after the call run again falls short although that call found the
// first one applied: the change is reported as not confirmed.
func TestReplicaSyncLostWriteReply(t *testing.T) {
	t.Parallel()
	r := redistest.NewReplicated(t, 1)
	rsWaitOnline(t, r.Master, 1)
	ctx := testkit.CtxTimeout(t, time.Minute)
	master := testkit.CloseLater(t, r.Master.Client())
	for _, tc := range []struct {
		name   string
		script *scripts.Script
		before int // the key's value before the write
		write  func(c *relock.Client, name string) error
		want   string // the key's value after one write
	}{
		{"CountDown", scripts.LatchCountDown, 5,
			func(c *relock.Client, name string) error { return c.CountDownLatch(name).CountDown(ctx) }, "4"},
		{"Release", scripts.SemRelease, 1,
			func(c *relock.Client, name string) error { return c.Semaphore(name).Release(ctx, 2) }, "3"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var log rsLog
			drop := &rsDropPiped{script: tc.script}
			rdb := testkit.CloseLater(t, r.Master.Client())
			rdb.AddHook(log.hook(r.Master.Addr))
			rdb.AddHook(drop)
			c := testkit.NewClient(t, rdb, relock.WithReplicaSync(relock.ReplicaSync{Replicas: 1}))
			// Load the script (on a name not set: nothing to count down).
			if err := tc.write(c, testkit.LockName(t)); err != nil && !errors.Is(err, relock.ErrLatchNotSet) {
				t.Fatal(err)
			}
			for _, stopped := range []bool{false, true} {
				name := testkit.LockName(t)
				if err := master.Set(ctx, name, tc.before, 0).Err(); err != nil {
					t.Fatal(err)
				}
				if stopped {
					if err := r.Replicas[0].Pause(); err != nil {
						t.Fatal(err)
					}
				}
				log.reset()
				drop.armed.Store(true)
				err := tc.write(c, name)
				if stopped {
					rsWantApplied(t, tc.name+" with a lost reply", err)
				} else if err != nil {
					t.Fatalf("%s with a lost reply: %v, want it resolved", tc.name, err)
				}
				if drop.dropped.Swap(0) != 1 {
					t.Fatal("no reply was dropped")
				}
				if got := rsGet(t, master, name); got != tc.want {
					t.Fatalf("%q on the master after a %s whose reply was lost, want %q (applied once)", got, tc.name, tc.want)
				}
				var pipes []string
				for _, trip := range rsScriptTrips(&log, tc.script) {
					pipes = append(pipes, strings.Join(trip.names(), " "))
				}
				if len(pipes) != 2 || pipes[0] != "evalsha wait" || pipes[1] != "eval pexpire wait" {
					t.Errorf("pipelines %q, want \"evalsha wait\" then \"eval pexpire wait\"", pipes)
				}
				if stopped {
					if err := r.Replicas[0].Resume(); err != nil {
						t.Fatal(err)
					}
				}
			}
		})
	}
}

// TestReplicaSyncSynchronizersPlain: without a WAIT to send (sync off on a
// master with a replica, or on by default on a server without replicas),
// every synchronizer write is the one EVALSHA it always was.
func TestReplicaSyncSynchronizersPlain(t *testing.T) {
	t.Parallel()
	r := redistest.NewReplicated(t, 1)
	rsWaitOnline(t, r.Master, 1)
	for _, tc := range []struct {
		name string
		srv  *redistest.Server
		opts []relock.Option
	}{
		{"off", r.Master, []relock.Option{relock.WithoutReplicaSync()}},
		{"no replicas", redistest.Standalone(t), nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var log rsLog
			c := syncedClient(t, tc.srv, &log, tc.opts...)
			ctx := testkit.CtxTimeout(t, 20*time.Second)
			if tc.opts == nil { // the Client's first reads run in the background
				testkit.Eventually(t, 5*time.Second, "the first reads", func() bool { return log.count("info") == 1 && log.count("config") == 1 })
			}
			synchronizerCalls(t, ctx, c) // loads the scripts
			log.reset()
			if n := synchronizerCalls(t, ctx, c); len(log.all()) != n {
				t.Errorf("%d round trips for %d calls, want one each", len(log.all()), n)
			}
			for _, trip := range log.all() {
				if n := trip.names(); len(n) != 1 || n[0] != "evalsha" {
					t.Errorf("round trip %v, want one EVALSHA", n)
				}
			}
		})
	}
}

// synchronizerCalls makes every synchronizer write once, on fresh names,
// and returns how many calls it made.
func synchronizerCalls(t *testing.T, ctx context.Context, c *relock.Client) int {
	t.Helper()
	n := 0
	call := func(err error) {
		t.Helper()
		n++
		if err != nil {
			t.Fatal(err)
		}
	}
	s := c.Semaphore(testkit.LockName(t))
	_, err := s.TrySetPermits(ctx, 3)
	call(err)
	_, err = s.TryAcquire(ctx, 1)
	call(err)
	call(s.Release(ctx, 1))
	call(s.AddPermits(ctx, 1))
	_, err = s.Drain(ctx)
	call(err)
	ps := c.PermitSemaphore(testkit.LockName(t))
	_, err = ps.TrySetPermits(ctx, 2)
	call(err)
	p, err := ps.TryAcquire(ctx, relock.WithLease(time.Minute))
	call(err)
	call(p.UpdateLease(ctx, time.Minute))
	call(p.Release(ctx))
	q, err := ps.TryAcquire(ctx, relock.WithLease(time.Minute))
	call(err)
	call(ps.UpdateLease(ctx, q.ID(), time.Minute))
	call(ps.Release(ctx, q.ID()))
	call(ps.AddPermits(ctx, 1))
	l := c.CountDownLatch(testkit.LockName(t))
	_, err = l.TrySetCount(ctx, 1)
	call(err)
	call(l.CountDown(ctx))
	if err := l.CountDown(ctx); !errors.Is(err, relock.ErrLatchNotSet) {
		t.Fatalf("CountDown of an open latch: %v", err)
	}
	return n + 1
}

// TestReplicaSyncSynchronizersCluster: on a cluster with replicas, the
// synchronizers' writes go with their WAIT to the master of their name's
// slot.
func TestReplicaSyncSynchronizersCluster(t *testing.T) {
	t.Parallel()
	c, cc, log := clusterWithLog(t)
	ctx := testkit.CtxTimeout(t, 20*time.Second)
	s := c.Semaphore(testkit.LockName(t))
	l := c.CountDownLatch(testkit.LockName(t))
	log.reset()
	if ok, err := s.TrySetPermits(ctx, 1); !ok || err != nil {
		t.Fatalf("TrySetPermits: %v %v", ok, err)
	}
	if err := s.Acquire(ctx, 1); err != nil {
		t.Fatal(err)
	}
	if err := s.Release(ctx, 1); err != nil {
		t.Fatal(err)
	}
	if ok, err := l.TrySetCount(ctx, 1); !ok || err != nil {
		t.Fatalf("TrySetCount: %v %v", ok, err)
	}
	if err := l.CountDown(ctx); err != nil {
		t.Fatal(err)
	}
	for _, x := range []struct {
		name   string
		script *scripts.Script
	}{
		{s.Name(), scripts.SemTrySetPermits}, {s.Name(), scripts.SemAcquire}, {s.Name(), scripts.SemRelease},
		{l.Name(), scripts.LatchTrySetCount}, {l.Name(), scripts.LatchCountDown},
	} {
		slot, err := cc.ClusterKeySlot(ctx, x.name).Result()
		if err != nil {
			t.Fatal(err)
		}
		master, err := testkit.Cluster.MasterForSlot(ctx, int(slot))
		if err != nil {
			t.Fatal(err)
		}
		trips := rsScriptTrips(log, x.script)
		if len(trips) == 0 {
			t.Errorf("%s: not sent", x.script.Name())
		}
		for _, trip := range trips {
			if got := strings.Join(trip.names(), " "); got != "evalsha wait" && got != "eval wait" || trip.node != master.Addr {
				t.Errorf("%s: %q sent to %s, want \"evalsha wait\" to the slot's master %s", x.script.Name(), got, trip.node, master.Addr)
			}
		}
	}
}
