package relock_test

import (
	"bufio"
	"context"
	"errors"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/layout"
	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/internal/testkit"
)

var aclUsers atomic.Int64

// aclUser creates a Redis user on each of servers with the given ACL rules
// (after "ACL SETUSER <user> reset on >pw") and returns its name; its
// password is "pw". The user is deleted when the test ends.
func aclUser(t *testing.T, servers []*redistest.Server, rules ...string) string {
	t.Helper()
	ctx := context.Background()
	user := "relock-test-" + strings.ReplaceAll(t.Name(), "/", "-") + "-" + string(rune('a'+aclUsers.Add(1)%26))
	args := []any{"ACL", "SETUSER", user, "reset", "on", ">pw"}
	for _, r := range rules {
		args = append(args, r)
	}
	for _, srv := range servers {
		if _, err := srv.Do(ctx, args...); err != nil {
			t.Fatalf("ACL SETUSER %s %v: %v", user, rules, err)
		}
		t.Cleanup(func() { _, _ = srv.Do(context.Background(), "ACL", "DELUSER", user) })
	}
	return user
}

// aclClient creates a Redis user on srv with the given ACL rules (see
// aclUser) and returns a go-redis client logged in as it.
func aclClient(t *testing.T, srv *redistest.Server, rules ...string) *redis.Client {
	t.Helper()
	user := aclUser(t, []*redistest.Server{srv}, rules...)
	return testkit.CloseLater(t, redis.NewClient(&redis.Options{Addr: srv.Addr, Username: user, Password: "pw"}))
}

// aclTopologyClient is aclClient on the shared standalone server or, with
// cluster, a cluster client of a user made on every node of the shared
// cluster.
func aclTopologyClient(t *testing.T, cluster bool, rules ...string) redis.UniversalClient {
	t.Helper()
	if !cluster {
		return aclClient(t, testkit.Standalone, rules...)
	}
	user := aclUser(t, testkit.Cluster.Nodes, rules...)
	return testkit.CloseLater(t, redis.NewClusterClient(&redis.ClusterOptions{
		Addrs: testkit.Cluster.Addrs(), Username: user, Password: "pw"}))
}

// publishPatterns are the channel patterns of every kind of channel relock
// publishes on, as an ACL rule grants them.
var publishPatterns = []string{
	"&redisson_lock__channel:*", "&redisson_rwlock:*", "&redisson_sc:*",
	"&redisson_countdownlatch__channel__*", "&relock_election_channel:*", "&relock_grant:*",
}

// TestNewWithoutPublishPermission: a Redis user that may not publish on
// the channels of relock's releases (no PUBLISH, or SPUBLISH on a cluster;
// no channel, as Redis 7 makes a user by default; channels of some kinds
// only) gets ErrNoPermission from New naming the command and each channel
// pattern it lacks, and the failed New writes nothing (not even the
// Client's identity). Redis does not undo a script's writes when its
// PUBLISH is refused, so such a Client's releases would fail with their
// writes applied. The user with what it lacks granted gets a Client.
func TestNewWithoutPublishPermission(t *testing.T) {
	for _, cluster := range []bool{false, true} {
		topology, command := "standalone", "PUBLISH"
		if cluster {
			topology, command = "cluster", "SPUBLISH"
		}
		t.Run(topology, func(t *testing.T) {
			t.Parallel()
			for _, tc := range []struct {
				name  string
				rules []string
				lacks []string
				fix   []string // the rules that make it a user relock works with
			}{
				{"no publish", []string{"~*", "&*", "+@all", "-publish", "-spublish"}, publishPatterns, []string{"+publish", "+spublish"}},
				{"no channel", []string{"~*", "+@all"}, publishPatterns, publishPatterns},
				{"lock channels only", []string{"~*", "&redisson_lock__channel:*", "+@all"}, publishPatterns[1:], publishPatterns[1:]},
				{"all but the latch's", []string{"~*", "+@all", "&redisson_lock__channel:*", "&redisson_rwlock:*",
					"&redisson_sc:*", "&relock_election_channel:*", "&relock_grant:*"}, publishPatterns[3:4], publishPatterns[3:4]},
			} {
				t.Run(tc.name, func(t *testing.T) {
					rdb := aclTopologyClient(t, cluster, tc.rules...)
					name := testkit.LockName(t)
					c, err := relock.New(rdb, relock.WithClientName(name))
					if err == nil {
						c.Close()
						t.Fatal("New succeeded for a user that may not publish on relock's channels")
					}
					if !errors.Is(err, relock.ErrNoPermission) || !strings.Contains(err.Error(), command+" ") {
						t.Fatalf("New = %v, want ErrNoPermission naming %s", err, command)
					}
					for _, p := range publishPatterns {
						if named := strings.Contains(err.Error(), p); named != slices.Contains(tc.lacks, p) {
							t.Errorf("New = %v: names %s: %v, want %v", err, p, named, !named)
						}
					}
					if strings.Count(err.Error(), "relock: ") != 1 {
						t.Errorf("%q repeats its prefix", err)
					}
					if keys := identities(t, cluster, name); len(keys) > 0 {
						t.Fatalf("the failed New wrote its identity %v", keys)
					}

					// What it lacks, granted, makes a user that gets a Client.
					c = testkit.NewClient(t, aclTopologyClient(t, cluster, append(slices.Clone(tc.rules), tc.fix...)...))
					ctx := testkit.CtxTimeout(t, 10*time.Second)
					l, err := c.Mutex(name).Lock(ctx)
					if err != nil {
						t.Fatal(err)
					}
					if err := l.Unlock(ctx); err != nil {
						t.Fatal(err)
					}
				})
			}
		})
	}
}

// identities returns the keys of the Client identities named name on the
// shared server or cluster.
func identities(t *testing.T, cluster bool, name string) []string {
	t.Helper()
	ctx := testkit.CtxTimeout(t, 5*time.Second)
	var found []string
	scan := func(ctx context.Context, c *redis.Client) error {
		keys, err := c.Keys(ctx, layout.Pattern(layout.ClientInfo)).Result()
		if err != nil {
			return err
		}
		for _, k := range keys {
			if c.HGet(ctx, k, "name").Val() == name {
				found = append(found, k)
			}
		}
		return nil
	}
	var err error
	if cluster {
		cc := testkit.CloseLater(t, testkit.Cluster.Client())
		var mu sync.Mutex
		err = cc.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error {
			mu.Lock()
			defer mu.Unlock()
			return scan(ctx, c)
		})
	} else {
		err = scan(ctx, testkit.CloseLater(t, testkit.Standalone.Client()))
	}
	if err != nil {
		t.Fatal(err)
	}
	return found
}

// TestNewWithoutScriptPermission: a Redis user that may not run scripts
// gets ErrNoPermission from New, naming what it lacks, instead of a
// Client whose every call fails.
func TestNewWithoutScriptPermission(t *testing.T) {
	for _, tc := range []struct {
		deny, want string
	}{
		{"-evalsha", "EVALSHA"},
		{"-eval", "EVAL"},
		{"-@scripting", "EVAL or EVALSHA"},
	} {
		t.Run(tc.deny, func(t *testing.T) {
			rdb := aclClient(t, testkit.Standalone, "~*", "&*", "+@all", tc.deny)
			c, err := relock.New(rdb)
			if err == nil {
				c.Close()
				t.Fatal("New succeeded for a user that may not run scripts")
			}
			if !errors.Is(err, relock.ErrNoPermission) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("New = %v, want ErrNoPermission naming %s", err, tc.want)
			}
			if strings.Count(err.Error(), "relock: ") != 1 {
				t.Errorf("%q repeats its prefix", err)
			}
		})
	}
}

// TestNoPermissionFromCalls: a call the server refuses by ACL returns
// ErrNoPermission: a write to keys the user may only read (NOPERM), and a
// script running a command the user may not (the server's script error).
func TestNoPermissionFromCalls(t *testing.T) {
	ctx := testkit.CtxTimeout(t, 10*time.Second)
	readOnly := testkit.NewClient(t, aclClient(t, testkit.Standalone, "%R~*", "&*", "+@all"))
	if _, err := readOnly.Mutex(testkit.LockName(t)).TryLock(ctx); !errors.Is(err, relock.ErrNoPermission) {
		t.Fatalf("TryLock by a read-only user = %v, want ErrNoPermission", err)
	}
	noPexpire := testkit.NewClient(t, aclClient(t, testkit.Standalone, "~*", "&*", "+@all", "-pexpire"))
	if _, err := noPexpire.Mutex(testkit.LockName(t)).TryLock(ctx); !errors.Is(err, relock.ErrNoPermission) {
		t.Fatalf("TryLock by a user without PEXPIRE = %v, want ErrNoPermission", err)
	}
}

// readmeACL returns the rules of the ACL SETUSER line the README gives,
// after the user name.
func readmeACL(t *testing.T) []string {
	t.Helper()
	f, err := os.Open("README.md")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) > 3 && fields[0] == "ACL" && fields[1] == "SETUSER" {
			return fields[3:]
		}
	}
	t.Fatal("README.md has no ACL SETUSER line")
	return nil
}

// TestReadmeACL: a user made with the README's ACL line runs every
// primitive, waiting included (pub/sub), with nothing refused: no error
// and no NOPERM in the Client's log.
func TestReadmeACL(t *testing.T) {
	ctx := testkit.CtxTimeout(t, 30*time.Second)
	rules := readmeACL(t)
	for i, r := range rules {
		if strings.HasPrefix(r, ">") {
			rules[i] = ">pw"
		}
	}
	var sink rsSink
	a := testkit.NewClient(t, aclClient(t, testkit.Standalone, rules...), sink.logger())
	b := testkit.NewClient(t, aclClient(t, testkit.Standalone, rules...), sink.logger())
	name := testkit.LockName(t)

	// contend takes first with hold, starts wait, releases first and checks
	// that wait then succeeds: the waiter is woken by a release message.
	contend := func(what string, hold func() (func() error, error), wait func() (func() error, error)) {
		t.Helper()
		release, err := hold()
		if err != nil {
			t.Fatalf("%s: first acquisition: %v", what, err)
		}
		got := make(chan error, 1)
		var second func() error
		waits := b.Stats().Waits
		go func() {
			var err error
			second, err = wait()
			got <- err
		}()
		// Release only once the second call waits: it must be woken.
		for b.Stats().Waits == waits {
			select {
			case err := <-got:
				t.Fatalf("%s: the second acquisition did not wait: %v", what, err)
			case <-time.After(time.Millisecond):
			}
		}
		if err := release(); err != nil {
			t.Fatalf("%s: release: %v", what, err)
		}
		if err := <-got; err != nil {
			t.Fatalf("%s: waiting acquisition: %v", what, err)
		}
		if err := second(); err != nil {
			t.Fatalf("%s: second release: %v", what, err)
		}
	}
	leaseOf := func(l *relock.Lease, err error) (func() error, error) {
		if err != nil {
			return nil, err
		}
		return func() error { return l.Unlock(ctx) }, nil
	}

	contend("Mutex",
		func() (func() error, error) { return leaseOf(a.Mutex(name + ":m").Lock(ctx)) },
		func() (func() error, error) { return leaseOf(b.Mutex(name + ":m").Lock(ctx)) })
	contend("FairMutex",
		func() (func() error, error) { return leaseOf(a.FairMutex(name + ":f").Lock(ctx)) },
		func() (func() error, error) { return leaseOf(b.FairMutex(name + ":f").Lock(ctx)) })
	contend("RWMutex",
		func() (func() error, error) { return leaseOf(a.RWMutex(name + ":rw").RLock(ctx)) },
		func() (func() error, error) { return leaseOf(b.RWMutex(name + ":rw").Lock(ctx)) })

	sem := name + ":sem"
	if _, err := a.Semaphore(sem).TrySetPermits(ctx, 1); err != nil {
		t.Fatalf("Semaphore.TrySetPermits: %v", err)
	}
	contend("Semaphore",
		func() (func() error, error) {
			return func() error { return a.Semaphore(sem).Release(ctx, 1) }, a.Semaphore(sem).Acquire(ctx, 1)
		},
		func() (func() error, error) {
			return func() error { return b.Semaphore(sem).Release(ctx, 1) }, b.Semaphore(sem).Acquire(ctx, 1)
		})

	psem := name + ":psem"
	if _, err := a.PermitSemaphore(psem).TrySetPermits(ctx, 1); err != nil {
		t.Fatalf("PermitSemaphore.TrySetPermits: %v", err)
	}
	permit := func(c *relock.Client) (func() error, error) {
		p, err := c.PermitSemaphore(psem).Acquire(ctx)
		if err != nil {
			return nil, err
		}
		return func() error { return p.Release(ctx) }, nil
	}
	contend("PermitSemaphore",
		func() (func() error, error) { return permit(a) },
		func() (func() error, error) { return permit(b) })

	latch := name + ":latch"
	if _, err := a.CountDownLatch(latch).TrySetCount(ctx, 1); err != nil {
		t.Fatalf("CountDownLatch.TrySetCount: %v", err)
	}
	contend("CountDownLatch",
		func() (func() error, error) {
			return func() error { return a.CountDownLatch(latch).CountDown(ctx) }, nil
		},
		func() (func() error, error) {
			return func() error { return nil }, b.CountDownLatch(latch).Await(ctx)
		})

	for _, line := range strings.Split(sink.String(), "\n") {
		if strings.Contains(line, "maxmemory-policy") {
			continue // CONFIG GET is optional, as the README says
		}
		if strings.Contains(line, "NOPERM") || strings.Contains(line, "level=WARN") || strings.Contains(line, "level=ERROR") {
			t.Errorf("the Client logged: %s", line)
		}
	}
}
