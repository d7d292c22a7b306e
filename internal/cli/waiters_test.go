package cli

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/layout"
	"github.com/relock-go/relock/internal/redistest"
)

// TestRunHolderIsNoWaiter: a lock held by relock run, which listens to the
// lock's release channel to notice a force-unlock at once, shows 0
// waiters in show, show --json and ls --json while nobody waits; a process
// that listens on the channel as Redisson's waiters do and a relock call
// in the lock's queue are counted as before.
func TestRunHolderIsNoWaiter(t *testing.T) {
	needCommand(t, "sh")
	srv, url := realServer(t)
	const name = "jobs:nightly"
	p := startRelock(t, append([]string{"run", "--redis", url, name, "--"}, holdingCommand...)...)
	p.childPID(t) // the command runs: relock holds the lock and watches its channel
	until(t, "relock run watching the release channel", subscribed(layout.Companion(layout.LockChannel, name)), srv)

	waitersAre := func(want int64) {
		t.Helper()
		r := relockCmd(t, "show", "--redis", url, name)
		if !strings.Contains(strings.Join(strings.Fields(r.stdout), " "), "waiters "+strconv.FormatInt(want, 10)+" (") {
			t.Errorf("show: want waiters %d:\n%s", want, r.stdout)
		}
		r = relockCmd(t, "show", "--redis", url, "--json", name)
		var s shown
		if err := json.Unmarshal([]byte(r.stdout), &s); err != nil || s.Waiters != want || len(s.Holders) != 1 {
			t.Errorf("show --json: waiters %d, holders %d (%v); want %d waiters and the holder", s.Waiters, len(s.Holders), err, want)
		}
		r = relockCmd(t, "ls", "--redis", url, "--json")
		var l listing
		if err := json.Unmarshal([]byte(r.stdout), &l); err != nil || len(l.Locks) != 1 || l.Locks[0].Waiting != want {
			t.Errorf("ls --json: %+v (%v); want %s with %d waiting", l.Locks, err, name, want)
		}
	}
	waitersAre(0)

	ctx := context.Background()
	rdb := srv.Client()
	defer rdb.Close()
	sub := rdb.Subscribe(ctx, layout.Companion(layout.LockChannel, name)) // a Redisson waiter's subscription
	defer sub.Close()
	if _, err := sub.Receive(ctx); err != nil {
		t.Fatal(err)
	}
	waitersAre(1)

	c := realClient(t, srv)
	startWaiter(t, func(ctx context.Context) (*relock.Lease, error) { return c.Mutex(name).Lock(ctx) })
	until(t, "relock call queued", func(ctx context.Context, rdb *redis.Client) bool {
		return rdb.ZCard(ctx, layout.Companion(layout.LockQueue, name)).Val() == 1
	}, srv)
	waitersAre(2)
}

// TestHolderWatchNotCountedOnCluster: on a cluster, where the holder's
// watch subscribes by SSUBSCRIBE, it is not counted either, and a sharded
// subscriber of the release channel is.
func TestHolderWatchNotCountedOnCluster(t *testing.T) {
	cl := redistest.NewCluster(t, 3, 0)
	cc := cl.Client()
	defer cc.Close()
	ctx := context.Background()
	c, err := relock.New(cc)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	const name = "jobs:nightly"
	l, err := c.Mutex(name).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Unlock(ctx)
	stop := watchRelease(ctx, cc, l)
	defer stop()
	if n, err := subscribers(ctx, cc, layout.Companion(layout.LockChannel, name)); err != nil || n != 1 {
		t.Fatalf("the watch is not subscribed to the release channel: %d, %v", n, err)
	}
	if n, what, err := waiters(ctx, cc, name, kindLock); err != nil || n != 0 {
		t.Errorf("waiters %d (%s), %v; want 0", n, what, err)
	}
	sub := cc.SSubscribe(ctx, layout.Companion(layout.LockChannel, name))
	defer sub.Close()
	if _, err := sub.Receive(ctx); err != nil {
		t.Fatal(err)
	}
	if n, what, err := waiters(ctx, cc, name, kindLock); err != nil || n != 1 {
		t.Errorf("with a sharded subscriber: waiters %d (%s), %v; want 1", n, what, err)
	}
}
