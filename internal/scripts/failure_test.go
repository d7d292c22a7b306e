package scripts

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/relock-go/relock/internal/layout"
)

// state is every key of the test server: its type, its DUMP and its PTTL
// rounded to the second, so that a write of any kind, a new TTL included,
// shows as a change.
type state map[string]string

func snapshot(t *testing.T) state {
	t.Helper()
	ctx := context.Background()
	keys, err := rdb.Keys(ctx, "*").Result()
	if err != nil {
		t.Fatal(err)
	}
	s := make(state, len(keys))
	for _, k := range keys {
		dump, err := rdb.Dump(ctx, k).Result()
		if err != nil {
			t.Fatal(err)
		}
		ttl := rdb.PTTL(ctx, k).Val()
		s[k] = fmt.Sprintf("%q ttl %v", dump, ttl.Round(time.Second))
	}
	return s
}

// diff describes how after differs from s, or returns "".
func (s state) diff(after state) string {
	var d []string
	for _, k := range slices.Sorted(maps.Keys(s)) {
		if v, ok := after[k]; !ok {
			d = append(d, "deleted "+k)
		} else if v != s[k] {
			d = append(d, "changed "+k)
		}
	}
	for _, k := range slices.Sorted(maps.Keys(after)) {
		if _, ok := s[k]; !ok {
			d = append(d, "made "+k)
		}
	}
	return strings.Join(d, ", ")
}

// given writes a key of each kind the cases below set up: a string, a
// hash (pairs), a list, a zset (member, score pairs; the score "now+d" is
// the server's clock plus d ms) or a stream, with a TTL in ms when ttl > 0.
type given struct {
	key, kind string
	vals      []string
	ttl       int
}

func (g given) write(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	var err error
	switch g.kind {
	case "string":
		err = rdb.Set(ctx, g.key, g.vals[0], 0).Err()
	case "hash":
		err = rdb.HSet(ctx, g.key, g.vals).Err()
	case "zset":
		now, terr := rdb.Time(ctx).Result()
		if terr != nil {
			t.Fatal(terr)
		}
		for i := 0; i < len(g.vals); i += 2 {
			score := g.vals[i+1]
			if d, ok := strings.CutPrefix(score, "now"); ok {
				var ms int64
				fmt.Sscan(d, &ms)
				score = fmt.Sprint(now.UnixMilli() + ms)
			}
			var f float64
			fmt.Sscan(score, &f)
			if err = rdb.ZAdd(ctx, g.key, redis.Z{Score: f, Member: g.vals[i]}).Err(); err != nil {
				break
			}
		}
	case "list":
		err = rdb.RPush(ctx, g.key, g.vals).Err()
	case "stream":
		err = rdb.XAdd(ctx, &redis.XAddArgs{Stream: g.key, Values: g.vals}).Err()
	default:
		t.Fatalf("unknown kind %q", g.kind)
	}
	if err == nil && g.ttl > 0 {
		err = rdb.PExpire(ctx, g.key, time.Duration(g.ttl)*time.Millisecond).Err()
	}
	if err != nil {
		t.Fatalf("given %s: %v", g.key, err)
	}
}

func str(key, v string) given { return given{key, "string", []string{v}, 0} }

func hash(key string, ttl int, pairs ...string) given { return given{key, "hash", pairs, ttl} }

func zset(key string, pairs ...string) given { return given{key, "zset", pairs, 0} }

// failure is a script call on keys one of which holds what the script
// cannot work with: it must fail, unless succeeds is set.
type failure struct {
	name   string
	given  []given
	script *Script
	keys   []string
	args   []any
	// succeeds is set where there is nothing to fail for: a queue of
	// another type holds no member to take out of it.
	succeeds bool
}

// TestFailuresWriteNothing: Redis does not undo the writes of a script
// that fails, so every script that can fail on what it finds in Redis (a
// key of another type, a fencing counter or a count that holds no
// number) must fail before its first write. Each case sets up keys one of
// which such a call cannot work with, and checks that the call fails with
// a WRONGTYPE error and leaves every key as it was.
func TestFailuresWriteNothing(t *testing.T) {
	const (
		lease   = "30000"
		corrupt = "not a number"
	)
	lk := func(name string) []string { return lockKeys(name, "") }
	rwLock := func(name string) []string { return newRW(name).keys("") }
	rwRead := func(name, owner string) []string { return newRW(name).keys(newRW(name).hold(owner, 1)) }
	rwUnlock := func(name, marker string) []string { return newRW(name).releaseKeys(marker) }
	// rwRelease is the ARGV of the read-write release scripts: the hold's
	// field, the marker mode, and the rest (ARGV[14..16]) if any.
	rwRelease := func(name, field, mode string, rest ...any) []any {
		return append([]any{field, newRW(name).channel, "publish", mode, 60000, newRW(name).holds,
			"numsub", "c0ffee", clientGrants("c0ffee"), 2000, "", "1", counterOnly}, rest...)
	}
	sem := func(name string) (string, string, string) {
		return name, layout.Companion(layout.SemaphoreChannel, name), layout.Marker(layout.SemaphoreRequest, name, "")
	}
	permit := func(name string) []string {
		return []string{name, layout.PermitTimeouts(name), layout.Companion(layout.SemaphoreChannel, name), layout.Companion(layout.PermitQueue, name)}
	}
	permitCh := func(name string) string { return layout.Companion(layout.SemaphoreChannel, name) }
	cases := []failure{
		{
			name: "lock: a waiter takes the free lock, fencing counter corrupt",
			given: []given{
				zset(lk("f:lock")[2], lease+"|o|u:1", "1", lease+"|o|v:1", "2"),
				str(lk("f:lock")[1], corrupt),
			},
			script: Lock, keys: lk("f:lock"),
			args: []any{lease, "u:1", counterOnly, "o", 1, "1"},
		},
		{
			name: "lock: an application's hash without a TTL",
			given: []given{
				hash("f:app", 0, "name", "Ann", "email", "ann@example.com"),
			},
			script: Lock, keys: lk("f:app"),
			args: []any{lease, "u:1", counterOnly, "o", 1, "0"},
		},
		{
			name: "rw write lock: an application's hash without a TTL",
			given: []given{
				hash("f:rwapp", 0, "name", "Ann", "email", "ann@example.com"),
			},
			script: RWWriteLock, keys: rwLock("f:rwapp"),
			args: []any{lease, "w:1", "0", 60000, counterOnly, "o", 2000, "0"},
		},
		{
			name: "lock: a free lock, queue of another type",
			given: []given{
				str(lk("f:lqueue")[2], "x"),
			},
			script: Lock, keys: lk("f:lqueue"),
			args: []any{lease, "u:1", counterOnly, "o", 1, "1"},
		},
		{
			name: "lock: a one-shot holder's retry, queue of another type", succeeds: true,
			given: []given{
				hash("f:retry", 10000, "u:1", "1", layout.TokenField, "5"),
				str(lk("f:retry")[2], "x"),
			},
			script: Lock, keys: lk("f:retry"),
			args: []any{lease, "u:1", counterOnly, "o", 1, "1"},
		},
		{
			name: "lock: a reentrant holder re-enters, queue of another type", succeeds: true,
			given: []given{
				hash("f:reenter", 10000, "u:1", "1", layout.TokenField, "5"),
				str(lk("f:reenter")[2], "x"),
			},
			script: Lock, keys: lockKeys("f:reenter", layout.Marker(layout.LockRequest, "f:reenter", "m")),
			args: []any{lease, "u:1", counterOnly, "r", 1, "1", 60000},
		},
		{
			name: "unlock: the last hold grants a waiter of another client, fencing counter corrupt",
			given: []given{
				hash("f:grant", 10000, "u:1", "1", layout.TokenField, "5", layout.QueuedField, "1"),
				zset(lk("f:grant")[2], lease+"|o|v:1", "1"),
				str(lk("f:grant")[1], corrupt),
			},
			script: Unlock, keys: lk("f:grant"),
			args: unlockArgs(lk("f:grant"), "u:1"),
		},
		{
			name: "unlock: passing on in process reserves tokens, fencing counter corrupt",
			given: []given{
				hash("f:pass", 10000, "u:1", "1", layout.TokenField, "5"),
				str(lk("f:pass")[1], corrupt),
			},
			script: Unlock, keys: lk("f:pass"),
			args: []any{"u:1", "publish", counterOnly, clientGrants("u"), "1", lockChannel("f:pass"), "0", lease + "|o|u:2", "", "6", "1"},
		},
		{
			name:   "abandon: a reentrant acquisition's marker, lock of another type",
			given:  []given{str("f:abandon", "x"), str(layout.Marker(layout.LockRequest, "f:abandon", "m"), "1")},
			script: Abandon, keys: []string{"f:abandon", layout.Marker(layout.LockRequest, "f:abandon", "m")},
			args: []any{"u:1", lockChannel("f:abandon"), "publish", "1"},
		},
		{
			name: "forceunlock: queue of another type",
			given: []given{
				hash("f:force", 10000, owner(1), "1"),
				str(lk("f:force")[2], "x"),
			},
			script: ForceUnlock, keys: []string{"f:force", lk("f:force")[2]},
			args: []any{lockChannel("f:force"), "publish", clientGrants("u"), "u"},
		},
		{
			name: "rw read lock: a free lock, fencing counter corrupt",
			given: []given{
				str(newRW("f:rfree").counter, corrupt),
			},
			script: RWReadLock, keys: rwRead("f:rfree", "r:1"),
			args: []any{lease, "r:1", "0", 60000, newRW("f:rfree").holds, "R", 2000, "0"},
		},
		{
			name: "rw read lock: a lock other readers hold, fencing counter of another type",
			given: []given{
				hash("f:rshared", 10000, "mode", "read", "r:1", "1"),
				hash(newRW("f:rshared").counter, 0, "a", "1"),
			},
			script: RWReadLock, keys: rwRead("f:rshared", "r:2"),
			args: []any{lease, "r:2", "0", 60000, newRW("f:rshared").holds, "R", 2000, "0"},
		},
		{
			name: "rw read lock: a free lock, queue of another type",
			given: []given{
				str(newRW("f:rqueue").queue, "x"),
			},
			script: RWReadLock, keys: rwRead("f:rqueue", "r:1"),
			args: []any{lease, "r:1", "0", 60000, newRW("f:rqueue").holds, "R", 2000, "1"},
		},
		{
			name: "rw write lock: a free lock, queue of another type",
			given: []given{
				str(newRW("f:wqueue").queue, "x"),
			},
			script: RWWriteLock, keys: rwLock("f:wqueue"),
			args: []any{lease, "w:1", "0", 60000, counterOnly, "o", 2000, "1"},
		},
		{
			name: "rw write lock: a free lock with its own token key, queue of another type",
			given: []given{
				str(newRW("f:wqnamed").queue, "x"),
				str(newRW("f:wqnamed").token, "3"),
			},
			script: RWWriteLock, keys: append(rwLock("f:wqnamed"), newRW("f:wqnamed").token),
			args: []any{lease, "w:1", "0", 60000, "0", "o", 2000, "1"},
		},
		{
			name: "rw read unlock: the last reader grants a writer, fencing counter corrupt",
			given: []given{
				hash("f:rgrant", 10000, "mode", "read", "r:1", "1"),
				{newRW("f:rgrant").hold("r:1", 1), "string", []string{"1"}, 10000},
				zset(newRW("f:rgrant").queue, lease+"|o|w:1", "1"),
				str(newRW("f:rgrant").counter, corrupt),
			},
			script: RWReadUnlock, keys: rwUnlock("f:rgrant", ""),
			args: rwRelease("f:rgrant", "r:1", "0"),
		},
		{
			name: "rw read unlock: the last reader frees the lock, queue of another type",
			given: []given{
				hash("f:rfreeq", 10000, "mode", "read", "r:1", "1"),
				{newRW("f:rfreeq").hold("r:1", 1), "string", []string{"1"}, 10000},
				str(newRW("f:rfreeq").queue, "x"),
			},
			script: RWReadUnlock, keys: rwUnlock("f:rfreeq", ""),
			args: rwRelease("f:rfreeq", "r:1", "0"),
		},
		{
			name: "rw read unlock: undo of a lock now of another type",
			given: []given{
				str("f:rundo", "x"),
				str(layout.Marker(layout.LockRequest, "f:rundo", "m"), "1"),
			},
			script: RWReadUnlock, keys: rwUnlock("f:rundo", layout.Marker(layout.LockRequest, "f:rundo", "m")),
			args: rwRelease("f:rundo", "r:1", "2"),
		},
		{
			name: "rw write unlock: the writer grants the next writer, fencing counter corrupt",
			given: []given{
				hash("f:wgrant", 10000, "mode", "write", "w0:1:write", "1", layout.TokenField, "3"),
				zset(newRW("f:wgrant").queue, lease+"|o|w:1", "1"),
				str(newRW("f:wgrant").counter, corrupt),
			},
			script: RWWriteUnlock, keys: rwUnlock("f:wgrant", ""),
			args: rwRelease("f:wgrant", "w0:1:write", "0"),
		},
		{
			name: "rw write unlock: passing on in process reserves tokens, fencing counter corrupt",
			given: []given{
				hash("f:wpass", 10000, "mode", "write", "c0ffee:1:write", "1", layout.TokenField, "3"),
				str(newRW("f:wpass").counter, corrupt),
			},
			script: RWWriteUnlock, keys: rwUnlock("f:wpass", ""),
			args: rwRelease("f:wpass", "c0ffee:1:write", "0", lease+"|o|c0ffee:2", 4, "1"),
		},
		{
			name: "rw write unlock: the writer keeps reading, queue of another type",
			given: []given{
				hash("f:wdown", 10000, "mode", "write", "w:1:write", "1", "w:1", "1", layout.TokenField, "3"),
				{newRW("f:wdown").hold("w:1", 1), "string", []string{"1"}, 10000},
				str(newRW("f:wdown").queue, "x"),
			},
			script: RWWriteUnlock, keys: rwUnlock("f:wdown", ""),
			args: rwRelease("f:wdown", "w:1:write", "0"),
		},
		{
			name: "rw write unlock: undo of a lock now of another type",
			given: []given{
				str("f:wundo", "x"),
				str(layout.Marker(layout.LockRequest, "f:wundo", "m"), "1"),
			},
			script: RWWriteUnlock, keys: rwUnlock("f:wundo", layout.Marker(layout.LockRequest, "f:wundo", "m")),
			args: rwRelease("f:wundo", "w:1:write", "2"),
		},
		{
			name: "rw forceunlock: queue of another type",
			given: []given{
				hash("f:rwforce", 10000, "mode", "read", owner(1), "1"),
				{newRW("f:rwforce").hold(owner(1), 1), "string", []string{"1"}, 10000},
				str(newRW("f:rwforce").queue, "x"),
			},
			script: RWForceUnlock, keys: []string{"f:rwforce", newRW("f:rwforce").queue, newRW("f:rwforce").channel},
			args: []any{newRW("f:rwforce").channel, "publish", newRW("f:rwforce").holds, clientGrants("c0ffee"), "c0ffee"},
		},
		{
			name: "election proclaim: log of another type",
			given: []given{
				hash(layout.Companion(layout.Election, "f:elect"), 10000, "u:1", "1"),
				str(layout.Companion(layout.ElectionLog, "f:elect"), "x"),
			},
			script: ElectionProclaim, keys: []string{layout.Companion(layout.Election, "f:elect"), layout.Companion(layout.ElectionLog, "f:elect")},
			args: []any{"u:1", `{"term":1}`, "1", "publish", 60000, "1", layout.Companion(layout.ElectionChannel, "f:elect")},
		},
		{
			name: "election resign: log of another type",
			given: []given{
				hash(layout.Companion(layout.Election, "f:resign"), 10000, "u:1", "1", layout.LeaderField, `{"since":1,"term":1}`, layout.LeaderHolderField, "u:1"),
				str(layout.Companion(layout.ElectionLog, "f:resign"), "x"),
			},
			script: ElectionResign, keys: []string{layout.Companion(layout.Election, "f:resign"), layout.Companion(layout.ElectionLog, "f:resign")},
			args: []any{"u:1", "1", "publish", 60000, layout.Companion(layout.ElectionChannel, "f:resign")},
		},
	}
	// The FairMutex's: fk gives a fair lock's keys and its liveness
	// entries, of a waiter alive for long or dead already.
	fk := newFairLock
	const (
		live = "9999999999999:0:1"    // a relock waiter that takes no grants
		lent = "9999999999999:5000:1" // one another client's release may grant the lock to
		gone = "1:0:1"
	)
	fairLock := func(name, owner string, extra ...any) []any {
		return append([]any{lease, owner, "0", 60000, 5000, fk(name).waiters, "publish", counterOnly}, extra...)
	}
	fairUnlock := func(name, owner, grants, k string, candidates ...any) []any {
		return append([]any{owner, fk(name).waiters, "publish", "0", 60000, counterOnly, grants, k, grantPrefix}, candidates...)
	}
	cases = append(cases,
		failure{
			name: "fair lock: the head takes the free lock, fencing counter corrupt",
			given: []given{
				{fk("f:fhead").queue, "list", []string{"u:1", "v:1"}, 0},
				zset(fk("f:fhead").timeouts, "u:1", "now+300000", "v:1", "now+600000"),
				hash(fk("f:fhead").alive, 60000, "u:1", live, "v:1", live),
				str(fk("f:fhead").counter, corrupt),
			},
			script: FairLock, keys: fk("f:fhead").keys(fk("f:fhead").counter),
			args: fairLock("f:fhead", "u:1"),
		},
		failure{
			name: "fair lock: the lock free behind a dead head, fencing counter corrupt",
			given: []given{
				{fk("f:fdead").queue, "list", []string{"d:1"}, 0},
				zset(fk("f:fdead").timeouts, "d:1", "now+300000"),
				hash(fk("f:fdead").alive, 60000, "d:1", gone),
				str(fk("f:fdead").counter, corrupt),
			},
			script: FairLock, keys: fk("f:fdead").keys(fk("f:fdead").counter),
			args: fairLock("f:fdead", "u:1"),
		},
		failure{
			name: "fair lock: another head behind a dead one, budgets of another type",
			given: []given{
				{fk("f:fdeadz").queue, "list", []string{"d:1", "v:1"}, 0},
				str(fk("f:fdeadz").timeouts, "x"),
				hash(fk("f:fdeadz").alive, 60000, "d:1", gone, "v:1", live),
			},
			script: FairLock, keys: fk("f:fdeadz").keys(fk("f:fdeadz").counter),
			args: fairLock("f:fdeadz", "u:1"),
		},
		failure{
			name: "fair lock: a reentrant holder re-enters, queue of another type",
			given: []given{
				hash("f:freenter", 10000, "u:1", "1", layout.TokenField, "5"),
				str(fk("f:freenter").queue, "x"),
			},
			script: FairLock, keys: fk("f:freenter").keys(fk("f:freenter").counter, layout.Marker(layout.LockRequest, "f:freenter", "m")),
			args: []any{lease, "u:1", "1", 60000, 5000, fk("f:freenter").waiters, "publish", counterOnly},
		},
		failure{
			name: "fair lock: a waiter joins an empty queue, budgets of another type",
			given: []given{
				hash("f:fjoinz", 10000, "v:1", "1", layout.TokenField, "5"),
				str(fk("f:fjoinz").timeouts, "x"),
			},
			script: FairLock, keys: fk("f:fjoinz").keys(fk("f:fjoinz").counter),
			args: fairLock("f:fjoinz", "u:1"),
		},
		failure{
			name: "fair lock: a waiter joins an empty queue, liveness of another type",
			given: []given{
				hash("f:fjoina", 10000, "v:1", "1", layout.TokenField, "5"),
				str(fk("f:fjoina").alive, "x"),
			},
			script: FairLock, keys: fk("f:fjoina").keys(fk("f:fjoina").counter),
			args: fairLock("f:fjoina", "u:1"),
		},
		failure{
			name: "fair unlock: the last hold passes to a candidate and reserves tokens, fencing counter corrupt",
			given: []given{
				hash("f:funlock", 10000, "u:1", "1", layout.TokenField, "5"),
				{fk("f:funlock").queue, "list", []string{"d:1", "u:2", "u:3"}, 0},
				zset(fk("f:funlock").timeouts, "d:1", "now+300000", "u:2", "now+600000", "u:3", "now+900000"),
				hash(fk("f:funlock").alive, 60000, "d:1", gone, "u:2", live, "u:3", live),
				str(fk("f:funlock").counter, corrupt),
			},
			script: FairUnlock, keys: fk("f:funlock").keys(fk("f:funlock").counter, fk("f:funlock").channel),
			args: fairUnlock("f:funlock", "u:1", "0", "8", "u:2", 7000),
		},
		failure{
			name: "fair unlock: the last hold grants another client's waiter, fencing counter corrupt",
			given: []given{
				hash("f:fgrant", 10000, "u:1", "1", layout.TokenField, "5"),
				{fk("f:fgrant").queue, "list", []string{"v:1"}, 0},
				zset(fk("f:fgrant").timeouts, "v:1", "now+300000"),
				hash(fk("f:fgrant").alive, 60000, "v:1", lent),
				str(fk("f:fgrant").counter, corrupt),
			},
			script: FairUnlock, keys: fk("f:fgrant").keys(fk("f:fgrant").counter, fk("f:fgrant").channel),
			args: fairUnlock("f:fgrant", "u:1", "2000", "0"),
		},
		failure{
			name: "fair unlock: the last hold grants the waiter behind a dead head, budgets of another type",
			given: []given{
				hash("f:fgrantz", 10000, "u:1", "1", layout.TokenField, "5"),
				{fk("f:fgrantz").queue, "list", []string{"d:1", "v:1"}, 0},
				str(fk("f:fgrantz").timeouts, "x"),
				hash(fk("f:fgrantz").alive, 60000, "d:1", gone, "v:1", lent),
			},
			script: FairUnlock, keys: fk("f:fgrantz").keys(fk("f:fgrantz").counter, fk("f:fgrantz").channel),
			args: fairUnlock("f:fgrantz", "u:1", "2000", "0"),
		},
		failure{
			name: "fair unlock: a dead head purged, budgets of another type", succeeds: true,
			given: []given{
				hash("f:fpurgez", 10000, "u:1", "1", layout.TokenField, "5"),
				{fk("f:fpurgez").queue, "list", []string{"d:1", "v:1"}, 0},
				str(fk("f:fpurgez").timeouts, "x"),
				hash(fk("f:fpurgez").alive, 60000, "d:1", gone, "v:1", live),
			},
			script: FairUnlock, keys: fk("f:fpurgez").keys(fk("f:fpurgez").counter, fk("f:fpurgez").channel),
			args: fairUnlock("f:fpurgez", "u:1", "2000", "0"),
		},
		failure{
			name: "fair unlock: a reentrant owner's last hold, queue of another type",
			given: []given{
				hash("f:fqueue", 10000, "u:1", "1", layout.TokenField, "5"),
				str(fk("f:fqueue").queue, "x"),
			},
			script: FairUnlock, keys: fk("f:fqueue").keys(fk("f:fqueue").counter, fk("f:fqueue").channel, layout.Marker(layout.UnlockLatch, "f:fqueue", "m")),
			args: []any{"u:1", fk("f:fqueue").waiters, "publish", "1", 60000, counterOnly, "0", "0", grantPrefix},
		},
		failure{
			name: "fair pass: the switch reserves tokens, fencing counter corrupt",
			given: []given{
				hash("f:fpass", 10000, "u:1", "1", layout.TokenField, "5"),
				{fk("f:fpass").queue, "list", []string{"u:2", "u:3"}, 0},
				zset(fk("f:fpass").timeouts, "u:2", "now+300000", "u:3", "now+600000"),
				hash(fk("f:fpass").alive, 60000, "u:2", live, "u:3", live),
				str(fk("f:fpass").counter, corrupt),
			},
			script: FairPass, keys: fk("f:fpass").keys(fk("f:fpass").counter, fk("f:fpass").channel),
			args: []any{"u:2", 7000, 6, 8, "", counterOnly},
		},
		failure{
			name: "fair pass: lock of another type",
			given: []given{
				str("f:fpassl", "x"),
				{fk("f:fpassl").queue, "list", []string{"u:2"}, 0},
				zset(fk("f:fpassl").timeouts, "u:2", "now+300000"),
				hash(fk("f:fpassl").alive, 60000, "u:2", live),
			},
			script: FairPass, keys: fk("f:fpassl").keys(fk("f:fpassl").counter, fk("f:fpassl").channel),
			args: []any{"u:2", 7000, 6, 0, "", counterOnly},
		},
		failure{
			name: "fair pass: budgets of another type",
			given: []given{
				hash("f:fpassz", 10000, "u:1", "1", layout.TokenField, "5"),
				{fk("f:fpassz").queue, "list", []string{"u:2"}, 0},
				str(fk("f:fpassz").timeouts, "x"),
				hash(fk("f:fpassz").alive, 60000, "u:2", live),
			},
			script: FairPass, keys: fk("f:fpassz").keys(fk("f:fpassz").counter, fk("f:fpassz").channel),
			args: []any{"u:2", 7000, 6, 0, "", counterOnly},
		},
		failure{
			name: "fair pass: queue of another type",
			given: []given{
				hash("f:fpassq", 10000, "u:1", "1", layout.TokenField, "5"),
				str(fk("f:fpassq").queue, "x"),
			},
			script: FairPass, keys: fk("f:fpassq").keys(fk("f:fpassq").counter, fk("f:fpassq").channel),
			args: []any{"u:2", 7000, 6, 0, "", counterOnly},
		},
		failure{
			name: "fair forceunlock: queue of another type",
			given: []given{
				hash("f:fforce", 10000, owner(1), "1"),
				str(fk("f:fforce").queue, "x"),
			},
			script: FairForceUnlock, keys: fk("f:fforce").keys(fk("f:fforce").channel),
			args: []any{fk("f:fforce").waiters, "publish", grantPrefix},
		},
		failure{
			name: "fair forceunlock: liveness of another type",
			given: []given{
				hash("f:fforcea", 10000, owner(1), "1"),
				{fk("f:fforcea").queue, "list", []string{"v:1"}, 0},
				str(fk("f:fforcea").alive, "x"),
			},
			script: FairForceUnlock, keys: fk("f:fforcea").keys(fk("f:fforcea").channel),
			args: []any{fk("f:fforcea").waiters, "publish", grantPrefix},
		},
		failure{
			name: "fair leave: undo behind a dead head, lock of another type",
			given: []given{
				str("f:fleave", "x"),
				{fk("f:fleave").queue, "list", []string{"d:1", "u:1"}, 0},
				zset(fk("f:fleave").timeouts, "d:1", "now+300000", "u:1", "now+600000"),
				hash(fk("f:fleave").alive, 60000, "d:1", gone, "u:1", live),
			},
			script: FairLeave, keys: fk("f:fleave").keys(fk("f:fleave").channel),
			args: []any{"u:1", fk("f:fleave").waiters, "publish", "1", grantPrefix},
		},
		failure{
			name: "fair leave: undo behind a dead head, hold count of no integer",
			given: []given{
				hash("f:fleavec", 10000, "u:1", corrupt),
				{fk("f:fleavec").queue, "list", []string{"d:1"}, 0},
				zset(fk("f:fleavec").timeouts, "d:1", "now+300000"),
				hash(fk("f:fleavec").alive, 60000, "d:1", gone),
			},
			script: FairLeave, keys: fk("f:fleavec").keys(fk("f:fleavec").channel),
			args: []any{"u:1", fk("f:fleavec").waiters, "publish", "1", grantPrefix},
		},
		failure{
			name: "fair leave: the head leaves, budgets of another type", succeeds: true,
			given: []given{
				{fk("f:fleavez").queue, "list", []string{"u:1", "v:1"}, 0},
				str(fk("f:fleavez").timeouts, "x"),
				hash(fk("f:fleavez").alive, 60000, "u:1", live, "v:1", live),
			},
			script: FairLeave, keys: fk("f:fleavez").keys(fk("f:fleavez").channel),
			args: []any{"u:1", fk("f:fleavez").waiters, "publish", "0", grantPrefix},
		},
	)
	for _, c := range []struct{ name, value string }{{"a hash", ""}, {"no number", corrupt}} {
		value := func(key string) given {
			if c.value == "" {
				return hash(key, 0, "a", "1")
			}
			return str(key, c.value)
		}
		name, ch, marker := sem("f:sem")
		cases = append(cases,
			failure{
				name:   "sem acquire: count of " + c.name,
				given:  []given{value(name), str(marker+"old", "1")},
				script: SemAcquire, keys: []string{name, marker + "a", marker + "old"},
				args: []any{1, 60000},
			},
			failure{
				name:   "sem drain: count of " + c.name,
				given:  []given{value(name), str(marker+"old", "1")},
				script: SemDrain, keys: []string{name, marker + "d", marker + "old"},
				args: []any{60000},
			},
			failure{
				name:   "sem release: count of " + c.name,
				given:  []given{value(name), str(marker+"old", "1")},
				script: SemRelease, keys: []string{name, marker + "r", marker + "old"},
				args: []any{2, "publish", 60000, ch, 1, "numsub"},
			},
			failure{
				name:   "sem undo: count of " + c.name,
				given:  []given{value(name), str(marker+"u", "1")},
				script: SemUndo, keys: []string{name, marker + "u"},
				args: []any{1, "publish", 60000, ch},
			},
			failure{
				name:   "latch countdown: count of " + c.name,
				given:  []given{value("f:latch"), str(layout.Marker(layout.LatchRequest, "f:latch", "old"), "1")},
				script: LatchCountDown, keys: []string{"f:latch", layout.Marker(layout.LatchRequest, "f:latch", "c"), layout.Marker(layout.LatchRequest, "f:latch", "old")},
				args: []any{"publish", 60000, layout.LatchChannel("f:latch", false)},
			},
			failure{
				name:   "permit acquire: an expired permit, count of " + c.name,
				given:  []given{value("f:permit"), zset(permit("f:permit")[1], "expired", "now-1000")},
				script: PermitAcquire, keys: permit("f:permit")[:3],
				args: []any{testPermitID, lease, "publish", "", 2000, "0"},
			},
			failure{
				name:   "permit acquire: a retry of a held permit, count of " + c.name,
				given:  []given{value("f:permit"), zset(permit("f:permit")[1], testPermitID, "now+10000")},
				script: PermitAcquire, keys: permit("f:permit")[:3],
				args: []any{testPermitID, lease, "publish", "", 2000, "0"},
			},
			failure{
				name:   "permit release: count of " + c.name,
				given:  []given{value("f:permit"), zset(permit("f:permit")[1], testPermitID, "now+10000")},
				script: PermitRelease, keys: permit("f:permit"),
				args: []any{testPermitID, "publish", "numsub", "c0ffee", clientGrants("c0ffee"), 2000, "1", ""},
			},
			failure{
				name:   "permit available: an expired permit, count of " + c.name,
				given:  []given{value("f:permit"), zset(permit("f:permit")[1], "expired", "now-1000")},
				script: PermitAvailable, keys: permit("f:permit")[:2],
				args: []any{"publish", permitCh("f:permit")},
			},
			failure{
				name:   "permit update lease: an expired permit, count of " + c.name,
				given:  []given{value("f:permit"), zset(permit("f:permit")[1], "expired", "now-1000", testPermitID, "now+10000")},
				script: PermitUpdateLease, keys: permit("f:permit")[:2],
				args: []any{testPermitID, lease, "publish", permitCh("f:permit")},
			},
		)
	}
	cases = append(cases,
		failure{
			name: "permit acquire: none free after reclaiming, queue of another type",
			given: []given{
				str("f:pqueue", "-1"),
				zset(permit("f:pqueue")[1], "expired", "now-1000"),
				str(permit("f:pqueue")[3], "x"),
			},
			script: PermitAcquire, keys: permit("f:pqueue"),
			args: []any{testPermitID, lease, "publish", lease + "|o|c0ffee:1", 2000, "0"},
		},
		failure{
			name: "permit release: a grant to the first queued call, queue of another type",
			given: []given{
				str("f:prelq", "0"),
				zset(permit("f:prelq")[1], testPermitID, "now+10000"),
				str(permit("f:prelq")[3], "x"),
			},
			script: PermitRelease, keys: permit("f:prelq"),
			args: []any{testPermitID, "publish", "numsub", "c0ffee", clientGrants("c0ffee"), 2000, "1", ""},
		},
	)

	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			fresh(t)
			for _, g := range c.given {
				g.write(t)
			}
			before := snapshot(t)
			v, err := c.script.Run(context.Background(), rdb, Keys(c.keys...), c.args...).Result()
			if c.succeeds {
				if err != nil {
					t.Fatalf("%s: %v, want success", c.script.Name(), err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), "WRONGTYPE") {
				t.Fatalf("%s = %v, %v; want a WRONGTYPE error", c.script.Name(), v, err)
			}
			if d := before.diff(snapshot(t)); d != "" {
				t.Fatalf("%s failed (%v) after writing: %s", c.script.Name(), err, d)
			}
		})
	}
}

// TestRenewSkipsKeysOfAnotherType: a renewal of many holds in one call
// reports a hold whose key now holds another type as gone, and renews
// the others, where it failed, after renewing the holds before it, and
// left every hold of the call unconfirmed.
func TestRenewSkipsKeysOfAnotherType(t *testing.T) {
	fresh(t)
	ctx := context.Background()
	k := newRW("f:rwrenew")
	for _, g := range []given{
		hash("f:renew:a", 1000, "u:1", "1"),
		str("f:renew:b", "x"),
		hash("f:rwrenew", 1000, "mode", "read", "r:1", "1"),
		{k.hold("r:1", 1), "string", []string{"1"}, 1000},
		str("f:rwrenew:b", "x"),
		zset(layout.PermitTimeouts("f:prenew"), testPermitID, "now+1000"),
		str("{f:prenew}:b", "x"),
	} {
		g.write(t)
	}
	for _, c := range []struct {
		script *Script
		keys   []string
		args   []any
		long   string
	}{
		{Renew, []string{"f:renew:a", "f:renew:b"}, []any{"u:1", 30000, "u:1", 30000}, "f:renew:a"},
		{RWRenew, []string{"f:rwrenew", "f:rwrenew:b"}, []any{"r:1", 30000, "r:1", 30000, k.holds, newRW("f:rwrenew:b").holds}, k.hold("r:1", 1)},
		{PermitRenew, []string{layout.PermitTimeouts("f:prenew"), "{f:prenew}:b"}, []any{testPermitID, 30000, testPermitID, 30000}, ""},
	} {
		v, err := c.script.Run(ctx, rdb, Keys(c.keys...), c.args...).Int64Slice()
		if err != nil || fmt.Sprint(v) != "[1 0]" {
			t.Fatalf("%s = %v, %v; want [1 0]", c.script.Name(), v, err)
		}
		if c.long != "" && pttl(t, c.long) < 20*time.Second {
			t.Fatalf("%s: %s not renewed", c.script.Name(), c.long)
		}
	}
	if s := rdb.ZScore(ctx, layout.PermitTimeouts("f:prenew"), testPermitID).Val(); time.Until(time.UnixMilli(int64(s))) < 20*time.Second {
		t.Fatal("permit_renew: the permit was not renewed")
	}
	if v := rdb.Get(ctx, "f:renew:b").Val(); v != "x" {
		t.Fatalf("the key of another type was changed to %q", v)
	}
}

// testPermitID is a permit id (16 bytes) for the tests.
const testPermitID = "0123456789abcdef"

// TestStartChecksPublish: start.lua writes the Client's identity only for
// a Redis user that may publish on every channel it is given, and names
// the channels it may not publish on otherwise, by redis.acl_check_cmd
// and, as on Redis 6.2, which lacks it, by publishing.
func TestStartChecksPublish(t *testing.T) {
	fresh(t)
	ctx := context.Background()
	lacksCheck := &Script{name: "start", src: strings.Replace(Start.Source(), "if redis.acl_check_cmd then", "if false then", 1)}
	if lacksCheck.src == Start.Source() {
		t.Fatal("start.lua no longer reads redis.acl_check_cmd")
	}
	sum := sha1.Sum([]byte(lacksCheck.src))
	lacksCheck.sha = hex.EncodeToString(sum[:])
	lacksCheck.shaArg, lacksCheck.srcArg = lacksCheck.sha, lacksCheck.src
	const user = "relock-start-check"
	t.Cleanup(func() { rdb.Do(context.Background(), "ACL", "DELUSER", user) })
	lock, rw := layout.Companion(layout.LockChannel, "x"), layout.Companion(layout.RWChannel, "x")
	for _, s := range []*Script{Start, lacksCheck} {
		for _, c := range []struct {
			rules  []any
			denied string
		}{
			{[]any{"~*", "+@all", "&" + layout.Pattern(layout.LockChannel)}, fmt.Sprint([]string{rw})},
			{[]any{"~*", "+@all", "&*", "-publish"}, fmt.Sprint([]string{lock, rw})},
			{[]any{"~*", "+@all", "&*"}, "[]"},
		} {
			if err := rdb.Do(ctx, append([]any{"ACL", "SETUSER", user, "reset", "on", ">pw"}, c.rules...)...).Err(); err != nil {
				t.Fatal(err)
			}
			as := redis.NewClient(&redis.Options{Addr: rdb.Options().Addr, Username: user, Password: "pw"})
			key := layout.ClientKey("start-check")
			v, err := s.Run(ctx, as, Keys(key), "publish", 2, lock, rw, 60000, "host", "h").StringSlice()
			_ = as.Close()
			if err != nil || fmt.Sprint(v) != c.denied {
				t.Fatalf("%v, acl_check_cmd %v: start = %v, %v; want %s", c.rules, s == Start, v, err, c.denied)
			}
			written := rdb.HGet(ctx, key, "host").Val() == "h" && pttl(t, key) > 50*time.Second
			if written != (c.denied == "[]") {
				t.Fatalf("%v, acl_check_cmd %v: identity written %v", c.rules, s == Start, written)
			}
			rdb.Del(ctx, key)
		}
		// A server without the command (renamed away) answers 0, and
		// nothing is written.
		key := layout.ClientKey("start-check")
		v, err := s.Run(ctx, rdb, Keys(key), "nosuchpublish", 2, lock, rw, 60000, "host", "h").Result()
		if err != nil || v != int64(0) || rdb.Exists(ctx, key).Val() != 0 {
			t.Fatalf("acl_check_cmd %v: start with an unknown command = %v, %v; want 0 and nothing written", s == Start, v, err)
		}
	}
}

// TestOutOfMemoryPassesThrough: where a script reads a write's error to
// tell a count that holds no integer (WRONGTYPE), a server at maxmemory
// still answers OOM, as the server gives it.
func TestOutOfMemoryPassesThrough(t *testing.T) {
	fresh(t)
	ctx := context.Background()
	for _, g := range []given{
		zset(layout.PermitTimeouts("f:oom"), testPermitID, "now+10000"),
		str(layout.Marker(layout.SemaphoreRequest, "f:oom", "u"), "1"),
	} {
		g.write(t)
	}
	if err := rdb.ConfigSet(ctx, "maxmemory", "1").Err(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rdb.ConfigSet(context.Background(), "maxmemory", "0") })
	for _, c := range []struct {
		script *Script
		keys   []string
		args   []any
	}{
		{Lock, lockKeys("f:oom", ""), []any{30000, "u:1", counterOnly, "", 1}},
		{RWWriteLock, newRW("f:oom").keys(""),
			[]any{30000, "w:1", "0", 60000, counterOnly, "", 2000, "0"}},
		{PermitRelease, []string{"f:oom", layout.PermitTimeouts("f:oom"), layout.Companion(layout.SemaphoreChannel, "f:oom")},
			[]any{testPermitID, "publish", "numsub", "c0ffee", clientGrants("c0ffee"), 2000, "0", ""}},
		{SemUndo, []string{"f:oom", layout.Marker(layout.SemaphoreRequest, "f:oom", "u")}, []any{1, "publish", 60000, layout.Companion(layout.SemaphoreChannel, "f:oom")}},
	} {
		err := c.script.Run(ctx, rdb, Keys(c.keys...), c.args...).Err()
		if err == nil || !strings.HasPrefix(err.Error(), "OOM") {
			t.Errorf("%s at maxmemory: %v, want OOM", c.script.Name(), err)
		}
	}
}
