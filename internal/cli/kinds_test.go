package cli

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/layout"
	"github.com/relock-go/relock/internal/redistest"
)

// waiter is a lock call blocked in the background for a test.
type waiter struct {
	cancel context.CancelFunc
	done   chan error
}

// startWaiter runs lock in the background until it returns or the test
// ends; a lease it gets is unlocked.
func startWaiter(t *testing.T, lock func(ctx context.Context) (*relock.Lease, error)) *waiter {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	w := &waiter{cancel: cancel, done: make(chan error, 1)}
	go func() {
		l, err := lock(ctx)
		if err == nil {
			err = l.Unlock(context.Background())
		}
		w.done <- err
	}()
	t.Cleanup(func() {
		cancel()
		<-w.done
	})
	return w
}

// startCall runs a blocking call in the background until it returns or
// the test ends.
func startCall(t *testing.T, call func(ctx context.Context) error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = call(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
}

// until polls cond (a Redis read) until it holds; the test fails at
// processDeadline.
func until(t *testing.T, what string, cond func(ctx context.Context, rdb *redis.Client) bool, srv *redistest.Server) {
	t.Helper()
	rdb := srv.Client()
	defer rdb.Close()
	ctx, cancel := context.WithTimeout(context.Background(), processDeadline)
	defer cancel()
	for !cond(ctx, rdb) {
		if ctx.Err() != nil {
			t.Fatalf("%s: not within %v", what, processDeadline)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func queued(name string, n int64) func(ctx context.Context, rdb *redis.Client) bool {
	return func(ctx context.Context, rdb *redis.Client) bool {
		return rdb.LLen(ctx, layout.Companion(layout.FairQueue, name)).Val() == n
	}
}

func subscribed(channel string) func(ctx context.Context, rdb *redis.Client) bool {
	return func(ctx context.Context, rdb *redis.Client) bool {
		return rdb.PubSubNumSub(ctx, channel).Val()[channel] > 0
	}
}

// subscribedLike reports whether a channel matching pattern has a
// subscriber: a fair waiter listens on a channel named after its owner.
func subscribedLike(pattern string) func(ctx context.Context, rdb *redis.Client) bool {
	return func(ctx context.Context, rdb *redis.Client) bool {
		return len(rdb.PubSubChannels(ctx, pattern).Val()) > 0
	}
}

func both(a, b func(ctx context.Context, rdb *redis.Client) bool) func(ctx context.Context, rdb *redis.Client) bool {
	return func(ctx context.Context, rdb *redis.Client) bool { return a(ctx, rdb) && b(ctx, rdb) }
}

// TestKindsShownAndCounted: ls, show and the web view name a fair lock
// with owners queued as fair and count its queue, count the writer
// waiting for a read-write lock on the channel it listens to (show lists
// it from the lock's queue), and the call waiting for a lock in the
// lock's queue.
func TestKindsShownAndCounted(t *testing.T) {
	srv, url := realServer(t)
	ctx := context.Background()
	holder, c2, c3 := realClient(t, srv), realClient(t, srv), realClient(t, srv)

	if _, err := holder.FairMutex("fair").Lock(ctx); err != nil {
		t.Fatal(err)
	}
	startWaiter(t, func(ctx context.Context) (*relock.Lease, error) { return c2.FairMutex("fair").Lock(ctx) })
	until(t, "first fair waiter queued", queued("fair", 1), srv)
	startWaiter(t, func(ctx context.Context) (*relock.Lease, error) { return c3.FairMutex("fair").Lock(ctx) })
	until(t, "second fair waiter queued", queued("fair", 2), srv)

	if _, err := holder.RWMutex("rw").RLock(ctx); err != nil {
		t.Fatal(err)
	}
	startWaiter(t, func(ctx context.Context) (*relock.Lease, error) { return c2.RWMutex("rw").Lock(ctx) })
	until(t, "writer waiting", both(subscribed(layout.Companion(layout.RWChannel, "rw")), func(ctx context.Context, rdb *redis.Client) bool {
		return rdb.ZCard(ctx, layout.Companion(layout.RWQueue, "rw")).Val() == 1
	}), srv)

	if _, err := holder.Mutex("plain").Lock(ctx); err != nil {
		t.Fatal(err)
	}
	startWaiter(t, func(ctx context.Context) (*relock.Lease, error) { return c3.Mutex("plain").Lock(ctx) })
	until(t, "lock waiter queued", func(ctx context.Context, rdb *redis.Client) bool {
		return rdb.ZCard(ctx, layout.Companion(layout.LockQueue, "plain")).Val() == 1
	}, srv)

	r := relockCmd(t, "ls", "--redis", url)
	kinds := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(r.stdout), "\n")[1:] {
		f := strings.Fields(line)
		kinds[f[0]] = f[1]
	}
	if kinds["fair"] != kindFair || kinds["rw"] != kindRead || kinds["plain"] != kindLock {
		t.Errorf("ls kinds %v, want fair fair, rw read, plain lock", kinds)
	}

	for _, tc := range []struct{ name, state, waiters string }{
		{"fair", "held (fair lock)", "waiters 2 (owners queued in redisson_lock_queue:{fair})"},
		{"rw", "held (read-write lock, read mode)", "waiters 1 (subscribers of redisson_rwlock:{rw})"},
		{"plain", "held", "waiters 1 (calls queued in relock_lock_queue:{plain} and subscribers of redisson_lock__channel:{plain} but not of relock_watch:{plain} (the holder's watch))"},
	} {
		r := relockCmd(t, "show", "--redis", url, tc.name)
		lines := map[string]bool{}
		for _, line := range strings.Split(r.stdout, "\n") {
			lines[strings.Join(strings.Fields(line), " ")] = true
		}
		if r.code != exitOK || !lines["state "+tc.state] || !lines[tc.waiters] {
			t.Errorf("show %s: exit %d, stdout:\n%s\nwant state %q and %q", tc.name, r.code, r.stdout, tc.state, tc.waiters)
		}
		// The relock calls in a queue are listed in order, a read-write
		// lock's with the mode they wait for.
		if tc.name == "rw" && !strings.Contains(r.stdout, "to write)") {
			t.Errorf("show rw does not list the queued writer:\n%s", r.stdout)
		}
	}

	web := webServer(t, srv.Addr)
	code, body := get(t, web.URL+"/locks.json")
	if code != http.StatusOK {
		t.Fatalf("GET /locks.json: %d %s", code, body)
	}
	var p listing
	if err := json.Unmarshal([]byte(body), &p); err != nil {
		t.Fatal(err)
	}
	got := map[string]lockRow{}
	for _, l := range p.Locks {
		got[l.Name] = l
	}
	if l := got["fair"]; l.Kind != kindFair || l.Waiting != 2 {
		t.Errorf("web shows fair as %q with %d waiting, want fair with 2", l.Kind, l.Waiting)
	}
	if l := got["rw"]; l.Kind != kindRead || l.Waiting != 1 {
		t.Errorf("web shows rw as %q with %d waiting, want read with 1", l.Kind, l.Waiting)
	}
}

// TestUnlockForceByKind: unlock --force acts by the lock's kind: a
// read-write lock's waiting writer and a fair lock's first queued owner
// are woken by the message their kind listens for (counted in
// Stats.Wakeups), not left to find out at their next timer, and a
// read-write lock's reader hold keys go with it.
func TestUnlockForceByKind(t *testing.T) {
	srv, url := realServer(t)
	ctx := context.Background()
	holder := realClient(t, srv)
	for _, tc := range []struct {
		name, kind string
		hold       func() error
		wait       func(c *relock.Client) func(ctx context.Context) (*relock.Lease, error)
		waiting    func(ctx context.Context, rdb *redis.Client) bool
	}{
		{"rw", "read-write lock",
			func() error { _, err := holder.RWMutex("rw").RLock(ctx); return err },
			func(c *relock.Client) func(ctx context.Context) (*relock.Lease, error) {
				return func(ctx context.Context) (*relock.Lease, error) { return c.RWMutex("rw").Lock(ctx) }
			},
			subscribed(layout.Companion(layout.RWChannel, "rw"))},
		{"fair", "fair lock",
			func() error { _, err := holder.FairMutex("fair").Lock(ctx); return err },
			func(c *relock.Client) func(ctx context.Context) (*relock.Lease, error) {
				return func(ctx context.Context) (*relock.Lease, error) { return c.FairMutex("fair").Lock(ctx) }
			},
			both(queued("fair", 1), subscribedLike(layout.Pattern(layout.GrantChannel)))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.hold(); err != nil {
				t.Fatal(err)
			}
			c := realClient(t, srv)
			w := startWaiter(t, tc.wait(c))
			until(t, "waiter waiting", tc.waiting, srv)
			before := c.Stats().Wakeups
			r := relockCmd(t, "unlock", "--force", "--redis", url, tc.name)
			if r.code != exitOK || !strings.Contains(r.stdout, "force-unlocked ("+tc.kind+")") {
				t.Errorf("exit %d, stdout %q; want force-unlocked (%s)", r.code, r.stdout, tc.kind)
			}
			if err := <-w.done; err != nil {
				t.Fatalf("the waiter did not get the lock: %v", err)
			}
			w.done <- nil // for the cleanup
			if c.Stats().Wakeups == before {
				t.Errorf("the waiter was not woken by a release message")
			}
			rdb := srv.Client()
			defer rdb.Close()
			if keys := rdb.Keys(ctx, "*"+layout.ReaderHoldInfix+"*").Val(); len(keys) > 0 {
				t.Errorf("reader hold keys left: %v", keys)
			}
		})
	}
}

// TestShowEveryPrimitive: show tells a permit semaphore (available
// permits, each held permit with its expiry), a semaphore and a latch
// apart by who waits on their channels, and lists a fair lock's queue in
// order with each waiter's Client, in text and JSON.
func TestShowEveryPrimitive(t *testing.T) {
	srv, url := realServer(t)
	ctx := context.Background()
	c, c2 := realClient(t, srv), realClient(t, srv)

	ps := c.PermitSemaphore("permits")
	if ok, err := ps.TrySetPermits(ctx, 2); !ok || err != nil {
		t.Fatalf("TrySetPermits: %v %v", ok, err)
	}
	p, err := ps.Acquire(ctx, relock.WithLease(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	full := c.PermitSemaphore("full")
	if ok, err := full.TrySetPermits(ctx, 1); !ok || err != nil {
		t.Fatalf("TrySetPermits: %v %v", ok, err)
	}
	if _, err := full.Acquire(ctx); err != nil {
		t.Fatal(err)
	}
	startCall(t, func(ctx context.Context) error { _, err := c2.PermitSemaphore("full").Acquire(ctx); return err })
	until(t, "permit waiter queued", func(ctx context.Context, rdb *redis.Client) bool {
		return rdb.ZCard(ctx, layout.Companion(layout.PermitQueue, "full")).Val() == 1
	}, srv)
	sem := c.Semaphore("sem")
	if ok, err := sem.TrySetPermits(ctx, 1); !ok || err != nil {
		t.Fatalf("sem TrySetPermits: %v %v", ok, err)
	}
	if err := sem.Acquire(ctx, 1); err != nil {
		t.Fatal(err)
	}
	startCall(t, func(ctx context.Context) error { return c2.Semaphore("sem").Acquire(ctx, 1) })
	until(t, "semaphore waiter", subscribed(layout.Companion(layout.SemaphoreChannel, "sem")), srv)
	latch := c.CountDownLatch("latch")
	if ok, err := latch.TrySetCount(ctx, 2); !ok || err != nil {
		t.Fatalf("TrySetCount: %v %v", ok, err)
	}
	startCall(t, func(ctx context.Context) error { return c2.CountDownLatch("latch").Await(ctx) })
	until(t, "latch awaiter", subscribed(layout.LatchChannel("latch", false)), srv)
	if _, err := c.FairMutex("fair").Lock(ctx); err != nil {
		t.Fatal(err)
	}
	startWaiter(t, func(ctx context.Context) (*relock.Lease, error) { return c2.FairMutex("fair").Lock(ctx) })
	until(t, "fair waiter queued", queued("fair", 1), srv)
	host, _ := os.Hostname()
	pid := strconv.Itoa(os.Getpid())

	for _, tc := range []struct {
		name string
		want []string
	}{
		{"permits", []string{"kind permit-semaphore", "available 1", "held 1", "permit " + p.ID() + " " + host + " pid " + pid + " ", ", expires in "}},
		{"full", []string{"kind permit-semaphore", "available 0", "held 1", "queued 1", "waiting for"}},
		{"sem", []string{"kind semaphore", "available 0", "waiters 1"}},
		{"latch", []string{"kind latch", "count 2", "waiters 1"}},
		{"fair", []string{"held (fair lock)", "queued 1", " pid ", "keeps its place for"}},
	} {
		r := relockCmd(t, "show", "--redis", url, tc.name)
		if r.code != exitOK {
			t.Fatalf("show %s: exit %d", tc.name, r.code)
		}
		out := strings.Join(strings.Fields(r.stdout), " ") // columns padded as tabwriter likes
		for _, w := range tc.want {
			if !strings.Contains(out, w) {
				t.Errorf("show %s lacks %q", tc.name, w)
			}
		}
	}

	// ls lists the permit semaphore, and the semaphore and latch someone
	// waits on; an idle number is any counter, and is not listed.
	rdb := srv.Client()
	defer rdb.Close()
	if err := rdb.Set(ctx, "hits", "5", 0).Err(); err != nil {
		t.Fatal(err)
	}
	r := relockCmd(t, "ls", "--redis", url)
	listed := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(r.stdout), "\n")[1:] {
		f := strings.Fields(line)
		listed[f[0]] = strings.Join(f[1:], " ")
	}
	permits := "permit-semaphore - - 1 available 1, held 1: " + host + " pid " + pid + " " + filepath.Base(os.Args[0])
	for name, want := range map[string]string{"permits": permits, "sem": "semaphore - - 0 available 0", "latch": "latch - - 0 count 2"} {
		if listed[name] != want {
			t.Errorf("ls %s: %q, want %q", name, listed[name], want)
		}
	}
	if _, ok := listed["hits"]; ok {
		t.Errorf("ls listed an idle counter: %v", listed)
	}
	r = relockCmd(t, "ls", "--redis", url, "--kind", "latch")
	if lines := strings.Split(strings.TrimSpace(r.stdout), "\n"); r.code != exitOK || len(lines) != 2 || !strings.HasPrefix(lines[1], "latch ") {
		t.Errorf("ls --kind latch: exit %d, %q", r.code, r.stdout)
	}
	if r = relockCmd(t, "ls", "--redis", url, "--kind", "nonsense"); r.code != exitUsage {
		t.Errorf("ls --kind nonsense: exit %d, want %d", r.code, exitUsage)
	}

	r = relockCmd(t, "show", "--redis", url, "--json", "permits")
	var s shown
	if err := json.Unmarshal([]byte(r.stdout), &s); err != nil || s.Kind != kindPermits || s.Count == nil || *s.Count != 1 ||
		len(s.Permits) != 1 || s.Permits[0].ID != p.ID() || s.Permits[0].ExpiresInMs == nil || *s.Permits[0].ExpiresInMs <= 0 {
		t.Fatalf("show --json permits = %+v, %v", s, err)
	}
	r = relockCmd(t, "show", "--redis", url, "--json", "fair")
	s = shown{}
	if err := json.Unmarshal([]byte(r.stdout), &s); err != nil || len(s.Queue) != 1 || s.Queue[0].Client == nil || s.Queue[0].DeadlineInMs <= 0 {
		t.Fatalf("show --json fair = %+v, %v", s, err)
	}
}
