package relock_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/layout"
	"github.com/relock-go/relock/internal/testkit"
)

// forceUnlocks are the ForceUnlock of each lock primitive, by kind.
var forceUnlocks = []struct {
	kind  string
	force func(c *relock.Client, name string) func(context.Context) (bool, error)
}{
	{"mutex", mutexForce},
	{"fair", fairForce},
	{"rw", rwForce},
}

func mutexForce(c *relock.Client, n string) func(context.Context) (bool, error) {
	return c.Mutex(n).ForceUnlock
}

func fairForce(c *relock.Client, n string) func(context.Context) (bool, error) {
	return c.FairMutex(n).ForceUnlock
}

func rwForce(c *relock.Client, n string) func(context.Context) (bool, error) {
	return c.RWMutex(n).ForceUnlock
}

// TestForceUnlockLeavesOtherData: ForceUnlock of any lock primitive on a
// key that holds an application's hash, a string or a list refuses with
// ErrWrongType and leaves the key as it was.
func TestForceUnlockLeavesOtherData(t *testing.T) {
	testkit.ForEach(t, func(t *testing.T, top testkit.Topology) {
		c := top.NewClient(t)
		rdb := top.RDB(t)
		ctx := testkit.CtxTimeout(t, 20*time.Second)
		values := []struct {
			what  string
			write func(key string) error
		}{
			{"an application's hash", func(k string) error { return rdb.HSet(ctx, k, "name", "Ada", "email", "ada@example.com").Err() }},
			// Only fields a lock has, but no holder: no lock leaves these.
			{"a hash with a mode only", func(k string) error { return rdb.HSet(ctx, k, "mode", "read").Err() }},
			{"a hash with a token only", func(k string) error { return rdb.HSet(ctx, k, "relock_token", 7).Err() }},
			{"a string", func(k string) error { return rdb.Set(ctx, k, "not a lock", 0).Err() }},
			{"a list", func(k string) error { return rdb.RPush(ctx, k, "a", "b").Err() }},
		}
		for _, f := range forceUnlocks {
			for _, v := range values {
				key := testkit.LockName(t) + ":user:42"
				if err := v.write(key); err != nil {
					t.Fatal(err)
				}
				before := rdb.Dump(ctx, key).Val()
				held, err := f.force(c, key)(ctx)
				if !errors.Is(err, relock.ErrWrongType) || held {
					t.Errorf("%s ForceUnlock of %s = %v, %v; want ErrWrongType", f.kind, v.what, held, err)
				}
				if after := rdb.Dump(ctx, key).Val(); after != before {
					t.Errorf("%s ForceUnlock changed %s", f.kind, v.what)
				}
			}
		}
	})
}

// TestForceUnlockDeletesHolds: ForceUnlock still deletes what a lock
// writes: a relock hold, and holds written in Redisson's layout (owner ids
// "<uuid>:<thread id>", a writer's "<uuid>:<thread id>:write", a reader's
// hold keys), reporting them held.
func TestForceUnlockDeletesHolds(t *testing.T) {
	testkit.ForEach(t, func(t *testing.T, top testkit.Topology) {
		c := top.NewClient(t)
		other := top.NewClient(t)
		rdb := top.RDB(t)
		ctx := testkit.CtxTimeout(t, 20*time.Second)
		const java = "6f1c1f3e-4a8b-4c61-9d7e-0b9f2a1c3d4e"
		redisson := map[string]func(name string){ // writes a hold
			"mutex": func(n string) { rdb.HSet(ctx, n, java+":1", 2); rdb.PExpire(ctx, n, time.Minute) },
			"fair":  func(n string) { rdb.HSet(ctx, n, java+":1", 1); rdb.PExpire(ctx, n, time.Minute) },
			"rw": func(n string) {
				rdb.HSet(ctx, n, "mode", "write", java+":7:write", 1, java+":7", 2)
				rdb.Set(ctx, layout.ReaderHold(n, java+":7", 1), 1, time.Minute)
				rdb.Set(ctx, layout.ReaderHold(n, java+":7", 2), 1, time.Minute)
				rdb.PExpire(ctx, n, time.Minute)
			},
		}
		relockHold := map[string]func(name string) (*relock.Lease, error){ // the holder hears at its next renewal
			"mutex": func(n string) (*relock.Lease, error) { return c.Mutex(n).Lock(ctx) },
			"fair":  func(n string) (*relock.Lease, error) { return c.FairMutex(n).Lock(ctx) },
			"rw":    func(n string) (*relock.Lease, error) { return c.RWMutex(n).RLock(ctx) },
		}
		for _, f := range forceUnlocks {
			name := testkit.LockName(t)
			redisson[f.kind](name)
			if held, err := f.force(other, name)(ctx); err != nil || !held {
				t.Fatalf("%s ForceUnlock of Redisson's hold = %v, %v", f.kind, held, err)
			}
			testkit.NoKeys(t, rdb, name)

			name = testkit.LockName(t)
			if _, err := relockHold[f.kind](name); err != nil {
				t.Fatal(err)
			}
			if held, err := f.force(other, name)(ctx); err != nil || !held {
				t.Fatalf("%s ForceUnlock of relock's hold = %v, %v", f.kind, held, err)
			}
			testkit.NoKeysLeft(t, rdb, name)
		}
	})
}

// TestForceUnlockTellsHolder: a holder whose Client listens on its grant
// channel (it has a call waiting, here for another lock of the same
// slot) hears at once of a ForceUnlock by another Client, long before its
// watchdog's next renewal (40s after the Client was made).
func TestForceUnlockTellsHolder(t *testing.T) {
	testkit.ForEach(t, func(t *testing.T, top testkit.Topology) {
		for _, hold := range []string{"mutex", "fair", "rw write", "rw read"} {
			t.Run(strings.ReplaceAll(hold, " ", "_"), func(t *testing.T) {
				a := top.NewClient(t, relock.WithWatchdogTimeout(2*time.Minute))
				b := top.NewClient(t)
				rdb := top.RDB(t)
				ctx := testkit.CtxTimeout(t, 30*time.Second)
				tag := "{" + testkit.LockName(t) + "}"
				held, waited := tag+":held", tag+":waited"

				l, force := holdToForce(t, ctx, a, b, hold, held)
				listenOn(t, ctx, top, a, rdb, held, waited, b)

				if ok, err := force(ctx); err != nil || !ok {
					t.Fatalf("ForceUnlock = %v, %v", ok, err)
				}
				select {
				case <-l.Done():
				case <-time.After(10 * time.Second):
					t.Fatal("the holder was not told of the ForceUnlock; it would hear at its next renewal, 40s after its Client was made")
				}
				if !errors.Is(l.Err(), relock.ErrLockLost) {
					t.Fatalf("Err = %v, want ErrLockLost", l.Err())
				}
			})
		}
	})
}

// listenOn makes Client a listen on its grant channel for the slot of
// held, whose hash names a's owner: a call of a waits for waited, which
// other holds until the test ends; listenOn returns once the server counts
// the subscription.
func listenOn(t *testing.T, ctx context.Context, top testkit.Topology, a *relock.Client, rdb redis.UniversalClient, held, waited string, other *relock.Client) {
	t.Helper()
	blocker, err := other.Mutex(waited).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	waitCtx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		if l, err := a.Mutex(waited).Lock(waitCtx); err == nil {
			_ = l.Unlock(context.Background())
		}
	}()
	t.Cleanup(func() {
		cancel()
		<-done
		_ = blocker.Unlock(context.Background())
	})
	var uuid string
	for f := range rdb.HGetAll(ctx, held).Val() {
		if id, _, ok := strings.Cut(f, ":"); ok && len(id) == 36 {
			uuid = id
		}
	}
	if uuid == "" {
		t.Fatalf("no owner in %q", held)
	}
	channel := layout.Grants(uuid, held, top.Name == "cluster")
	testkit.Eventually(t, 10*time.Second, "the holder's Client to listen on its grant channel", func() bool {
		var n map[string]int64
		if cc, ok := rdb.(*redis.ClusterClient); ok {
			node, err := cc.MasterForKey(ctx, channel)
			if err != nil {
				t.Fatal(err)
			}
			n = node.PubSubShardNumSub(ctx, channel).Val()
		} else {
			n = rdb.PubSubNumSub(ctx, channel).Val()
		}
		return n[channel] == 1
	})
}

// TestForceUnlockOwnHold: a Client that force-unlocks a lock it holds
// itself ends its own hold at once, listening or not, long before its
// watchdog's next renewal (40s after the Client was made).
func TestForceUnlockOwnHold(t *testing.T) {
	testkit.ForEach(t, func(t *testing.T, top testkit.Topology) {
		c := top.NewClient(t, relock.WithWatchdogTimeout(2*time.Minute))
		ctx := testkit.CtxTimeout(t, 30*time.Second)
		for _, f := range forceUnlocks {
			name := testkit.LockName(t)
			var l *relock.Lease
			var err error
			switch f.kind {
			case "mutex":
				l, err = c.Mutex(name).Lock(ctx)
			case "fair":
				l, err = c.FairMutex(name).Lock(ctx)
			case "rw":
				l, err = c.RWMutex(name).RLock(ctx)
			}
			if err != nil {
				t.Fatal(err)
			}
			if held, err := f.force(c, name)(ctx); err != nil || !held {
				t.Fatalf("%s ForceUnlock = %v, %v", f.kind, held, err)
			}
			select {
			case <-l.Done():
			case <-time.After(10 * time.Second):
				t.Fatalf("%s: the holder was not told of its own Client's ForceUnlock", f.kind)
			}
			if !errors.Is(l.Err(), relock.ErrLockLost) {
				t.Fatalf("%s: Err = %v, want ErrLockLost", f.kind, l.Err())
			}
		}
	})
}

// holdToForce takes a hold of kind hold ("mutex", "fair", "rw write", "rw
// read") on name with a, and returns it with b's ForceUnlock of name.
func holdToForce(t *testing.T, ctx context.Context, a, b *relock.Client, hold, name string) (*relock.Lease, func(context.Context) (bool, error)) {
	t.Helper()
	var l *relock.Lease
	var err error
	var force func(context.Context) (bool, error)
	switch hold {
	case "mutex":
		l, err = a.Mutex(name).Lock(ctx)
		force = b.Mutex(name).ForceUnlock
	case "fair":
		l, err = a.FairMutex(name).Lock(ctx)
		force = b.FairMutex(name).ForceUnlock
	case "rw write":
		l, err = a.RWMutex(name).Lock(ctx)
		force = b.RWMutex(name).ForceUnlock
	case "rw read":
		l, err = a.RWMutex(name).RLock(ctx)
		force = b.RWMutex(name).ForceUnlock
	default:
		t.Fatalf("no hold of kind %q", hold)
	}
	if err != nil {
		t.Fatal(err)
	}
	return l, force
}
