package scripts

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/relock-go/relock/internal/layout"
	"github.com/relock-go/relock/internal/redistest"
)

var rdb *redis.Client

func TestMain(m *testing.M) {
	flag.Parse()
	auditScripts()
	os.Exit(redistest.Main(m, func(s *redistest.Server) func() {
		rdb = s.Client()
		return func() { _ = rdb.Close() }
	}))
}

// fresh empties the test server's database, so that a test run again
// (-count) meets no keys of an earlier run, fencing counters included.
// The tests of this package do not run in parallel.
func fresh(t *testing.T) {
	t.Helper()
	if err := rdb.FlushDB(context.Background()).Err(); err != nil {
		t.Fatal(err)
	}
}

func run(t *testing.T, s *Script, keys []string, args ...any) any {
	t.Helper()
	v, err := s.Run(context.Background(), rdb, Keys(keys...), args...).Result()
	if err != nil {
		t.Fatalf("%s: %v", s.Name(), err)
	}
	return v
}

// clientGrants returns the grant channel of the client uuid on a
// standalone server, and grantPrefix what every client's begins with
// there (see layout.Grants).
func clientGrants(uuid string) string { return layout.Grants(uuid, "", false) }

var grantPrefix = layout.GrantPrefix("", false)

// counterOnly is the fencing mode of a Client without WithPerNameTokens:
// the scripts are given no token key of the lock's own (see fence.lua).
const counterOnly = "1"

// tokenKey returns the lock name's own token key, which the scripts are
// given, with fencing mode "0", by a Client with WithPerNameTokens only.
func tokenKey(name string) string { return layout.Companion(layout.Token, name) }

// lockKeys returns the KEYS of lock.lua and unlock.lua for the lock name,
// as a Client without WithPerNameTokens gives them, with the request or
// release marker of a reentrant owner last unless marker is "". Each test
// name gets a fencing counter of its own, so that its tokens start at 1
// whatever other tests ran.
func lockKeys(name, marker string) []string {
	keys := []string{name, layout.Companion(layout.FencingCounter, name), layout.Companion(layout.LockQueue, name)}
	if marker != "" {
		keys = append(keys, marker)
	}
	return keys
}

// lockArgs returns the ARGV of lock.lua for a first attempt of owner with
// a lease (ms) and a kind of waiter ("" for a call that will not wait);
// with keys that have a request marker, its lifetime is added.
func lockArgs(keys []string, lease any, owner, kind string) []any {
	args := []any{lease, owner, counterOnly, kind, time.Now().UnixMilli(), "0"}
	if len(keys) == 4 {
		args = append(args, 60000)
	}
	return args
}

// enqueue puts members in the queue of the lock whose lock.lua KEYS are
// keys, scored 1, 2, ... in their order, and marks the holder's hash as a
// caller joining the queue does.
func enqueue(t *testing.T, keys []string, members ...string) {
	t.Helper()
	ctx := context.Background()
	for i, m := range members {
		if err := rdb.ZAdd(ctx, keys[2], redis.Z{Score: float64(i + 1), Member: m}).Err(); err != nil {
			t.Fatal(err)
		}
	}
	if err := rdb.HSet(ctx, keys[0], layout.QueuedField, "1").Err(); err != nil {
		t.Fatal(err)
	}
}

// listening subscribes a connection of its own to channel and returns it
// once the server has confirmed the subscription; it is closed when the
// test ends, if not before.
func listening(t *testing.T, channel string) *redis.PubSub {
	t.Helper()
	ps := rdb.Subscribe(context.Background(), channel)
	t.Cleanup(func() { _ = ps.Close() })
	if _, err := ps.Receive(context.Background()); err != nil {
		t.Fatal(err)
	}
	return ps
}

// heard returns the payload of the next message ps receives, failing the
// test if none comes.
func heard(t *testing.T, ps *redis.PubSub) string {
	t.Helper()
	m, err := ps.ReceiveMessage(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return m.Payload
}

// lockChannel returns the release channel of the lock name.
func lockChannel(name string) string { return layout.Companion(layout.LockChannel, name) }

// unlockArgs returns the ARGV of unlock.lua, whose keys are keys (see
// lockKeys), for a release by owner of client "u", granting to other
// clients, with every argument that may be left out given: [6] listens,
// [7] the waiter to prefer, [8] a member leaving, [9] a token passed on,
// [10] reserve; with keys that have a release marker, its lifetime [11]
// is added.
func unlockArgs(keys []string, owner string) []any {
	args := []any{owner, "publish", counterOnly, clientGrants("u"), "1", lockChannel(keys[0]), "0", "", "", "", "0"}
	if len(keys) == 4 {
		args = append(args, 60000)
	}
	return args
}

// TestGrantShortLease: a grant for a waiter's lease shorter than a grant
// may live tells the first waiter of the next client in the queue to
// check again when it runs out: the lease may end unannounced.
func TestGrantShortLease(t *testing.T) {
	fresh(t)
	ctx := context.Background()
	keys := lockKeys("s:gs", "")
	rel := keys
	if v := run(t, Lock, keys, lockArgs(keys, "10000", "u:1", "")...).(int64); v <= 0 {
		t.Fatalf("first lock = %d", v)
	}
	enqueue(t, keys, "500|o|v:1", "30000|o|w:2")
	w := listening(t, clientGrants("w"))
	if r := run(t, Unlock, rel, unlockArgs(rel, "u:1")...); r != int64(3) {
		t.Fatalf("release to another client's waiter = %v, want 3", r)
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if msg, err := w.ReceiveMessage(ctx); err != nil || msg.Payload != "n:500:w:2" {
		t.Fatalf("message to the next client %v, %v; want n:500:w:2", msg, err)
	}
	rdb.Del(ctx, "s:gs", keys[2])
}

func TestHeaders(t *testing.T) {
	fresh(t)
	for _, s := range []*Script{Lock, Unlock, Abandon, Renew, ForceUnlock, Announce, Start, ElectionProclaim, ElectionResign, ElectionRead} {
		header := s.Source()[:strings.Index(s.Source(), "\n\n")]
		for _, want := range []string{"-- " + s.Name() + ".lua:", "KEYS[", "ARGV[", "Returns"} {
			if !strings.Contains(header, want) {
				t.Errorf("%s.lua header lacks %q", s.Name(), want)
			}
		}
	}
}

// TestLibraries: each declaration of a library file compiles on its own
// (the split never cuts a function body), the declarations of a file
// give back all of its code, and a script carries only what it
// uses.
func TestLibraries(t *testing.T) {
	fresh(t)
	ctx := context.Background()
	if len(libraries) < 5 {
		t.Fatalf("%d library files", len(libraries))
	}
	for lib := range libraries {
		b, err := files.ReadFile(lib + ".lua")
		if err != nil {
			t.Fatal(err)
		}
		var joined strings.Builder
		for _, d := range declarations(string(b)) {
			if err := rdb.ScriptLoad(ctx, d.text).Err(); err != nil {
				t.Errorf("%s.lua: a declaration of %v does not compile alone: %v", lib, d.names, err)
			}
			joined.WriteString(d.text)
		}
		_, body, _ := strings.Cut(string(b), "\n\n")
		if squeeze(joined.String()) != squeeze(body) {
			t.Errorf("%s.lua: its declarations do not give back its code", lib)
		}
	}
	if strings.Contains(Lock.Source(), "local function tell_grant(") {
		t.Error("lock.lua carries tell_grant, which it never calls")
	}
	if !strings.Contains(Unlock.Source(), "local function tell_grant(") {
		t.Error("unlock.lua lacks tell_grant")
	}
}

// squeeze drops blank lines and comment lines: the code that is left.
func squeeze(s string) string {
	var b strings.Builder
	for _, l := range strings.Split(s, "\n") {
		if l := strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "--") {
			b.WriteString(l + "\n")
		}
	}
	return b.String()
}

// TestDeclarations: a library file splits at blank lines before
// top-level lines only, never inside a function body.
func TestDeclarations(t *testing.T) {
	fresh(t)
	src := "-- lib.lua: header\n\nlocal a = 1\n\n-- f does\nlocal function f()\n    local x = a\n\n    return x\nend\n\n-- g\nlocal function g() return f() end\n"
	ds := declarations(src)
	if len(ds) != 3 || fmt.Sprint(ds[0].names) != "[a]" || fmt.Sprint(ds[1].names) != "[f]" || fmt.Sprint(ds[2].names) != "[g]" {
		t.Fatalf("declarations: %+v", ds)
	}
	none := func() []bool { return make([]bool, len(ds)) }
	if got := used(ds, "return g()", none()); !strings.Contains(got, "local a = 1") || !strings.Contains(got, "local function g") {
		t.Errorf("used(g) = %q, want a, f and g", got)
	}
	if got := used(ds, "return f()", none()); strings.Contains(got, "function g") {
		t.Errorf("used(f) = %q, want a and f", got)
	}
	if got := used(ds, "return a", none()); strings.Contains(got, "function") {
		t.Errorf("used(a) = %q, want a alone", got)
	}
	put := none()
	used(ds, "return f()", put)
	if got := used(ds, "return g()", put); strings.Contains(got, "local a") || strings.Contains(got, "function f") || !strings.Contains(got, "function g") {
		t.Errorf("used(g) after f = %q, want g alone", got)
	}
	if refers("local fx = 1", []string{"f"}) || !refers("x = f(1)", []string{"f"}) {
		t.Error("refers matches part of a word, or misses a whole one")
	}
	if got := used(ds, "-- g is not called here\nreturn a -- nor f", none()); strings.Contains(got, "function") {
		t.Errorf("used with g and f in comments = %q, want a alone", got)
	}
}

// TestNoDashesInStrings: uncommented cuts each line of Lua at its first
// "--", so no file may have one inside a string.
func TestNoDashesInStrings(t *testing.T) {
	fresh(t)
	entries, err := files.ReadDir(".")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		b, err := files.ReadFile(e.Name())
		if err != nil {
			t.Fatal(err)
		}
		for i, line := range strings.Split(string(b), "\n") {
			code, _, found := strings.Cut(line, "--")
			if found && (strings.Count(code, "'")%2 == 1 || strings.Count(code, `"`)%2 == 1) {
				t.Errorf("%s:%d: \"--\" inside a string: %s", e.Name(), i+1, line)
			}
		}
	}
}

func TestLockUnlock(t *testing.T) {
	fresh(t)
	ctx := context.Background()
	keys := lockKeys("s:lock", "")
	if v := run(t, Lock, keys, lockArgs(keys, 10000, "u:1", "")...); v != int64(1) {
		t.Fatalf("first acquisition = %v, want token 1", v)
	}
	if v := run(t, Lock, keys, lockArgs(keys, 10000, "u:1", "")...); v != int64(1) {
		t.Fatalf("a one-shot owner's repeated request = %v, want the same token", v)
	}
	if n := rdb.HGet(ctx, "s:lock", "u:1").Val(); n != "1" {
		t.Fatalf("count %q after a repeated one-shot request, want 1", n)
	}
	v := run(t, Lock, keys, lockArgs(keys, 10000, "u:2", "")...).(int64)
	if ttl, other := (-v-1)/2-1, (-v-1)%2; v > 0 || ttl <= 9000 || ttl > 10000 || other != 0 {
		t.Fatalf("other owner = %v, want -(2(ttl+1)+1) with ttl near 10000 and a relock holder", v)
	}
	// A holder that is not relock (no token field) is reported as such.
	rdb.HSet(ctx, "s:foreign", "r:1", 1)
	rdb.PExpire(ctx, "s:foreign", 10*time.Second)
	foreign := lockKeys("s:foreign", "")
	if v := run(t, Lock, foreign, lockArgs(foreign, 10000, "u:2", "")...).(int64); (-v-1)%2 != 1 {
		t.Fatalf("a holder that is not relock = %v, want an odd -r-1", v)
	}
	release := lockKeys("s:lock", "")
	if v := run(t, Unlock, release, unlockArgs(release, "u:2")...); v != int64(0) {
		t.Fatalf("unlock by a non-owner = %v, want 0", v)
	}
	if v := run(t, Unlock, release, unlockArgs(release, "u:1")...); v != int64(2) {
		t.Fatalf("unlock = %v, want 2", v)
	}
	if rdb.Exists(ctx, "s:lock").Val() != 0 {
		t.Fatal("key left after the last release")
	}
}

// TestQueueMark: a release learns of the queue from the holder's hash.
// A caller that joins the queue marks the holder's hash; an acquisition of
// a free lock whose queue exists, and a grant with others behind the
// grantee, mark their own; with no queue, or a token key of the lock's
// own given, an acquisition still takes a token above every earlier one.
func TestQueueMark(t *testing.T) {
	fresh(t)
	ctx := context.Background()
	keys := lockKeys("s:qm", "")
	rel := keys
	marked := func() bool { return rdb.HExists(ctx, keys[0], layout.QueuedField).Val() }
	lock := func(owner, kind string) int64 {
		return run(t, Lock, keys, lockArgs(keys, "30000", owner, kind)...).(int64)
	}
	if v := lock("u:1", "o"); v != 1 || marked() {
		t.Fatalf("fresh acquisition = %d, marked %v; want token 1, no mark", v, marked())
	}
	if v := lock("v:1", "o"); v > 0 || !marked() {
		t.Fatalf("a caller joining = %d, marked %v; want it queued and the holder's hash marked", v, marked())
	}
	// The holder's hash expires with the waiter still queued: the next
	// acquisition of the free lock finds the queue and marks its hash.
	rdb.Del(ctx, keys[0])
	if v := lock("w:1", "o"); v != 2 || !marked() {
		t.Fatalf("acquisition with a queue = %d, marked %v; want token 2 and a mark", v, marked())
	}
	listening(t, clientGrants("v"))
	if r := run(t, Unlock, rel, unlockArgs(rel, "w:1")...); r != int64(3) {
		t.Fatalf("release with a queue = %v, want 3: granted to v:1", r)
	}
	if got := rdb.HGet(ctx, keys[0], "v:1").Val(); got != "1" || marked() {
		t.Fatalf("grantee's count %q, marked %v; want 1 and no mark, no one being behind it", got, marked())
	}
	if r := run(t, Unlock, rel, unlockArgs(rel, "v:1")...); r != int64(2) {
		t.Fatalf("plain release = %v, want 2", r)
	}
	// A Client with WithPerNameTokens gives the lock's own token key too
	// (fencing mode "0"): with the key ahead of the counter (Redisson's
	// RFencedLock), the next token is above it, and the key follows it.
	own := append(lockKeys("s:qm", ""), tokenKey("s:qm"))
	rdb.Set(ctx, own[3], 41, 0)
	args := lockArgs(keys, "30000", "u:2", "o")
	args[2] = "0"
	if v := run(t, Lock, own, args...).(int64); v != 42 || marked() {
		t.Fatalf("acquisition with the lock's token key at 41 = %d, marked %v; want 42, no mark", v, marked())
	}
	if got := rdb.Get(ctx, own[3]).Val(); got != "42" {
		t.Fatalf("own token key %s after token 42", got)
	}
	release := unlockArgs(keys, "u:2")
	release[2] = "0"
	if r := run(t, Unlock, own, release...); r != int64(2) {
		t.Fatalf("plain release = %v, want 2", r)
	}
	// Without it, the key is neither read nor written: the next token is
	// the counter's, which the per-name grant moved to 42.
	rdb.Set(ctx, own[3], 100, 0)
	if v := lock("u:3", "o"); v != 43 {
		t.Fatalf("fresh acquisition after = %d, want 43", v)
	}
	if got := rdb.Get(ctx, own[3]).Val(); got != "100" {
		t.Fatalf("own token key %s after an acquisition without it, want 100 untouched", got)
	}
}

func TestReentrantMarkers(t *testing.T) {
	fresh(t)
	ctx := context.Background()
	lock := func(req string) int64 {
		keys := lockKeys("s:re", layout.Marker(layout.LockRequest, "s:re", req))
		return run(t, Lock, keys, lockArgs(keys, 10000, "u:1", "")...).(int64)
	}
	a := lock("a")
	if b := lock("b"); b != a {
		t.Fatalf("re-entry token %d, want %d", b, a)
	}
	lock("b") // a retry of request b
	if n := rdb.HGet(ctx, "s:re", "u:1").Val(); n != "2" {
		t.Fatalf("count %q, want 2: a retried request was applied twice", n)
	}
	unlock := func(req string) int64 {
		keys := lockKeys("s:re", layout.Marker(layout.UnlockLatch, "s:re", req))
		return run(t, Unlock, keys, unlockArgs(keys, "u:1")...).(int64)
	}
	if v := unlock("x"); v != 1 {
		t.Fatalf("unlock = %d, want 1", v)
	}
	if v := unlock("x"); v != 1 {
		t.Fatalf("retried unlock = %d, want the first answer 1", v)
	}
	if n := rdb.HGet(ctx, "s:re", "u:1").Val(); n != "1" {
		t.Fatalf("count %q after a retried unlock, want 1", n)
	}
	// Abandon undoes only an applied request.
	abandon := func(req string) int64 {
		return run(t, Abandon, []string{"s:re", layout.Marker(layout.LockRequest, "s:re", req)}, "u:1", lockChannel("s:re"), "publish", "1").(int64)
	}
	if v := abandon("never-sent"); v != 0 {
		t.Fatalf("abandon of an unapplied request = %d", v)
	}
	lock("c")
	if v := abandon("c"); v != 1 {
		t.Fatalf("abandon of an applied request = %d", v)
	}
	if n := rdb.HGet(ctx, "s:re", "u:1").Val(); n != "1" {
		t.Fatalf("count %q after abandon, want 1", n)
	}
	if v := unlock("y"); v != 2 {
		t.Fatalf("last unlock = %d, want 2", v)
	}
}

func TestRenew(t *testing.T) {
	fresh(t)
	ctx := context.Background()
	rdb.HSet(ctx, "s:r1", "u:1", 1)
	rdb.PExpire(ctx, "s:r1", time.Second)
	rdb.HSet(ctx, "s:r2", "u:9", 1)
	v := run(t, Renew, []string{"s:r1", "s:r2", "s:r3"}, "u:1", "60000", "u:2", "60000", "u:3", "0").([]any)
	if fmt.Sprint(v) != "[1 0 0]" {
		t.Fatalf("renew = %v, want [1 0 0]", v)
	}
	if ttl := rdb.PTTL(ctx, "s:r1").Val().Milliseconds(); ttl < 59000 {
		t.Fatalf("renewed TTL %dms", ttl)
	}
	if ttl := rdb.PTTL(ctx, "s:r2").Val(); ttl != -1 {
		t.Fatalf("another owner's key was touched: TTL %v", ttl)
	}
}

func TestForceUnlock(t *testing.T) {
	fresh(t)
	ctx := context.Background()
	rdb.Set(ctx, "s:str", "x", 0)
	if err := ForceUnlock.Run(ctx, rdb, Keys("s:str", layout.Companion(layout.LockQueue, "s:str")), "ch", "publish", clientGrants("u"), "u").Err(); err == nil || !strings.Contains(err.Error(), "WRONGTYPE") {
		t.Fatalf("force unlock of a string: %v, want WRONGTYPE", err)
	}
	if rdb.Exists(ctx, "s:str").Val() != 1 {
		t.Fatal("a key of another type was deleted")
	}
	rdb.HSet(ctx, "s:fu", owner(1), 1)
	if v := run(t, ForceUnlock, []string{"s:fu", layout.Companion(layout.LockQueue, "s:fu")}, "ch", "publish", clientGrants("u"), "u"); v != int64(1) {
		t.Fatalf("force unlock = %v", v)
	}
	if v := run(t, ForceUnlock, []string{"s:fu", layout.Companion(layout.LockQueue, "s:fu")}, "ch", "publish", clientGrants("u"), "u"); v != int64(0) {
		t.Fatalf("force unlock of a free lock = %v", v)
	}
}

func TestNoScriptFallback(t *testing.T) {
	fresh(t)
	ctx := context.Background()
	if err := rdb.ScriptFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	if v := run(t, ForceUnlock, []string{"s:none", layout.Companion(layout.LockQueue, "s:none")}, "ch", "publish", clientGrants("u"), "u"); v != int64(0) {
		t.Fatalf("after SCRIPT FLUSH: %v", v)
	}
	if ok := rdb.ScriptExists(ctx, ForceUnlock.SHA()).Val(); !ok[0] {
		t.Fatal("EVAL did not cache the script")
	}
	rdb.ScriptFlush(ctx)
	pipe := rdb.Pipeline()
	q := Renew.Queue(ctx, pipe, Keys("s:none"), "u:1", "0")
	_, _ = pipe.Exec(ctx)
	if !IsNoScript(q.Err()) {
		t.Fatalf("queued after flush: %v, want NOSCRIPT", q.Err())
	}
	if v, err := Renew.Retry(ctx, rdb, q).Result(); err != nil || fmt.Sprint(v) != "[0]" {
		t.Fatalf("retry: %v %v", v, err)
	}
}

// TestGrant: a release that frees the lock grants it to the first waiter
// of the queue: in place to the releasing client's own waiter it names,
// by a message on the grant channel of another client's, for at most the
// grant time; and not at all when
// a listener that does not queue is subscribed, or the first waiter is a
// reentrant owner.
func TestGrant(t *testing.T) {
	fresh(t)
	ctx := context.Background()
	keys := lockKeys("s:g", "")
	rel, queue := keys, keys[2]
	lock := func(owner, member string) int64 {
		lease, kind := "10000", ""
		if member != "" {
			p := strings.SplitN(member, "|", 3)
			lease, kind = p[0], p[1]
		}
		return run(t, Lock, keys, lockArgs(keys, lease, owner, kind)...).(int64)
	}
	if v := lock("u:1", ""); v != 1 {
		t.Fatalf("first lock = %d", v)
	}
	// Waiters queue in the attempt that finds the lock held.
	for _, m := range []string{"5000|o|u:2", "30000|o|v:7", "30000|o|w:3"} {
		if v := lock(strings.SplitN(m, "|", 3)[2], m); v > 0 {
			t.Fatalf("%s acquired a held lock", m)
		}
	}
	if n := rdb.ZCard(ctx, queue).Val(); n != 3 {
		t.Fatalf("%d queued, want 3", n)
	}
	enqueue(t, keys, "5000|o|u:2", "30000|o|v:7", "30000|o|w:3") // in order, whatever the clock
	if ttl := rdb.PTTL(ctx, queue).Val(); ttl < 10*time.Second {
		t.Fatalf("queue TTL %v, want at least the holder's", ttl)
	}

	// Client u's own waiter, named by the release: handed in place.
	args := unlockArgs(rel, "u:1")
	args[6], args[7] = "1", "5000|o|u:2"
	if v := run(t, Unlock, rel, args...); v != int64(-4) {
		t.Fatalf("release to an own waiter = %v, want -4 (token 2, nothing reserved)", v)
	}
	// Others are queued behind it: its release is to look at the queue.
	if got := rdb.HGetAll(ctx, "s:g").Val(); len(got) != 4 || got["u:2"] != "1" || got[layout.TokenField] != "2" || got[layout.SinceField] == "" || got[layout.QueuedField] != "1" {
		t.Fatalf("hash after the grant: %v", got)
	}
	if ttl := rdb.PTTL(ctx, "s:g").Val(); ttl > 5*time.Second || ttl < 4*time.Second {
		t.Fatalf("TTL after the grant %v, want the waiter's lease", ttl)
	}

	// Another client's waiter: told on its grant channel, and the next
	// client told to check again when the grant runs out.
	v, w := listening(t, clientGrants("v")), listening(t, clientGrants("w"))
	if r := run(t, Unlock, rel, unlockArgs(rel, "u:2")...); r != int64(3) {
		t.Fatalf("release to another client's waiter = %v, want 3", r)
	}
	if got := rdb.HGet(ctx, "s:g", "v:7").Val(); got != "1" {
		t.Fatalf("v:7 does not hold the lock: %q", got)
	}
	if ttl := rdb.PTTL(ctx, "s:g").Val(); ttl > 2*time.Second {
		t.Fatalf("TTL of a grant to another client %v, want at most 2s", ttl)
	}
	msg, err := v.ReceiveMessage(ctx)
	if err != nil || !strings.HasPrefix(msg.Payload, "g:3:2000:") || !strings.HasSuffix(msg.Payload, ":v:7") {
		t.Fatalf("grant message %v, %v", msg, err)
	}
	// A grant for the longest a grant lives tells nobody else: every
	// waiting call attempts at least that often.
	if err := rdb.Publish(ctx, clientGrants("w"), "mark").Err(); err != nil {
		t.Fatal(err)
	}
	if msg, err := w.ReceiveMessage(ctx); err != nil || msg.Payload != "mark" {
		t.Fatalf("message to the next client %v, %v; want none", msg, err)
	}

	// A listener that does not queue: the lock is freed and announced.
	a, b := listening(t, lockChannel("s:g")), listening(t, lockChannel("s:g"))
	if r := run(t, Unlock, rel, unlockArgs(rel, "v:7")...); r != int64(2) {
		t.Fatalf("release with a listener that does not queue = %v, want 2", r)
	}
	if msg, err := a.ReceiveMessage(ctx); err != nil || msg.Payload != "0" {
		t.Fatalf("release message %v, %v", msg, err)
	}
	a.Close()
	b.Close()

	// A reentrant owner first: freed and announced, its place kept.
	if v := lock("u:9", ""); v <= 0 {
		t.Fatal("the free lock was not acquired")
	}
	enqueue(t, keys, "30000|r|x:1")
	if r := run(t, Unlock, rel, unlockArgs(rel, "u:9")...); r != int64(2) {
		t.Fatalf("release with a reentrant owner first = %v, want 2", r)
	}
	if rdb.ZScore(ctx, queue, "30000|r|x:1").Err() != nil {
		t.Fatal("the reentrant owner lost its place")
	}
	// Leaving the queue takes the place, and releases a grant if any.
	args = unlockArgs(rel, "x:1")
	args[8] = "30000|r|x:1"
	if r := run(t, Unlock, rel, args...); r != int64(0) {
		t.Fatalf("leaving without a hold = %v, want 0", r)
	}
	if rdb.ZCard(ctx, queue).Val() != 1 {
		t.Fatalf("queue after leaving: %v", rdb.ZRange(ctx, queue, 0, -1).Val())
	}
}

// TestPassOn: a release that grants the lock to its client's own waiter
// reserves k tokens for passing it on in process when no one else could
// be owed it; a switch with a reserved token replaces the client's hold
// of an older token, whoever of the run holds it, tells an older switch
// it was overtaken, never takes a lock the client does not hold, and
// always takes its waiter out of the queue.
func TestPassOn(t *testing.T) {
	fresh(t)
	ctx := context.Background()
	name := "s:pass"
	keys := lockKeys(name, "")
	rel, queue, counter := keys, keys[2], keys[1]
	lock := func(owner, member string) int64 {
		return run(t, Lock, keys, lockArgs(keys, "30000", owner, "o")...).(int64)
	}
	const k = 8 // tokens a grant reserves (unlock.lua)
	release := func(owner, grantee, token string, ask string) int64 {
		args := unlockArgs(rel, owner)
		args[7], args[9], args[10] = grantee, token, ask
		return run(t, Unlock, rel, args...).(int64)
	}
	holder := func() (string, string) {
		h := rdb.HGetAll(ctx, name).Val()
		for f, v := range h {
			if f != layout.TokenField && f != layout.SinceField && f != layout.QueuedField {
				return f + "=" + v, h[layout.TokenField]
			}
		}
		return "", h[layout.TokenField]
	}
	queued := func(members ...string) {
		t.Helper()
		for _, m := range members {
			if v := lock(strings.SplitN(m, "|", 3)[2], m); v > 0 {
				t.Fatalf("%s acquired a held lock", m)
			}
		}
	}

	if v := lock("u:1", ""); v != 1 {
		t.Fatalf("first lock = %d", v)
	}
	queued("30000|o|u:2", "30000|o|u:3", "30000|o|u:4")
	// A grant to an own waiter with no one else waiting: t = 2, and 3..2+k
	// reserved.
	if v := release("u:1", "30000|o|u:2", "", ""); v != -(2*2 + 1) {
		t.Fatalf("grant = %d, want %d", v, -(2*2 + 1))
	}
	if c := rdb.Get(ctx, counter).Val(); c != fmt.Sprint(2+k) {
		t.Fatalf("counter %s after reserving %d, want %d", c, k, 2+k)
	}
	// u:2 passes to u:3 with token 3, and u:3 to u:4 with 4; the second
	// switch reaches Redis first and asks for the next block (3+k..2+2k).
	if v := release("u:3", "30000|o|u:4", "4", "1"); v != 4*(3+k)+3 {
		t.Fatalf("switch 3 -> 4 = %d, want %d", v, 4*(3+k)+3)
	}
	if h, tok := holder(); h != "u:4=1" || tok != "4" {
		t.Fatalf("holder %s token %s, want u:4 with 4", h, tok)
	}
	// A retry of that switch keeps the hold it made (the hash is written
	// over, never deleted first).
	if v := release("u:3", "30000|o|u:4", "4", "0"); v&1 != 1 {
		t.Fatalf("retried switch 3 -> 4 = %d, want the waiter holding", v)
	}
	if h, tok := holder(); h != "u:4=1" || tok != "4" {
		t.Fatalf("holder %s token %s after a retried switch, want u:4 with 4", h, tok)
	}
	if ttl := rdb.PTTL(ctx, name).Val(); ttl < 29*time.Second {
		t.Fatalf("TTL after a switch %v, want the waiter's lease", ttl)
	}
	if v := release("u:2", "30000|o|u:3", "3", "0"); v != 4*4+2 {
		t.Fatalf("overtaken switch 2 -> 3 = %d, want %d", v, 4*4+2)
	}
	if h, _ := holder(); h != "u:4=1" {
		t.Fatalf("an overtaken switch changed the holder to %s", h)
	}
	if n := rdb.ZCard(ctx, queue).Val(); n != 0 {
		t.Fatalf("%d left in the queue, want 0", n)
	}
	// Another client's waiter first in the queue: the switch is applied,
	// but passing on must end.
	// This switch gives the client's clock: the hold's start is the
	// client's.
	queued("30000|o|v:1", "30000|o|u:5")
	args := append(unlockArgs(rel, "u:4"), "", "1700000000000")
	args[7], args[9], args[10] = "30000|o|u:5", "7", "1"
	if v := run(t, Unlock, rel, args...).(int64); v != 1 {
		t.Fatalf("switch with another client first = %d, want 1", v)
	}
	if since := rdb.HGet(ctx, name, layout.SinceField).Val(); since != "1700000000000" {
		t.Fatalf("relock_since %q after a switch with the client's clock", since)
	}
	// The run broken (the hold deleted): a switch takes nothing.
	rdb.Del(ctx, name)
	queued()
	if v := release("u:5", "30000|o|u:6", "8", "0"); v != 0 {
		t.Fatalf("switch of a broken run = %d, want 0", v)
	}
	if n := rdb.Exists(ctx, name).Val(); n != 0 {
		t.Fatal("a switch took a free lock")
	}
	// Held by another client: untouched.
	if v := lock("v:1", ""); v <= 0 {
		t.Fatalf("v:1 lock = %d", v)
	}
	if v := release("u:5", "30000|o|u:6", "9", "0"); v != 0 {
		t.Fatalf("switch over another client's hold = %d, want 0", v)
	}
	if h, _ := holder(); h != "v:1=1" {
		t.Fatalf("holder %s, want v:1", h)
	}
	// A listener on the release channel: the lock is freed, not granted,
	// and nothing reserved.
	rdb.Del(ctx, name, queue)
	listening(t, lockChannel(name)) // a listener that does not queue
	lock("u:7", "")
	queued("30000|o|u:8")
	before := rdb.Get(ctx, counter).Val()
	if v := release("u:7", "30000|o|u:8", "", ""); v != 2 {
		t.Fatalf("release with a listener = %d, want 2", v)
	}
	if c := rdb.Get(ctx, counter).Val(); c != before {
		t.Fatalf("counter %s, was %s: tokens reserved with a listener", c, before)
	}
	rdb.Del(ctx, name, queue, counter)
}

// TestReserve: the k tokens reserve hands are above every token handed
// before, and the counter, and the named key where it is given, move to
// the last of them, in every fencing layout; a named key not given is
// neither read nor written.
func TestReserve(t *testing.T) {
	fresh(t)
	ctx := context.Background()
	b, err := files.ReadFile("fence.lua")
	if err != nil {
		t.Fatal(err)
	}
	body := "local named = ARGV[1] == '0' and KEYS[2] or nil\nreturn {reserve(KEYS[1], named, 4), fence(KEYS[1], named)}\n"
	ds := declarations(string(b))
	s := redis.NewScript(used(ds, body, make([]bool, len(ds))) + body)
	for _, c := range []struct {
		name    string
		mode    string
		counter string // "" for none
		named   string // "" for none
	}{
		{"counter only", counterOnly, "10", ""},
		{"named key newer, not given", counterOnly, "3", "20"},
		{"named key kept (mode 0)", "0", "5", "7"},
		{"nothing yet, mode 0", "0", "", ""},
	} {
		counter, named := "s:res:counter", "s:res:named"
		rdb.Del(ctx, counter, named)
		if c.counter != "" {
			rdb.Set(ctx, counter, c.counter, 0)
		}
		if c.named != "" {
			rdb.Set(ctx, named, c.named, 0)
		}
		before := 0
		for _, v := range []string{c.counter, c.named} {
			if n, _ := strconv.Atoi(v); n > before && (v == c.counter || c.mode == "0") {
				before = n
			}
		}
		v, err := s.Run(ctx, rdb, []string{counter, named}, c.mode).Int64Slice()
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if v[0] != int64(before+1) || v[1] != int64(before+5) {
			t.Errorf("%s: reserved from %d, then fenced %d; want %d and %d", c.name, v[0], v[1], before+1, before+5)
		}
		if got := rdb.Get(ctx, counter).Val(); got != strconv.Itoa(before+5) {
			t.Errorf("%s: counter %s, want %d", c.name, got, before+5)
		}
		switch got := rdb.Get(ctx, named).Val(); {
		case c.mode == "0" && got != strconv.Itoa(before+5):
			t.Errorf("%s: named key %s, want %d", c.name, got, before+5)
		case c.mode != "0" && got != c.named:
			t.Errorf("%s: named key %q, want %q untouched", c.name, got, c.named)
		}
	}
}

// TestLibraryMark: the declarations a script's common case needs come
// before its "-- @library" line, and those only the rest needs after it.
func TestLibraryMark(t *testing.T) {
	fresh(t)
	for _, c := range []struct {
		s             *Script
		before, after []string
	}{
		{Lock, []string{"local function fence("}, []string{"local function join_queue(", "local function latest(", "local function now_ms("}},
		{Unlock, nil, []string{"local function fence(", "local function waiting(", "local function tell_grant("}},
		{FairLock, []string{"local function fence(", "local function now_ms("}, []string{"local function join(", "local function purge(", "local function others_ahead("}},
		{FairUnlock, nil, []string{"local function fence(", "local function purge(", "local function take("}},
	} {
		src := c.s.Source()
		mark := strings.Index(src, libraryMark)
		if mark < 0 || strings.Count(src, libraryMark) != 1 {
			t.Fatalf("%s: want one library mark in\n%s", c.s.Name(), src)
		}
		for _, d := range c.before {
			if i := strings.Index(src, d); i < 0 || i > mark {
				t.Errorf("%s: %q at %d, want before the mark at %d", c.s.Name(), d, i, mark)
			}
		}
		for _, d := range c.after {
			if i := strings.Index(src, d); i < mark || strings.Count(src, d) != 1 {
				t.Errorf("%s: %q at %d (%d times), want once after the mark at %d", c.s.Name(), d, i, strings.Count(src, d), mark)
			}
		}
		if strings.Index(src, "local function") < mark && c.before == nil {
			t.Errorf("%s: a function made before the mark", c.s.Name())
		}
	}
}
