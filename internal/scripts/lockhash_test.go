package scripts

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/relock-go/relock/internal/layout"
)

// clientID returns the "<uuid>" of test client n, and owner an owner id of
// it, in the form relock's and Redisson's owner ids have: the force
// unlocks delete only hashes whose owner fields have it.
func clientID(n int) string { return fmt.Sprintf("00000000-0000-4000-8000-%012d", n) }

func owner(n int) string { return clientID(n) + ":1" }

// forceUnlock runs the force unlock of kind ("lock", "fair" or "rw") on
// name, as its Client gives it from client "c0ffee" (which holds nothing).
func forceUnlock(kind, name string) (any, error) {
	ctx := context.Background()
	switch kind {
	case "lock":
		return ForceUnlock.Run(ctx, rdb, Keys(name, layout.Companion(layout.LockQueue, name)),
			lockChannel(name), "publish", clientGrants("c0ffee"), "c0ffee").Result()
	case "fair":
		f := newFairLock(name)
		return FairForceUnlock.Run(ctx, rdb, Keys(f.keys(f.channel)...), f.waiters, "publish", grantPrefix).Result()
	}
	k := newRW(name)
	return RWForceUnlock.Run(ctx, rdb, Keys(k.name, k.queue, k.channel), k.channel, "publish", k.holds, clientGrants("c0ffee"), "c0ffee").Result()
}

// TestForceUnlockNotALock: a force unlock deletes a hash only when it
// holds nothing but what a lock of its kind writes; any other is refused
// with WRONGTYPE and left as it was, with what else the lock would have
// deleted.
func TestForceUnlockNotALock(t *testing.T) {
	ctx := context.Background()
	app := []any{"name", "ada", "email", "ada@example.com"}
	for _, tc := range []struct {
		name  string
		kinds []string
		hash  []any
		holds []string // reader hold keys of owner(1), written as a list
	}{
		{"an application's hash", []string{"lock", "fair", "rw"}, app, nil},
		{"an application's hash with a mode", []string{"lock", "fair", "rw"}, append([]any{"mode", "read"}, app...), nil},
		{"owner ids of another form", []string{"lock", "fair", "rw"}, []any{"mode", "write", "user:42", "1", "user:42:write", "1"}, nil},
		{"a count that is no count", []string{"lock", "fair", "rw"}, []any{"mode", "read", owner(1), "ada"}, nil},
		{"a count of zero", []string{"lock", "fair", "rw"}, []any{"mode", "read", owner(1), "0"}, nil},
		{"an owner beside other fields", []string{"lock", "fair", "rw"}, []any{"mode", "read", owner(1), "1", "email", "ada@example.com"}, nil},
		{"a read-write lock's hash", []string{"lock", "fair"}, []any{"mode", "read", owner(1), "1"}, nil},
		{"a lock's hash", []string{"rw"}, []any{owner(1), "1", layout.TokenField, "7"}, nil},
		{"a reader hold key of another type", []string{"rw"}, []any{"mode", "read", owner(1), "2"}, []string{"1", "2"}},
	} {
		for _, kind := range tc.kinds {
			t.Run(tc.name+"/"+kind, func(t *testing.T) {
				fresh(t)
				name := "s:nal:" + kind
				rdb.HSet(ctx, name, tc.hash...)
				want := rdb.HGetAll(ctx, name).Val()
				hold := newRW(name).hold(owner(1), 2)
				if tc.holds != nil {
					rdb.Set(ctx, newRW(name).hold(owner(1), 1), "1", time.Minute)
					rdb.RPush(ctx, hold, tc.holds)
				}
				told := listening(t, clientGrants(clientID(1)))
				v, err := forceUnlock(kind, name)
				if err == nil || !strings.HasPrefix(strings.TrimPrefix(err.Error(), "ERR "), "WRONGTYPE") {
					t.Fatalf("force unlock = %v, %v; want WRONGTYPE", v, err)
				}
				if got := rdb.HGetAll(ctx, name).Val(); fmt.Sprint(got) != fmt.Sprint(want) {
					t.Fatalf("hash %v after the refusal, was %v", got, want)
				}
				if tc.holds != nil && rdb.Exists(ctx, newRW(name).hold(owner(1), 1), hold).Val() != 2 {
					t.Fatal("a reader hold key was deleted")
				}
				rdb.Publish(ctx, clientGrants(clientID(1)), "end")
				if m := heardWithin(t, told); m != "end" {
					t.Fatalf("the refused call published %q", m)
				}
			})
		}
	}
}

// TestForceUnlockTellsHolders: a force unlock deletes the hash of a lock
// held by relock or Redisson, relock's own fields and an election's
// leader record included, and tells each holder's client, once, on its
// grant channel to check its holds of the lock: "h:<name>".
func TestForceUnlockTellsHolders(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		kind string
		hash []any
	}{
		{"lock", []any{owner(1), "2", layout.TokenField, "7", layout.SinceField, "1700000000000", layout.QueuedField, "1"}},
		{"fair", []any{owner(1), "1", layout.TokenField, "7", layout.LeaderField, `{"term":7}`, layout.LeaderHolderField, owner(1)}},
		{"rw", []any{"mode", "write", owner(1) + ":write", "1", owner(1), "1", clientID(2) + ":9", "3", layout.TokenField, "7"}},
	} {
		t.Run(tc.kind, func(t *testing.T) {
			fresh(t)
			name := "s:tell:" + tc.kind
			rdb.HSet(ctx, name, tc.hash...)
			told := listening(t, clientGrants(clientID(1)))
			other := listening(t, clientGrants(clientID(2)))
			if v, err := forceUnlock(tc.kind, name); err != nil || v != int64(1) {
				t.Fatalf("force unlock = %v, %v", v, err)
			}
			if rdb.Exists(ctx, name).Val() != 0 {
				t.Fatal("the lock is still there")
			}
			rdb.Publish(ctx, clientGrants(clientID(1)), "end")
			rdb.Publish(ctx, clientGrants(clientID(2)), "end")
			if m := heardWithin(t, told); m != "h:"+name {
				t.Fatalf("the holder's client heard %q", m)
			}
			if m := heardWithin(t, told); m != "end" {
				t.Fatalf("the holder's client heard %q after the first message", m)
			}
			if tc.kind == "rw" {
				if m := heardWithin(t, other); m != "h:"+name {
					t.Fatalf("the reader's client heard %q", m)
				}
			}
		})
	}
}

// heardWithin returns the payload of the next message ps receives, failing
// the test if none comes within 10s (the messages it waits for are
// published before it is called).
func heardWithin(t *testing.T, ps *redis.PubSub) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	m, err := ps.ReceiveMessage(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return m.Payload
}
