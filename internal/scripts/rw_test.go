package scripts

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/relock-go/relock/internal/layout"
)

// rwKeys are the keys and arguments of one read-write lock name in tests.
type rwKeys struct {
	name, counter, token, channel, holds, queue string
}

func newRW(name string) rwKeys {
	return rwKeys{name, layout.Companion(layout.FencingCounter, name), layout.Companion(layout.Token, name), layout.Companion(layout.RWChannel, name), layout.ReaderHolds(name), layout.Companion(layout.RWQueue, name)}
}

func (k rwKeys) hold(owner string, i int) string {
	return layout.ReaderHold(k.name, owner, i)
}

// keys returns the KEYS of the lock scripts, as a Client without
// WithPerNameTokens gives them, with last unless it is "" (a marker, or
// the hold key a one-shot reader writes).
func (k rwKeys) keys(last string) []string {
	keys := []string{k.name, k.counter, k.queue}
	if last != "" {
		keys = append(keys, last)
	}
	return keys
}

// releaseKeys returns the KEYS of the release scripts, with the guard (the
// release channel) and marker last unless it is "".
func (k rwKeys) releaseKeys(marker string) []string {
	keys := []string{k.name, k.counter, k.queue, k.channel}
	if marker != "" {
		keys = append(keys, marker)
	}
	return keys
}

func (k rwKeys) rlock(t *testing.T, owner string, lease int, marker string) int64 {
	t.Helper()
	flag, m := "0", k.hold(owner, 1)
	if marker != "" {
		flag, m = "1", layout.Marker(layout.LockRequest, k.name, marker)
	}
	return run(t, RWReadLock, k.keys(m), lease, owner, flag, 60000, k.holds, "", 2000, "0").(int64)
}

func (k rwKeys) lock(t *testing.T, owner string, lease int, marker string) int64 {
	t.Helper()
	flag, m := "0", ""
	if marker != "" {
		flag, m = "1", layout.Marker(layout.LockRequest, k.name, marker)
	}
	return run(t, RWWriteLock, k.keys(m), lease, owner, flag, 60000, counterOnly, "", 2000, "0").(int64)
}

// unlock runs the unlock script of one side; mode is "0", "1" or "2" with
// marker the release marker or request marker's suffix.
func (k rwKeys) unlock(t *testing.T, write bool, field, mode, marker string) int64 {
	t.Helper()
	s, m := RWReadUnlock, ""
	if write {
		s = RWWriteUnlock
	}
	switch mode {
	case "1":
		m = layout.Marker(layout.UnlockLatch, k.name, marker)
	case "2":
		m = layout.Marker(layout.LockRequest, k.name, marker)
	}
	return run(t, s, k.releaseKeys(m), field, k.channel, "publish", mode, 60000, k.holds,
		"numsub", "c0ffee", clientGrants("c0ffee"), 2000, "", "1", counterOnly).(int64)
}

// handOver runs the write unlock script of client c0ffee releasing the
// writer field, with preferred (ARGV[14]) as its own one-shot writer to
// hand the lock to.
func (k rwKeys) handOver(t *testing.T, field, preferred string) int64 {
	t.Helper()
	return run(t, RWWriteUnlock, k.releaseKeys(""), field, k.channel, "publish", "0", 60000, k.holds,
		"numsub", "c0ffee", clientGrants("c0ffee"), 2000, "", "1", counterOnly, preferred).(int64)
}

// passOn runs the write unlock script as a switch (ARGV[15]) of client
// c0ffee: its write hold field was passed in process to its writer
// member with token, reserving the next block if reserve is "1".
func (k rwKeys) passOn(t *testing.T, field, member string, token int64, reserve string) int64 {
	t.Helper()
	return run(t, RWWriteUnlock, k.releaseKeys(""), field, k.channel, "publish", "0", 60000, k.holds,
		"numsub", "c0ffee", clientGrants("c0ffee"), 2000, "", "1", counterOnly, member, token, reserve).(int64)
}

// handed reads a release's reply -(2t + p) that handed the lock to the
// releasing client's writer: the token t, and whether tokens were
// reserved for passing it on in process.
func handed(t *testing.T, v int64) (int64, bool) {
	t.Helper()
	if v >= 0 {
		t.Fatalf("release = %d, want the lock handed (negative)", v)
	}
	return -v >> 1, -v&1 == 1
}

func pttl(t *testing.T, key string) time.Duration {
	t.Helper()
	return rdb.PTTL(context.Background(), key).Val()
}

func TestRWHeaders(t *testing.T) {
	fresh(t)
	for _, s := range []*Script{RWReadLock, RWWriteLock, RWReadUnlock, RWWriteUnlock, RWRenew, RWForceUnlock} {
		header := s.Source()[:strings.Index(s.Source(), "\n\n")]
		for _, want := range []string{"-- " + s.Name() + ".lua:", "KEYS[", "ARGV[", "Returns"} {
			if !strings.Contains(header, want) {
				t.Errorf("%s.lua header lacks %q", s.Name(), want)
			}
		}
	}
}

// TestRWReaders: readers share the lock, each hold with its own key and
// TTL, in Redisson's layout; a writer is refused with the TTL; the last
// read release frees the lock and publishes "0".
func TestRWReaders(t *testing.T) {
	fresh(t)
	ctx := context.Background()
	k := newRW("s:rw:readers")
	rdb.Set(ctx, k.counter, 7, 0)
	if v := k.rlock(t, "u:1", 10000, ""); v != 7 {
		t.Fatalf("first reader = %d, want the current token 7", v)
	}
	if v := k.rlock(t, "u:1", 10000, ""); v != 7 {
		t.Fatalf("one-shot retry = %d", v)
	}
	if v := k.rlock(t, "u:2", 20000, "a"); v != 7 {
		t.Fatalf("second reader = %d", v)
	}
	if v := k.rlock(t, "u:2", 5000, "b"); v != 7 {
		t.Fatalf("re-entry = %d", v)
	}
	k.rlock(t, "u:2", 5000, "b") // a retry of request b
	got := rdb.HGetAll(ctx, k.name).Val()
	if fmt.Sprint(got) != "map[mode:read u:1:1 u:2:2]" {
		t.Fatalf("hash %v", got)
	}
	if d := pttl(t, k.hold("u:2", 2)); d <= 4*time.Second || d > 5*time.Second {
		t.Fatalf("hold key 2 TTL %v, want its own lease of 5s", d)
	}
	if d := pttl(t, k.name); d <= 19*time.Second {
		t.Fatalf("hash TTL %v, want the longest lease 20s", d)
	}
	if n := rdb.Exists(ctx, k.hold("u:2", 3)).Val(); n != 0 {
		t.Fatal("a retried request made a hold key")
	}
	v := k.lock(t, "u:3", 10000, "")
	if ttl := -v - 2; v >= 0 || ttl <= 19000 {
		t.Fatalf("writer over readers = %d, want -(ttl+2)", v)
	}
	if rdb.Get(ctx, k.counter).Val() != "7" {
		t.Fatal("a refused writer advanced the token")
	}

	ps := rdb.Subscribe(ctx, k.channel)
	defer ps.Close()
	if _, err := ps.Receive(ctx); err != nil {
		t.Fatal(err)
	}
	// A release takes the owner's highest-numbered hold key: u:2's 5s one.
	if v := k.unlock(t, false, "u:2", "1", "r1"); v != 1 {
		t.Fatalf("unlock = %d", v)
	}
	if v := k.unlock(t, false, "u:2", "1", "r1"); v != 1 {
		t.Fatalf("retried unlock = %d", v)
	}
	if rdb.HGet(ctx, k.name, "u:2").Val() != "1" || rdb.Exists(ctx, k.hold("u:2", 2)).Val() != 0 {
		t.Fatal("release did not remove one count and the highest hold key")
	}
	if v := k.unlock(t, false, "u:2", "0", ""); v != 1 {
		t.Fatalf("unlock = %d", v)
	}
	// Only u:1's 10s hold is left: the hash's TTL follows it down, with no
	// message on the release channel (Redisson's read unlock publishes
	// only when it deletes the lock; the queue's waiters are told on their
	// grant channels, see TestRWShorterLifeTold).
	if d := pttl(t, k.name); d > 10*time.Second {
		t.Fatalf("hash TTL %v after the longest reader left, want at most 10s", d)
	}
	if v := k.unlock(t, false, "u:9", "0", ""); v != 0 {
		t.Fatalf("unlock by a non-holder = %d", v)
	}
	if v := k.unlock(t, false, "u:1", "0", ""); v != 2 {
		t.Fatalf("last unlock = %d, want 2", v)
	}
	if n := rdb.Exists(ctx, k.name, k.hold("u:1", 1)).Val(); n != 0 {
		t.Fatalf("%d keys left", n)
	}
	if msg, err := ps.ReceiveMessage(ctx); err != nil || msg.Payload != "0" {
		t.Fatalf("release message %v, %v", msg, err)
	}
}

// TestRWHoldKeysOfAnyName: every script that names reader hold keys
// names them by the rule it is given (layout.ReaderHolds), for a name
// with a hash tag of its own and percent signs too.
func TestRWHoldKeysOfAnyName(t *testing.T) {
	fresh(t)
	ctx := context.Background()
	u1, u2, u3 := owner(1), owner(2), owner(3)
	for _, name := range []string{"s:rw:any%d%s%%", "s:{rw%}:any"} {
		k := newRW(name)
		k.rlock(t, u1, 10000, "")
		k.rlock(t, u2, 10000, "a")
		k.rlock(t, u2, 10000, "b")
		if n := rdb.Exists(ctx, k.hold(u1, 1), k.hold(u2, 1), k.hold(u2, 2)).Val(); n != 3 {
			t.Fatalf("%q: %d of 3 hold keys", name, n)
		}
		rdb.Del(ctx, k.hold(u1, 1)) // u:1 died
		if v := k.unlock(t, false, u2, "1", "r"); v != 1 {
			t.Fatalf("%q: unlock = %d", name, v)
		}
		if got := rdb.HGetAll(ctx, k.name).Val(); fmt.Sprint(got) != "map["+u2+":1 mode:read]" || rdb.Exists(ctx, k.hold(u2, 2)).Val() != 0 {
			t.Fatalf("%q: hash %v after a release beside a dead reader", name, got)
		}
		// The writes of a read release and a force unlock.
		if v := run(t, RWForceUnlock, []string{k.name, k.queue, k.channel}, k.channel, "publish", k.holds, clientGrants("c0ffee"), "c0ffee"); v != int64(1) {
			t.Fatalf("%q: force unlock = %v", name, v)
		}
		if n := rdb.Exists(ctx, k.name, k.hold(u2, 1)).Val(); n != 0 {
			t.Fatalf("%q: %d keys left by force unlock", name, n)
		}
		// A writer's read hold keeps the lock in read mode after its write
		// release, for as long as its hold key lives.
		if v := k.lock(t, u3, 10000, ""); v < 0 {
			t.Fatalf("%q: write lock = %d", name, v)
		}
		k.rlock(t, u3, 5000, "c")
		if v := k.unlock(t, true, u3+":write", "0", ""); v != 1 {
			t.Fatalf("%q: write unlock = %d, want 1: still reading", name, v)
		}
		if d := pttl(t, k.name); d <= 4*time.Second || d > 5*time.Second {
			t.Fatalf("%q: hash TTL %v, want its read hold's 5s", name, d)
		}
	}
}

// TestRWDeadReader: a reader whose hold keys expired is dropped at the
// next read release, and when no live reader is left the lock is freed.
func TestRWDeadReader(t *testing.T) {
	fresh(t)
	ctx := context.Background()
	k := newRW("s:rw:dead")
	k.rlock(t, "u:1", 10000, "")
	k.rlock(t, "u:2", 10000, "")
	k.rlock(t, "u:3", 10000, "")
	rdb.Del(ctx, k.hold("u:2", 1)) // u:2 died: its hold key expired
	if v := k.unlock(t, false, "u:1", "0", ""); v != 1 {
		t.Fatalf("unlock = %d", v)
	}
	if got := rdb.HGetAll(ctx, k.name).Val(); fmt.Sprint(got) != "map[mode:read u:3:1]" {
		t.Fatalf("hash %v: the dead reader's field should be gone", got)
	}
	rdb.Del(ctx, k.hold("u:3", 1))
	k.rlock(t, "u:4", 10000, "")
	if v := k.unlock(t, false, "u:4", "0", ""); v != 2 {
		t.Fatalf("unlock with only dead readers left = %d, want 2 (free)", v)
	}
	if rdb.Exists(ctx, k.name).Val() != 0 {
		t.Fatal("lock not freed")
	}
}

// TestRWWriter: the writer excludes others, advances the token, may read
// too (downgrade), and keeps reading after its write unlock; a reader
// asking for the write lock is refused with 0 and nothing changes.
func TestRWWriter(t *testing.T) {
	fresh(t)
	ctx := context.Background()
	k := newRW("s:rw:writer")
	if v := k.lock(t, "u:1", 10000, "a"); v != 1 {
		t.Fatalf("write = %d, want token 1", v)
	}
	if v := k.lock(t, "u:1", 10000, "b"); v != 1 {
		t.Fatalf("write re-entry = %d", v)
	}
	k.lock(t, "u:1", 10000, "b") // retry
	if n := rdb.HGet(ctx, k.name, "u:1:write").Val(); n != "2" {
		t.Fatalf("writer count %q", n)
	}
	if v := k.rlock(t, "u:2", 10000, ""); v >= 0 {
		t.Fatalf("reader over a writer = %d", v)
	}
	if v := k.lock(t, "u:2", 10000, ""); v >= 0 {
		t.Fatalf("writer over a writer = %d", v)
	}
	if v := k.rlock(t, "u:1", 10000, "c"); v != 1 {
		t.Fatalf("downgrade read = %d", v)
	}
	if got := rdb.HGetAll(ctx, k.name).Val(); fmt.Sprint(got) != "map[mode:write relock_token:1 u:1:1 u:1:write:2]" {
		t.Fatalf("hash %v", got)
	}
	// The writer's own read release leaves the write lock as it is.
	k.rlock(t, "u:1", 10000, "d")
	if v := k.unlock(t, false, "u:1", "0", ""); v != 1 {
		t.Fatalf("read unlock under the writer = %d", v)
	}
	if rdb.HGet(ctx, k.name, "mode").Val() != "write" {
		t.Fatal("mode changed")
	}

	ps := rdb.Subscribe(ctx, k.channel)
	defer ps.Close()
	if _, err := ps.Receive(ctx); err != nil {
		t.Fatal(err)
	}
	if v := k.unlock(t, true, "u:1:write", "1", "w1"); v != 1 {
		t.Fatalf("write unlock = %d", v)
	}
	if v := k.unlock(t, true, "u:1:write", "1", "w2"); v != 1 {
		t.Fatalf("last write unlock = %d, want 1: still reading", v)
	}
	if got := rdb.HGetAll(ctx, k.name).Val(); fmt.Sprint(got) != "map[mode:read u:1:1]" {
		t.Fatalf("hash after downgrade %v", got)
	}
	if msg, err := ps.ReceiveMessage(ctx); err != nil || msg.Payload != "1" {
		t.Fatalf("downgrade message %v, %v: readers must be woken", msg, err)
	}
	if v := k.rlock(t, "u:2", 10000, ""); v != 1 {
		t.Fatalf("reader after the downgrade = %d", v)
	}
	// Upgrade is refused, and changes nothing.
	before := rdb.HGetAll(ctx, k.name).Val()
	if v := k.lock(t, "u:1", 10000, "e"); v != 0 {
		t.Fatalf("upgrade = %d, want 0", v)
	}
	if v := k.lock(t, "u:2", 10000, ""); v != 0 {
		t.Fatalf("one-shot upgrade = %d, want 0", v)
	}
	if after := rdb.HGetAll(ctx, k.name).Val(); fmt.Sprint(after) != fmt.Sprint(before) {
		t.Fatalf("upgrade changed %v to %v", before, after)
	}
	if rdb.Exists(ctx, layout.Marker(layout.LockRequest, k.name, "e")).Val() != 0 {
		t.Fatal("refused upgrade wrote its request marker")
	}
	k.unlock(t, false, "u:1", "0", "")
	k.unlock(t, false, "u:2", "0", "")
	if v := k.lock(t, "u:3", 10000, ""); v != 2 {
		t.Fatalf("next writer = %d, want token 2", v)
	}
	if v := k.unlock(t, true, "u:3:write", "0", ""); v != 2 {
		t.Fatalf("unlock = %d", v)
	}
	for _, want := range []string{"0", "1"} { // the readers' release, then the writer's
		if msg, err := ps.ReceiveMessage(ctx); err != nil || msg.Payload != want {
			t.Fatalf("release message %v, %v; want %q", msg, err, want)
		}
	}
}

// TestRWUndo: an acquisition is undone only if its request marker shows it
// was applied; a one-shot owner's is undone if its field is there.
func TestRWUndo(t *testing.T) {
	fresh(t)
	ctx := context.Background()
	k := newRW("s:rw:undo")
	k.rlock(t, "u:1", 10000, "a")
	if v := k.unlock(t, false, "u:1", "2", "never-sent"); v != 0 {
		t.Fatalf("undo of an unapplied request = %d", v)
	}
	k.rlock(t, "u:1", 10000, "b")
	if v := k.unlock(t, false, "u:1", "2", "b"); v != 1 {
		t.Fatalf("undo of an applied request = %d", v)
	}
	if n := rdb.HGet(ctx, k.name, "u:1").Val(); n != "1" || rdb.Exists(ctx, k.hold("u:1", 2)).Val() != 0 {
		t.Fatalf("count %q after undo", n)
	}
	if v := k.unlock(t, false, "u:1", "2", "a"); v != 2 {
		t.Fatalf("undo of the first request = %d", v)
	}
	k.lock(t, "u:2", 10000, "")
	if v := k.unlock(t, true, "u:2:write", "0", ""); v != 2 {
		t.Fatalf("one-shot write undo = %d", v)
	}
	if v := k.unlock(t, true, "u:2:write", "0", ""); v != 0 {
		t.Fatalf("second undo = %d", v)
	}
}

// TestRWRenew: a reader's renewal extends its own hold keys and the hash,
// never another reader's; a reader without live hold keys is gone.
func TestRWRenew(t *testing.T) {
	fresh(t)
	ctx := context.Background()
	k := newRW("s:rw:renew")
	k.rlock(t, "u:1", 1000, "")
	k.rlock(t, "u:2", 1000, "x")
	k.rlock(t, "u:2", 1000, "y")
	k.rlock(t, "u:3", 1000, "")
	rdb.Del(ctx, k.hold("u:3", 1))
	// A name with a hash tag of its own, and a percent sign, which the
	// rule of its hold keys doubles.
	tagged := newRW("s:{rw}:renew%d")
	rdb.HSet(ctx, tagged.name, "mode", "read", "u:5", 1)
	rdb.Set(ctx, tagged.hold("u:5", 1), 1, time.Second)
	v := run(t, RWRenew, []string{k.name, k.name, k.name, k.name, tagged.name},
		"u:2", "60000", "u:1", "0", "u:3", "60000", "u:4", "60000", "u:5", "60000",
		k.holds, k.holds, k.holds, k.holds, tagged.holds).([]any)
	if fmt.Sprint(v) != "[1 1 0 0 1]" {
		t.Fatalf("renew = %v, want [1 1 0 0 1]", v)
	}
	for _, key := range []string{k.hold("u:2", 1), k.hold("u:2", 2), k.name, tagged.hold("u:5", 1)} {
		if d := pttl(t, key); d < 59*time.Second {
			t.Fatalf("%s TTL %v, want renewed", key, d)
		}
	}
	if d := pttl(t, k.hold("u:1", 1)); d > time.Second {
		t.Fatalf("another reader's hold key was renewed: %v", d)
	}
	// A key of another type holds no hold: gone, without failing the call
	// (see TestRenewSkipsKeysOfAnotherType).
	rdb.Set(ctx, "s:rw:str", "x", 0)
	if v, err := RWRenew.Run(ctx, rdb, Keys("s:rw:str"), "u:1", "0", newRW("s:rw:str").holds).Int64Slice(); err != nil || fmt.Sprint(v) != "[0]" {
		t.Fatalf("renew of a string = %v, %v; want [0]", v, err)
	}
}

func TestRWForceUnlock(t *testing.T) {
	fresh(t)
	ctx := context.Background()
	u1, u2 := owner(1), owner(2)
	k := newRW("s:rw:force")
	k.rlock(t, u1, 10000, "a")
	k.rlock(t, u1, 10000, "b")
	k.rlock(t, u2, 10000, "")
	ps := rdb.Subscribe(ctx, k.channel)
	defer ps.Close()
	if _, err := ps.Receive(ctx); err != nil {
		t.Fatal(err)
	}
	if v := run(t, RWForceUnlock, []string{k.name, k.queue, k.channel}, k.channel, "publish", k.holds, clientGrants("c0ffee"), "c0ffee"); v != int64(1) {
		t.Fatalf("force unlock = %v", v)
	}
	if n := rdb.Exists(ctx, k.name, k.hold(u1, 1), k.hold(u1, 2), k.hold(u2, 1)).Val(); n != 0 {
		t.Fatalf("%d keys left", n)
	}
	if msg, err := ps.ReceiveMessage(ctx); err != nil || msg.Payload != "1" {
		t.Fatalf("message %v, %v", msg, err)
	}
	if v := run(t, RWForceUnlock, []string{k.name, k.queue, k.channel}, k.channel, "publish", k.holds, clientGrants("c0ffee"), "c0ffee"); v != int64(0) {
		t.Fatalf("force unlock of a free lock = %v", v)
	}
	rdb.Set(ctx, "s:rw:str2", "x", 0)
	if err := RWForceUnlock.Run(ctx, rdb, Keys("s:rw:str2", "ch", "q"), "1", "publish", "{s:rw:str2}", clientGrants("c0ffee"), "c0ffee").Err(); err == nil || !strings.Contains(err.Error(), "WRONGTYPE") {
		t.Fatalf("force unlock of a string: %v", err)
	}
}

// TestRWOtherHash: a hash without a mode field (a Mutex's) is held by
// another kind of lock: neither side takes it.
func TestRWOtherHash(t *testing.T) {
	fresh(t)
	ctx := context.Background()
	k := newRW("s:rw:mutex")
	rdb.HSet(ctx, k.name, "u:1", 1)
	rdb.PExpire(ctx, k.name, 10*time.Second)
	if v := k.rlock(t, "u:1", 10000, ""); v >= 0 {
		t.Fatalf("reader over a mutex hash = %d", v)
	}
	if v := k.lock(t, "u:2", 10000, ""); v >= 0 {
		t.Fatalf("writer over a mutex hash = %d", v)
	}
	if v := k.unlock(t, false, "u:1", "0", ""); v != 0 {
		t.Fatalf("read unlock of a mutex hash = %d", v)
	}
	if got := rdb.HGetAll(ctx, k.name).Val(); fmt.Sprint(got) != "map[u:1:1]" {
		t.Fatalf("mutex hash changed: %v", got)
	}
}

// TestRWHandOwnWriter: a release that frees the lock hands it to the
// releasing client's one-shot writer given as ARGV[14] when that writer is
// first in the queue: the reply is minus its token, the hold has the
// writer's lease, and nothing is published on the client's grant channel.
// With another client's writer first, that one is granted by message, for
// at most the grant's 2s.
func TestRWHandOwnWriter(t *testing.T) {
	fresh(t)
	ctx := context.Background()
	k := newRW("s:rw:hand")
	grants := listening(t, clientGrants("c0ffee"))
	t1 := k.lock(t, "c0ffee:1", 30000, "")
	rdb.ZAdd(ctx, k.queue, redis.Z{Score: 1, Member: "30000|o|c0ffee:2"}, redis.Z{Score: 2, Member: "30000|o|beef:1"})
	// Another client's writer behind: nothing reserved for passing on.
	if tok, reserved := handed(t, k.handOver(t, "c0ffee:1:write", "30000|o|c0ffee:2")); tok != t1+1 || reserved {
		t.Fatalf("release handing to the client's own first writer: token %d, reserved %v; want %d, false", tok, reserved, t1+1)
	}
	if got := rdb.HGet(ctx, k.name, "c0ffee:2:write").Val(); got != "1" {
		t.Fatalf("the handed writer's hold %q", got)
	}
	if ttl := pttl(t, k.name); ttl < 29*time.Second {
		t.Fatalf("TTL %v of a handed hold, want the writer's lease", ttl)
	}
	rdb.Publish(ctx, clientGrants("c0ffee"), "mark")
	if m, err := grants.ReceiveMessage(ctx); err != nil || m.Payload != "mark" {
		t.Fatalf("grant channel heard %v (%v) before the mark", m, err)
	}
	// The client's writer named is not first: the first, another
	// client's, is granted by message.
	if v := k.handOver(t, "c0ffee:2:write", "30000|o|c0ffee:9"); v != 3 {
		t.Fatalf("release with another client's writer first = %d, want 3", v)
	}
	if ttl := pttl(t, k.name); ttl > 2*time.Second {
		t.Fatalf("TTL %v of a grant by message, want at most 2s", ttl)
	}
	rdb.Del(ctx, k.name, k.queue, k.counter, k.token)
}

// TestRWHandOwnWriterOutOfQueue: the releasing client's writer named as
// ARGV[14] need not be in the queue (it waits for its client's writers'
// turn): it is handed the lock when the queue is empty or its first is
// another writer of the same client, which keeps its place; not when the
// first is the client's reader or another client's writer, nor when the
// release channel has a subscriber not known to listen.
func TestRWHandOwnWriterOutOfQueue(t *testing.T) {
	fresh(t)
	ctx := context.Background()
	k := newRW("s:rw:handout")
	listening(t, clientGrants("c0ffee"))
	queue := func() string {
		return fmt.Sprint(rdb.ZRange(ctx, k.queue, 0, -1).Val())
	}
	holder := func(owner string) {
		t.Helper()
		if got := rdb.HGet(ctx, k.name, owner+":write").Val(); got != "1" {
			t.Fatalf("%s's hold %q, want it to hold the lock: %v", owner, got, rdb.HGetAll(ctx, k.name).Val())
		}
	}

	// The queue empty.
	t1 := k.lock(t, "c0ffee:1", 30000, "")
	// No one else could be owed it: the next tokens are reserved.
	if tok, reserved := handed(t, k.handOver(t, "c0ffee:1:write", "30000|o|c0ffee:2")); tok != t1+1 || !reserved {
		t.Fatalf("release with no queue: token %d, reserved %v; want %d, true", tok, reserved, t1+1)
	}
	if c := rdb.Get(ctx, k.counter).Val(); c != fmt.Sprint(t1+1+8) {
		t.Fatalf("counter %s after reserving 8 tokens after %d", c, t1+1)
	}
	holder("c0ffee:2")
	if ttl := pttl(t, k.name); ttl < 29*time.Second {
		t.Fatalf("TTL %v of a handed hold, want the writer's lease", ttl)
	}
	// Another writer of the client first, in either kind: it keeps its
	// place.
	for i, first := range []string{"30000|o|c0ffee:7", "30000|O|c0ffee:7", "30000|r|c0ffee:7"} {
		rdb.ZAdd(ctx, k.queue, redis.Z{Score: 1, Member: first}, redis.Z{Score: 2, Member: "30000|o|beef:1"})
		from, to := fmt.Sprintf("c0ffee:%d", 2+i), fmt.Sprintf("c0ffee:%d", 3+i)
		if _, reserved := handed(t, k.handOver(t, from+":write", "30000|o|"+to)); reserved {
			t.Fatalf("release with the client's %s first and another client's writer behind reserved tokens", first)
		}
		holder(to)
		if q := queue(); q != "["+first+" 30000|o|beef:1]" {
			t.Fatalf("queue %s after the hand", q)
		}
		rdb.ZRem(ctx, k.queue, first)
	}
	// Another client's writer first: granted by message.
	if v := k.handOver(t, "c0ffee:5:write", "30000|o|c0ffee:6"); v != 3 {
		t.Fatalf("release with another client's writer first = %d, want 3", v)
	}
	holder("beef:1")
	rdb.Del(ctx, k.name)
	// The client's reader first: freed and announced.
	k.lock(t, "c0ffee:8", 30000, "")
	rdb.ZAdd(ctx, k.queue, redis.Z{Score: 1, Member: "30000|R|c0ffee:9"})
	ch := listening(t, k.channel) // the reader's client listens
	if v := k.handOver(t, "c0ffee:8:write", "30000|o|c0ffee:10"); v != 2 {
		t.Fatalf("release with the client's reader first = %d, want 2 (freed)", v)
	}
	if p := heard(t, ch); p != "1" {
		t.Fatalf("release channel heard %q", p)
	}
	// A subscriber not known to listen (a Redisson waiter): freed.
	rdb.Del(ctx, k.queue)
	k.lock(t, "c0ffee:11", 30000, "")
	if v := k.handOver(t, "c0ffee:11:write", "30000|o|c0ffee:12"); v != 2 {
		t.Fatalf("release with a subscriber not known to listen = %d, want 2 (freed)", v)
	}
	if n := rdb.Exists(ctx, k.name).Val(); n != 0 {
		t.Fatalf("the lock is held after a release that freed it: %v", rdb.HGetAll(ctx, k.name).Val())
	}
	rdb.Del(ctx, k.name, k.queue, k.counter, k.token)
}

// TestRWListeners: a refused attempt tells whether a holder may be other
// than a relock writer; a one-shot writer that does not listen ("o")
// joins the queue only behind a relock writer, one that listens ("O")
// behind anyone. A release grants the first writer when every subscriber
// of the release channel is a client known to listen (a reader or an
// "O"), and otherwise publishes and tells the first writer of each client
// that may not listen ("o" or "r") on its grant channel, as it does when
// the lock turns to read mode.
func TestRWListeners(t *testing.T) {
	fresh(t)
	ctx := context.Background()
	k := newRW("s:rw:listen")
	attemptAs := func(owner, kind, queued string) int64 {
		t.Helper()
		return run(t, RWWriteLock, k.keys(""), 30000, owner, "0", 60000, counterOnly, kind, 2000, queued).(int64)
	}
	attempt := func(owner, kind string) int64 {
		t.Helper()
		return attemptAs(owner, kind, "0")
	}
	decode := func(r int64) (ttl time.Duration, other bool) {
		v := -r - 1
		return time.Duration(v>>1-1) * time.Millisecond, v&1 == 1
	}
	queue := func() string {
		return fmt.Sprint(rdb.ZRange(ctx, k.queue, 0, -1).Val())
	}
	release := func(s *Script, field string) int64 {
		t.Helper()
		return run(t, s, k.releaseKeys(""), field, k.channel, "publish", "0", 60000, k.holds,
			"numsub", "c0ffee", clientGrants("c0ffee"), 2000, "", "1", counterOnly).(int64)
	}

	// Behind a relock writer: not other, and "o" joins.
	k.lock(t, "c0ffee:1", 30000, "")
	ttl, other := decode(attempt("beef:1", "o"))
	if other || ttl < 29*time.Second || ttl > 30*time.Second {
		t.Fatalf("behind a relock writer: ttl %v, other %v", ttl, other)
	}
	if q := queue(); q != "[30000|o|beef:1]" {
		t.Fatalf("queue %s, want the writer that does not listen", q)
	}
	// The only subscriber is the first writer's client, not known to
	// listen: no grant; the writer is told to check.
	beef := listening(t, clientGrants("beef"))
	ch := listening(t, k.channel)
	if v := release(RWWriteUnlock, "c0ffee:1:write"); v != 2 {
		t.Fatalf("release with an unknown listener = %d, want 2 (freed)", v)
	}
	if p := heard(t, ch); p != "1" {
		t.Fatalf("release channel heard %q", p)
	}
	if p := heard(t, beef); p != "n:0:beef:1" {
		t.Fatalf("grant channel heard %q, want the writer told to check", p)
	}

	// Behind a Redisson writer (no relock_token) or readers: other, and
	// "o" does not join, "O" does.
	rdb.Del(ctx, k.queue)
	rdb.HSet(ctx, k.name, "mode", "write", "java:1:write", "1")
	rdb.PExpire(ctx, k.name, 30*time.Second)
	if _, other := decode(attempt("beef:1", "o")); !other {
		t.Fatal("behind a writer without relock_token: not other")
	}
	if q := queue(); q != "[]" {
		t.Fatalf("queue %s: a writer that does not listen joined behind another holder", q)
	}
	rdb.Del(ctx, k.name)
	k.rlock(t, "c0ffee:5", 30000, "")
	if _, other := decode(attempt("beef:1", "O")); !other {
		t.Fatal("behind readers: not other")
	}
	if q := queue(); q != "[30000|O|beef:1]" {
		t.Fatalf("queue %s, want the writer that listens", q)
	}
	// The subscriber is the client of an "O": the last reader's release
	// grants it.
	if v := release(RWReadUnlock, "c0ffee:5"); v != 3 {
		t.Fatalf("release with a known listener = %d, want 3 (granted)", v)
	}
	if p := heard(t, beef); !strings.HasPrefix(p, "g:") {
		t.Fatalf("grant channel heard %q, want a grant", p)
	}
	if rdb.HGet(ctx, k.name, "beef:1:write").Val() != "1" {
		t.Fatal("the granted writer does not hold the lock")
	}

	// A downgrade tells the writers that may not listen, once per client,
	// and not the readers.
	rdb.Del(ctx, k.name)
	k.lock(t, "c0ffee:1", 30000, "")
	k.rlock(t, "c0ffee:1", 30000, "")
	rdb.ZAdd(ctx, k.queue, redis.Z{Score: 1, Member: "30000|R|beef:7"}, redis.Z{Score: 2, Member: "30000|r|beef:2"},
		redis.Z{Score: 3, Member: "30000|o|beef:3"})
	if v := release(RWWriteUnlock, "c0ffee:1:write"); v != 1 {
		t.Fatalf("downgrade = %d", v)
	}
	if p := heard(t, ch); p != "1" {
		t.Fatalf("release channel heard %q", p)
	}
	if p := heard(t, beef); p != "n:0:beef:2" {
		t.Fatalf("grant channel heard %q, want the first writer told", p)
	}
	rdb.Publish(ctx, clientGrants("beef"), "mark")
	if p := heard(t, beef); p != "mark" {
		t.Fatalf("grant channel heard %q before the mark: one word per client", p)
	}
	rdb.Del(ctx, k.name, k.queue, k.counter, k.token, k.hold("c0ffee:1", 1), k.hold("c0ffee:5", 1))

	// A writer queued as "o" that comes to listen takes its place as "O".
	k.rlock(t, "c0ffee:5", 30000, "")
	rdb.ZAdd(ctx, k.queue, redis.Z{Score: 5, Member: "30000|o|beef:1"}, redis.Z{Score: 6, Member: "30000|O|beef:4"})
	attemptAs("beef:1", "O", "2")
	got := rdb.ZRangeWithScores(ctx, k.queue, 0, -1).Val()
	if fmt.Sprint(got) != "[{5 30000|O|beef:1} {6 30000|O|beef:4}]" {
		t.Fatalf("queue %v, want the writer's \"O\" in the place of its \"o\"", got)
	}
	// Leaving as "O" takes an "o" not replaced too.
	rdb.ZAdd(ctx, k.queue, redis.Z{Score: 7, Member: "30000|o|beef:4"})
	run(t, RWWriteUnlock, k.releaseKeys(""), "beef:4:write", k.channel, "publish", "0", 60000, k.holds,
		"numsub", "c0ffee", clientGrants("c0ffee"), 2000, "30000|O|beef:4", "1", counterOnly)
	if q := queue(); q != "[30000|O|beef:1]" {
		t.Fatalf("queue %s after a writer left", q)
	}
	// Taking the lock as "O" leaves no "o" behind.
	rdb.Del(ctx, k.name)
	rdb.ZAdd(ctx, k.queue, redis.Z{Score: 1, Member: "30000|o|beef:1"})
	if v := attemptAs("beef:1", "O", "2"); v <= 0 {
		t.Fatalf("attempt on a free lock = %d", v)
	}
	if q := queue(); q != "[]" {
		t.Fatalf("queue %s after the writer took the lock", q)
	}
	rdb.Del(ctx, k.name, k.queue, k.counter, k.token, k.hold("c0ffee:5", 1))
}

// TestRWPassOn: a switch (ARGV[15]) makes the releasing client's writer
// the holder with the token passed, in place of the client's write hold
// with an older token; it reports a newer hold of the client as there
// already, takes no lock the client does not hold in write mode, takes
// the writer's members out of the queue, reserves the next block when
// asked, and allows passing on only while the queue holds nothing but
// the client's one-shot writers and no one else listens.
func TestRWPassOn(t *testing.T) {
	fresh(t)
	ctx := context.Background()
	k := newRW("s:rw:pass")
	t1 := k.lock(t, "c0ffee:1", 30000, "")
	tok, reserved := handed(t, k.handOver(t, "c0ffee:1:write", "30000|o|c0ffee:2"))
	if !reserved {
		t.Fatal("a hand with no one else waiting reserved no tokens")
	}
	if tok != t1+1 {
		t.Fatalf("handed token %d, want %d", tok, t1+1)
	}
	holds := func(owner string, token int64) {
		t.Helper()
		h := rdb.HGetAll(ctx, k.name).Val()
		if len(h) != 3 || h["mode"] != "write" || h[owner+":write"] != "1" || h[layout.TokenField] != fmt.Sprint(token) {
			t.Fatalf("hash %v, want %s alone holding the write lock with token %d", h, owner, token)
		}
		if ttl := pttl(t, k.name); ttl < 19*time.Second || ttl > 20*time.Second {
			t.Fatalf("TTL %v, want the writer's lease of 20s", ttl)
		}
	}

	// Passed on with the first reserved token, the client's writer both
	// waiting in the queue (as "O") and named as "o": both go.
	rdb.ZAdd(ctx, k.queue, redis.Z{Score: 1, Member: "20000|O|c0ffee:3"})
	if v := k.passOn(t, "c0ffee:2:write", "20000|o|c0ffee:3", tok+1, "0"); v != 3 {
		t.Fatalf("switch = %d, want 3 (held, may pass on, no block)", v)
	}
	holds("c0ffee:3", tok+1)
	if n := rdb.Exists(ctx, k.queue).Val(); n != 0 {
		t.Fatalf("the writer's member is still queued: %v", rdb.ZRange(ctx, k.queue, 0, -1).Val())
	}
	// Asked for the next block: it starts past the first.
	if v := k.passOn(t, "c0ffee:3:write", "20000|o|c0ffee:4", tok+2, "1"); v != 4*(tok+9)+3 {
		t.Fatalf("switch asking for a block = %d, want %d", v, 4*(tok+9)+3)
	}
	holds("c0ffee:4", tok+2)
	// An older switch of the run arriving late: nothing done.
	if v := k.passOn(t, "c0ffee:2:write", "20000|o|c0ffee:9", tok+1, "0"); v != 4*(tok+2)+2 {
		t.Fatalf("late switch = %d, want %d (a newer hold is there)", v, 4*(tok+2)+2)
	}
	holds("c0ffee:4", tok+2)

	// Anyone but the client's one-shot writers waiting, or listening:
	// held, but passing on ends.
	next := tok + 3
	for _, who := range []string{"30000|o|beef:1", "30000|R|c0ffee:77", "30000|r|c0ffee:78", "listener"} {
		var ps *redis.PubSub
		if who == "listener" {
			ps = listening(t, k.channel)
		} else {
			rdb.ZAdd(ctx, k.queue, redis.Z{Score: 1, Member: who}, redis.Z{Score: 2, Member: "30000|o|c0ffee:79"})
		}
		from := rdb.HGet(ctx, k.name, layout.TokenField).Val()
		owner := fmt.Sprintf("c0ffee:%d", 100+next)
		if v := k.passOn(t, fmt.Sprintf("c0ffee:%d:write", 99+next), "20000|o|"+owner, next, "0"); v != 1 {
			t.Fatalf("switch with %s = %d, want 1 (held, passing on ends); token was %s", who, v, from)
		}
		holds(owner, next)
		next++
		rdb.Del(ctx, k.queue)
		if ps != nil {
			_ = ps.Close()
		}
	}
	// The client's own "O" writer waiting, with the client listening:
	// passing on goes on.
	ps := listening(t, k.channel)
	rdb.ZAdd(ctx, k.queue, redis.Z{Score: 1, Member: "30000|O|c0ffee:80"})
	if v := k.passOn(t, "x", "20000|o|c0ffee:81", next, "0"); v != 3 {
		t.Fatalf("switch with the client's listening writer waiting = %d, want 3", v)
	}
	holds("c0ffee:81", next)
	_ = ps.Close()
	rdb.Del(ctx, k.queue)

	// Another client's write hold: not the client's to pass.
	rdb.Del(ctx, k.name)
	rdb.HSet(ctx, k.name, "mode", "write", "beef:2:write", "1", layout.TokenField, "1")
	if v := k.passOn(t, "c0ffee:81:write", "20000|o|c0ffee:82", next+1, "0"); v != 0 {
		t.Fatalf("switch over another client's hold = %d, want 0", v)
	}
	// Read mode, held by the client's reader: not a write hold.
	rdb.Del(ctx, k.name)
	rdb.HSet(ctx, k.name, "mode", "read", "c0ffee:83", "1")
	if v := k.passOn(t, "c0ffee:81:write", "20000|o|c0ffee:84", next+1, "0"); v != 0 {
		t.Fatalf("switch over a read lock = %d, want 0", v)
	}
	// The run broken: no lock is taken.
	rdb.Del(ctx, k.name)
	if v := k.passOn(t, "c0ffee:81:write", "20000|o|c0ffee:85", next+1, "0"); v != 0 {
		t.Fatalf("switch after the lock was deleted = %d, want 0", v)
	}
	if n := rdb.Exists(ctx, k.name).Val(); n != 0 {
		t.Fatalf("a switch took a lock its client did not hold: %v", rdb.HGetAll(ctx, k.name).Val())
	}
	rdb.Del(ctx, k.name, k.queue, k.counter, k.token)
}

// TestRWShorterLifeTold: a read release that leaves readers but makes the
// hash's life shorter publishes nothing on the release channel (as
// Redisson's read unlock) and tells the first waiter of each client in
// the queue, on its client's grant channel, to check again by the new end
// ("n:<ttl>:<owner>").
func TestRWShorterLifeTold(t *testing.T) {
	fresh(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	k := newRW("s:rw:shorter")
	k.rlock(t, "u:1", 10000, "")
	k.rlock(t, "u:2", 30000, "")
	// Two waiting writers of client beef, the first told, and a reader of
	// client f00d.
	for i, m := range []string{"30000|O|beef:1", "30000|O|beef:2", "30000|R|f00d:1"} {
		rdb.ZAdd(ctx, k.queue, redis.Z{Score: float64(i + 1), Member: m})
	}
	ps := rdb.Subscribe(ctx, k.channel, clientGrants("beef"), clientGrants("f00d"))
	defer ps.Close()
	for range 3 {
		if _, err := ps.Receive(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if v := k.unlock(t, false, "u:2", "0", ""); v != 1 {
		t.Fatalf("unlock = %d, want 1", v)
	}
	rdb.Publish(ctx, k.channel, "marker")
	told := map[string]string{}
	for len(told) < 3 {
		msg, err := ps.ReceiveMessage(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, heard := told[msg.Channel]; !heard {
			told[msg.Channel] = msg.Payload // the first message of each
		}
	}
	if told[k.channel] != "marker" {
		t.Fatalf("release channel heard %q first, want nothing before the marker", told[k.channel])
	}
	for c, owner := range map[string]string{clientGrants("beef"): "beef:1", clientGrants("f00d"): "f00d:1"} {
		ms, who, ok := strings.Cut(strings.TrimPrefix(told[c], "n:"), ":")
		n, err := strconv.Atoi(ms)
		if !ok || err != nil || who != owner || n <= 0 || n > 10000 {
			t.Errorf("%s heard %q, want n:<ttl up to 10000>:%s", c, told[c], owner)
		}
	}
}
