package scripts

import (
	"context"
	"fmt"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/relock-go/relock/internal/layout"
)

// headerMax returns the highest n of what[n] the script's header names,
// and whether it names what[#what] (a last key given only sometimes).
func headerMax(s *Script, what string) (int, bool) {
	header, _, _ := strings.Cut(s.Source(), "\n\n")
	most := 0
	for _, m := range regexp.MustCompile(what+`\[(\d+)(?:\.\.(\d+))?`).FindAllStringSubmatch(header, -1) {
		for _, d := range m[1:] {
			n, _ := strconv.Atoi(d)
			most = max(most, n)
		}
	}
	return most, strings.Contains(header, what+"[#"+what+"]")
}

// TestRequestsFillHeaders: each request, with every option it has set,
// builds as many KEYS and ARGV as its script's header names, and no
// more; with none set, no more than that either.
func TestRequestsFillHeaders(t *testing.T) {
	lk := NewLockKeys("h:lock", "h:counter", "h:queue", "h:named")
	rk := NewRWUnlockKeys("h:rw", "h:counter", "h:rwqueue", "h:guard", "h:named")
	fk := NewFairKeys("h:fair", "h:fq", "h:ft", "h:fa", "h:counter", "h:guard", "h:named")
	pk := NewPermitKeys("h:ps", "h:held", "h:guard", "h:pq")
	ek := NewElectionKeys("h:election", "h:log")
	type built struct {
		s          *Script
		keys, args []any
	}
	b := func(s *Script, r interface{ Build() (keys, args []any) }) built {
		keys, args := r.Build()
		return built{s, keys, args}
	}
	full := []built{
		b(Lock, &LockRequest{Keys: lk, Marker: "h:m", MarkerTTL: 1, Lease: 1, Owner: "o", Kind: OneShot, Now: 1, Joined: true}),
		b(Unlock, &UnlockRequest{Keys: lk, Marker: "h:m", MarkerTTL: 1, Owner: "o", Publish: "publish", Grants: "g", Channel: "c",
			GrantOthers: true, Listening: true, Preferred: "p", Leaving: "l", PassToken: 7, Reserve: true, Since: 1}),
		b(Abandon, AbandonRequest{Lock: "h:lock", Marker: "h:m", Owner: "o", Channel: "c", Publish: "publish"}),
		b(ForceUnlock, ForceUnlockRequest{Lock: "h:lock", Queue: "h:queue", Channel: "c", Publish: "publish", Grants: "g", ClientID: "u"}),
		b(RWWriteLock, &RWLockRequest{Keys: lk, Write: true, Marker: "h:m", MarkerTTL: 1, Lease: 1, Owner: "o", Kind: Listening,
			QueueTTL: 1, Queued: MayBeQueuedUnheard}),
		b(RWReadLock, &RWLockRequest{Keys: lk, ReaderHold: "h:hold", MarkerTTL: 1, Lease: 1, Owner: "o", Holds: "%s", Kind: Reader,
			QueueTTL: 1, Queued: MayBeQueued}),
		b(RWWriteUnlock, &RWUnlockRequest{Keys: rk, Write: true, Field: "o:write", Marker: "h:m", MarkerTTL: 1, Channel: "c",
			Publish: "publish", Holds: "%s", Numsub: "numsub", ClientID: "u", Grants: "g", GrantTTL: 1, Leaving: "l", Grant: true,
			Writer: "w", PassToken: 7, Reserve: true}),
		b(RWReadUnlock, &RWUnlockRequest{Keys: rk, Field: "o", Marker: "h:m", MarkerTTL: 1, Channel: "c", Publish: "publish",
			Holds: "%s", Numsub: "numsub", ClientID: "u", Grants: "g", GrantTTL: 1, Leaving: "l", Grant: true, Writer: "w"}),
		b(RWForceUnlock, RWForceUnlockRequest{Lock: "h:rw", Queue: "h:rwqueue", Guard: "h:guard", Channel: "c", Publish: "publish",
			Holds: "%s", Grants: "g", ClientID: "u"}),
		b(FairLock, &FairLockRequest{Keys: fk, Marker: "h:m", MarkerTTL: 1, Lease: 1, Owner: "o", QueueFor: 1, Waiters: "w",
			Publish: "publish", GrantLease: 1, Now: 1, GrantPrefix: "gp", New: true}),
		b(FairLeave, FairLeaveRequest{Keys: fk, Owner: "o", Waiters: "w", Publish: "publish", Leave: UndoReentrant, Marker: "h:m",
			GrantPrefix: "gp"}),
		b(FairTell, FairTellRequest{Keys: fk, Waiters: "w", Publish: "publish", GrantPrefix: "gp"}),
		b(FairForceUnlock, FairForceUnlockRequest{Keys: fk, Waiters: "w", Publish: "publish", GrantPrefix: "gp"}),
		b(FairUnlock, &FairUnlockRequest{Keys: fk, Owner: "o", Waiters: "w", Publish: "publish", Marker: "h:m", MarkerTTL: 1,
			GrantTTL: 1, Heads: 8, GrantPrefix: "gp", Candidates: []Candidate{{"a", time.Second}}}),
		b(FairPass, FairPassRequest{Keys: fk, Owner: "o", Lease: time.Second, Token: 7, Heads: 8, Now: 1}),
		b(PermitAcquire, &PermitAcquireRequest{Keys: pk, ID: "id", Lease: 1, Member: "m", Queued: true, Publish: "publish", QueueTTL: 1}),
		b(PermitRelease, PermitReleaseRequest{Keys: pk, ID: "id", Publish: "publish", Numsub: "numsub", ClientID: "u", Grants: "g",
			GrantTTL: 1, Grant: true, Leaving: "l"}),
		b(PermitAvailable, PermitAvailableRequest{Keys: pk, Publish: "publish", Channel: "c"}),
		b(PermitUpdateLease, PermitUpdateLeaseRequest{Keys: pk, ID: "id", Lease: time.Second, Publish: "publish", Channel: "c"}),
		b(SemUndo, SemUndoRequest{Permits: "h:sem", Marker: "h:m", N: 1, Publish: "publish", MarkerTTL: 1, Channel: "c"}),
		b(ElectionProclaim, ElectionProclaimRequest{Keys: ek, Holder: "o", Record: "{}", NewTerm: true, Publish: "publish", LogTTL: 1,
			Term: 3, Channel: "c"}),
		b(ElectionResign, ElectionResignRequest{Keys: ek, Holder: "o", Term: 3, Publish: "publish", LogTTL: 1, Channel: "c"}),
		b(ElectionRead, ElectionReadRequest{Keys: ek, After: "0-0", Max: 5}),
		b(Announce, AnnounceRequest{Key: "h:client", TTL: time.Second, Fields: []any{"host", "h"}}),
	}
	for _, c := range full {
		keys, last := headerMax(c.s, "KEYS")
		if last {
			keys++
		}
		args, _ := headerMax(c.s, "ARGV")
		if len(c.keys) != keys || len(c.args) < args {
			t.Errorf("%s: %d KEYS and %d ARGV built; its header names %d and %d", c.s.Name(), len(c.keys), len(c.args), keys, args)
		}
	}
	// The request-marker scripts (request.lua): the count, the call's
	// marker and the answered markers (one here), and a permit
	// semaphore's held permits, which its call's ARGV names, after the
	// count: one KEY more than the header's count.
	marked := func(held any) Marked {
		k := Marked{Count: "h:count", Held: held, Marker: "h:m"}
		k.Forget([]string{"h:answered"})
		return k
	}
	for _, c := range []struct {
		built
		held bool
	}{
		{b(SemAcquire, SemAcquireRequest{Keys: marked(nil), N: 1, MarkerTTL: 1}), false},
		{b(SemRelease, SemReleaseRequest{Keys: marked("h:held"), N: 1, Publish: "publish", MarkerTTL: 1, Channel: "c"}), true},
		{b(SemRelease, SemReleaseRequest{Keys: marked(nil), N: 2, Publish: "publish", MarkerTTL: 1, Channel: "c", Hand: 1,
			Numsub: "numsub"}), false},
		{b(SemTrySetPermits, TrySetRequest{Keys: marked("h:held"), N: 1, Publish: "publish", MarkerTTL: 1, Channel: "c"}), true},
		{b(LatchTrySetCount, TrySetRequest{Keys: marked(nil), N: 1, Publish: "publish", MarkerTTL: 1, Channel: "c"}), false},
		{b(SemDrain, SemDrainRequest{Keys: marked(nil), MarkerTTL: 1}), false},
		{b(LatchCountDown, LatchCountDownRequest{Keys: marked(nil), Publish: "publish", MarkerTTL: 1, Channel: "c"}), false},
	} {
		keys, _ := headerMax(c.s, "KEYS")
		args, _ := headerMax(c.s, "ARGV")
		switch {
		case c.s == SemTrySetPermits || c.s == LatchTrySetCount:
			// Their headers refer to tryset.lua's, whose ARGV[5] is a
			// permit semaphore's.
			keys, args = 3, 4
			if c.held {
				args = 5
			}
		case c.s == SemRelease && !c.held:
			args = 6 // and sem_release.lua's ARGV[7]
		}
		if c.held {
			keys++
		}
		if len(c.keys) != keys || len(c.args) != args {
			t.Errorf("%s (held %v): %d KEYS and %d ARGV built; want %d and %d", c.s.Name(), c.held, len(c.keys), len(c.args), keys, args)
		}
	}
}

// TestMarkedKeys: the KEYS of a call that applies once per request
// marker, in request.lua's order, with at most MaxForget answered
// markers, the newest.
func TestMarkedKeys(t *testing.T) {
	k := Marked{Count: "m:count", Held: "m:held", Marker: "m:m"}
	answered := make([]string, MaxForget+2)
	for i := range answered {
		answered[i] = "m:a" + strconv.Itoa(i)
	}
	if n := k.Forget(answered); n != MaxForget {
		t.Fatalf("Forget took %d of %d markers, want %d", n, len(answered), MaxForget)
	}
	want := []any{"m:count", "m:held", "m:m"}
	for _, a := range answered[2:] {
		want = append(want, a)
	}
	if keys, _ := (SemDrainRequest{Keys: k}).Build(); !reflect.DeepEqual(keys, want) {
		t.Errorf("built %v, want %v", keys, want)
	}
	k.Held = nil
	k.Forget(nil)
	if keys, _ := (SemDrainRequest{Keys: k}).Build(); !reflect.DeepEqual(keys, []any{"m:count", "m:m"}) {
		t.Errorf("without held permits or answered markers: built %v", keys)
	}
}

// TestLockRequestBuild: lock.lua's KEYS and ARGV by field, as its header
// names them, and the ARGV a first attempt leaves out.
func TestLockRequestBuild(t *testing.T) {
	counter := NewLockKeys("b:lock", "b:counter", "b:queue", "")
	named := NewLockKeys("b:lock", "b:counter", "b:queue", "b:named")
	for _, c := range []struct {
		name       string
		req        LockRequest
		keys, args []any
	}{
		{"one-shot, first attempt", LockRequest{Keys: counter, Lease: 30000, Owner: "u:1", Kind: OneShot, Now: "5"},
			[]any{"b:lock", "b:counter", "b:queue"}, []any{30000, "u:1", "1", "o", "5"}},
		{"one-shot, joined", LockRequest{Keys: counter, Lease: 30000, Owner: "u:1", Kind: OneShot, Now: "5", Joined: true},
			[]any{"b:lock", "b:counter", "b:queue"}, []any{30000, "u:1", "1", "o", "5", "1"}},
		{"no queue, own token key", LockRequest{Keys: named, Lease: 100, Owner: "u:1", Now: "5"},
			[]any{"b:lock", "b:counter", "b:queue", "b:named"}, []any{100, "u:1", "0", "", "5"}},
		{"reentrant", LockRequest{Keys: counter, Marker: "b:m", MarkerTTL: 60000, Lease: 30000, Owner: "u:2", Kind: Reentrant, Now: "5"},
			[]any{"b:lock", "b:counter", "b:queue", "b:m"}, []any{30000, "u:2", "1", "r", "5", "0", 60000}},
	} {
		keys, args := c.req.Build()
		if !reflect.DeepEqual(keys, c.keys) || !reflect.DeepEqual(args, c.args) {
			t.Errorf("%s: built %v %v, want %v %v", c.name, keys, args, c.keys, c.args)
		}
	}
}

// TestUnlockRequestBuild: unlock.lua's ARGV past the sixth are left out
// while they are "" or "0" at the end, and a switch carries its token,
// reserve flag and clock.
func TestUnlockRequestBuild(t *testing.T) {
	k := NewLockKeys("b:lock", "b:counter", "b:queue", "")
	base := UnlockRequest{Keys: k, Owner: "u:1", Publish: "publish", Grants: "g", Channel: "c", GrantOthers: true}
	fixed := []any{"u:1", "publish", "1", "g", "1", "c"}
	with := func(tail ...any) []any { return append(append([]any{}, fixed...), tail...) }
	leaving, switched, marked := base, base, base
	leaving.Leaving = "m"
	switched.Preferred, switched.PassToken, switched.Reserve, switched.Since = "p", 9, true, "5"
	marked.Marker, marked.MarkerTTL = "b:rm", 60000
	for _, c := range []struct {
		name string
		req  UnlockRequest
		keys []any
		args []any
	}{
		{"plain", base, []any{"b:lock", "b:counter", "b:queue"}, fixed},
		{"leaving", leaving, []any{"b:lock", "b:counter", "b:queue"}, with("0", "", "m")},
		{"switch", switched, []any{"b:lock", "b:counter", "b:queue"}, with("0", "p", "", int64(9), "1", "", "5")},
		{"marked", marked, []any{"b:lock", "b:counter", "b:queue", "b:rm"}, with("0", "", "", "", "0", 60000)},
	} {
		keys, args := c.req.Build()
		if !reflect.DeepEqual(keys, c.keys) || !reflect.DeepEqual(args, c.args) {
			t.Errorf("%s: built %v %v, want %v %v", c.name, keys, args, c.keys, c.args)
		}
	}
}

// TestRequestsReuse: a request built again after a field changed builds
// from the field, and building allocates nothing for a one-shot owner's
// attempt once the request exists.
func TestRequestsReuse(t *testing.T) {
	req := &LockRequest{Keys: NewLockKeys("b:lock", "b:counter", "b:queue", ""), Lease: any(30000), Owner: any("u:1"), Kind: OneShot, Now: any("5")}
	if _, args := req.Build(); len(args) != 5 {
		t.Fatalf("first attempt: %v", args)
	}
	req.Joined = true
	if _, args := req.Build(); len(args) != 6 || args[5] != "1" {
		t.Fatalf("after joining: %v", args)
	}
	if n := testing.AllocsPerRun(100, func() { req.Build() }); n != 0 {
		t.Errorf("Build allocates %v times", n)
	}
}

// TestReplies: every reply of every script decodes into its named fields.
func TestReplies(t *testing.T) {
	ms := time.Millisecond
	check := func(name string, got, want any) {
		t.Helper()
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s: %+v, want %+v", name, got, want)
		}
	}
	// lock.lua: v = -r-1 = 2(ttl+1) + foreign.
	check("lock token", LockReplyOf(42), LockReply{Token: 42})
	check("read lock before any writer", LockReplyOf(0), LockReply{})
	check("held, 500ms", LockReplyOf(-1-(2*501)), LockReply{Held: true, TTL: 500 * ms})
	check("held by a foreign holder, no TTL", LockReplyOf(-1-(2*0+1)), LockReply{Held: true, TTL: -ms, Foreign: true})
	// fair_lock.lua: 0 is refused too.
	check("fair token", FairLockReplyOf(3), LockReply{Token: 3})
	check("fair zero", FairLockReplyOf(0), LockReply{Held: true, TTL: -ms})
	check("fair held, foreign", FairLockReplyOf(-1-(2*101+1)), LockReply{Held: true, TTL: 100 * ms, Foreign: true})
	// unlock.lua and the read-write lock's releases.
	for r, want := range []Released{NotHeld, StillHeld, Freed, GrantedOther} {
		check(fmt.Sprint("unlock ", r), UnlockReplyOf(int64(r)), UnlockReply{Released: want})
	}
	check("granted, reserved", UnlockReplyOf(-(2*17 + 1)), UnlockReply{Released: Granted, Token: 17, Reserved: true})
	check("granted", UnlockReplyOf(-(2 * 17)), UnlockReply{Released: Granted, Token: 17})
	// Switches: 4r + 2p + 1, 4c + 2, 0.
	check("switched, may pass, block", SwitchReplyOf(4*20+2+1), SwitchReply{Switched: SwitchedOver, MayPass: true, Block: 20})
	check("switched, stop", SwitchReplyOf(1), SwitchReply{Switched: SwitchedOver})
	check("overtaken", SwitchReplyOf(4*30+2), SwitchReply{Switched: Overtaken, Newer: 30})
	check("broken", SwitchReplyOf(0), SwitchReply{Switched: RunBroken})
	// fair_unlock.lua.
	for r, want := range []Released{NotHeld, StillHeld, Freed, GrantedOther} {
		got, err := FairUnlockReplyOf(int64(r), 0)
		check(fmt.Sprint("fair unlock ", r, err), got, FairUnlockReply{Released: want})
	}
	got, err := FairUnlockReplyOf([]any{int64(8), int64(2), []any{"a:1", "b:1"}, int64(9)}, 2)
	check(fmt.Sprint("fair unlock passed ", err), got, FairUnlockReply{Released: Granted, Candidate: 1, Token: 8, Heads: []string{"a:1", "b:1"}, First: 9})
	for _, bad := range []any{int64(4), int64(-1), []any{int64(8), int64(3), []any{}, int64(0)}, []any{int64(0), int64(1), []any{}, int64(0)}, "x"} {
		if _, err := FairUnlockReplyOf(bad, 2); err == nil {
			t.Errorf("fair unlock %v: no error", bad)
		}
	}
	// fair_pass.lua.
	check("fair pass", FairPassReplyOf([]any{int64(1), []any{"a:1"}, int64(5)}), FairPassReply{Switched: SwitchedOver, Heads: []string{"a:1"}, First: 5})
	check("fair pass overtaken", FairPassReplyOf([]any{int64(2), int64(12)}), FairPassReply{Switched: Overtaken, Newer: 12})
	check("fair pass broken", FairPassReplyOf([]any{int64(0)}), FairPassReply{Switched: RunBroken})
	check("fair pass empty", FairPassReplyOf(nil), FairPassReply{Switched: RunBroken})
	// The permit semaphore's.
	check("permit acquired", PermitAcquireReplyOf(0), PermitAcquireReply{Acquired: true})
	check("permit expiry", PermitAcquireReplyOf(250), PermitAcquireReply{ExpiresIn: 250 * ms})
	check("permit none expires", PermitAcquireReplyOf(-1), PermitAcquireReply{ExpiresIn: -1})
	for r, want := range []PermitReleased{PermitUnknown, PermitFreed, PermitExpired} {
		check(fmt.Sprint("permit release ", r), PermitReleasedBy(int64(r)), want)
	}
	// The semaphore's and the latch's.
	check("sem release", SemReleaseReplyOf(6, false), SemReleaseReply{Available: 6})
	check("sem release handed", SemReleaseReplyOf(2*3+1, true), SemReleaseReply{Available: 3, Handed: true})
	check("sem release not handed", SemReleaseReplyOf(2*3, true), SemReleaseReply{Available: 3})
	check("latch left", LatchCountDownReplyOf(2), LatchCountDownReply{Left: 2})
	check("latch opened", LatchCountDownReplyOf(0), LatchCountDownReply{})
	check("latch not set", LatchCountDownReplyOf(-1), LatchCountDownReply{NotSet: true})
	// The ones and zeros.
	for _, f := range []func(int64) bool{Deleted, Written, Set, Taken, Updated} {
		if !f(1) || f(0) {
			t.Errorf("%p: 1 and 0 misread", f)
		}
	}
	// election_read.lua.
	reading, err := ElectionReadingOf([]any{`{"term":1}`, int64(900), "2-0", "1-0", `{"term":1}`, "2-0", `{"term":2}`})
	check(fmt.Sprint("election read ", err), reading, ElectionReading{Record: `{"term":1}`, TTL: 900 * ms, Last: "2-0",
		Entries: []LogEntry{{"1-0", `{"term":1}`}, {"2-0", `{"term":2}`}}})
	reading, err = ElectionReadingOf([]any{nil, int64(-2), ""})
	check(fmt.Sprint("election read, no leader ", err), reading, ElectionReading{TTL: -2 * ms})
	if _, err := ElectionReadingOf([]any{nil}); err == nil {
		t.Error("short election reading: no error")
	}
	// renew.lua and its kin.
	held, err := RenewReplyOf([]int64{1, 0, 1}, 3)
	check(fmt.Sprint("renew ", err), held, []bool{true, false, true})
	if _, err := RenewReplyOf([]int64{1}, 2); err == nil {
		t.Error("short renewal reply: no error")
	}
}

// TestRequestsOnServer: the requests run their scripts on a server, and
// the replies read what happened: a Mutex taken, refused, re-entered,
// released, a read-write lock's write side taken and released, and a
// semaphore's, a permit semaphore's and a latch's counts set, taken,
// given, drained and counted down, once per request marker.
func TestRequestsOnServer(t *testing.T) {
	fresh(t)
	ctx := context.Background()
	const (
		u  = "f1fb68c1-6fe4-4f69-9cb2-8f426e845bbd"
		v  = "0c3a4a56-21f5-4b37-9c8c-2d1f6f0c9a11"
		re = "5d8e2c1b-7a4f-4e3d-8b6a-9c0d1e2f3a4b"
	)
	name := "req:mutex"
	k := NewLockKeys(name, layout.Companion(layout.FencingCounter, name), layout.Companion(layout.LockQueue, name), "")
	send := func(s *Script, r interface{ Build() (keys, args []any) }) int64 {
		t.Helper()
		keys, args := r.Build()
		v, err := s.Run(ctx, rdb, keys, args...).Int64()
		if err != nil {
			t.Fatalf("%s: %v", s.Name(), err)
		}
		return v
	}
	first := &LockRequest{Keys: k, Lease: 30000, Owner: u + ":1", Kind: OneShot, Now: "1"}
	if r := LockReplyOf(send(Lock, first)); r.Held || r.Token == 0 {
		t.Fatalf("free lock: %+v", r)
	}
	other := &LockRequest{Keys: k, Lease: 30000, Owner: v + ":1", Now: "1"}
	if r := LockReplyOf(send(Lock, other)); !r.Held || r.TTL <= 0 || r.TTL > 30*time.Second || r.Foreign {
		t.Fatalf("held lock: %+v", r)
	}
	unlock := &UnlockRequest{Keys: k, Owner: v + ":1", Publish: "publish", Grants: clientGrants(v), Channel: lockChannel(name), GrantOthers: true}
	if r := UnlockReplyOf(send(Unlock, unlock)); r.Released != NotHeld {
		t.Fatalf("release by another owner: %+v", r)
	}
	unlock.Owner = u + ":1"
	if r := UnlockReplyOf(send(Unlock, unlock)); r.Released != Freed {
		t.Fatalf("release: %+v", r)
	}
	again := &LockRequest{Keys: k, Marker: name + ":req1", MarkerTTL: 60000, Lease: 30000, Owner: re + ":1", Kind: Reentrant, Now: "1"}
	if r := LockReplyOf(send(Lock, again)); r.Held {
		t.Fatalf("reentrant owner: %+v", r)
	}
	again.Marker = name + ":req2"
	if r := LockReplyOf(send(Lock, again)); r.Held {
		t.Fatalf("re-entry: %+v", r)
	}
	unlock.Owner, unlock.Marker, unlock.MarkerTTL = re+":1", name+":rel1", 60000
	if r := UnlockReplyOf(send(Unlock, unlock)); r.Released != StillHeld {
		t.Fatalf("release of one of two holds: %+v", r)
	}
	if !Deleted(send(ForceUnlock, ForceUnlockRequest{Lock: name, Queue: k.Queue, Channel: lockChannel(name), Publish: "publish",
		Grants: clientGrants(u), ClientID: u})) {
		t.Fatal("force unlock of a held lock: not deleted")
	}

	rw := "req:rw"
	lockKeys := NewLockKeys(rw, layout.Companion(layout.FencingCounter, rw), layout.Companion(layout.RWQueue, rw), "")
	unlockKeys := NewRWUnlockKeys(rw, lockKeys.Counter, lockKeys.Queue, layout.Companion(layout.RWChannel, rw), "")
	write := &RWLockRequest{Keys: lockKeys, Write: true, MarkerTTL: 60000, Lease: 30000, Owner: u + ":1", Holds: layout.ReaderHolds(rw), QueueTTL: 2000}
	if r := LockReplyOf(send(write.Script(), write)); r.Held || r.Token == 0 {
		t.Fatalf("write lock: %+v", r)
	}
	read := &RWLockRequest{Keys: lockKeys, ReaderHold: layout.ReaderHold(rw, v+":1", 1), MarkerTTL: 60000, Lease: 30000, Owner: v + ":1",
		Holds: layout.ReaderHolds(rw), QueueTTL: 2000}
	if r := LockReplyOf(send(read.Script(), read)); !r.Held {
		t.Fatalf("read lock under another's write lock: %+v", r)
	}
	release := &RWUnlockRequest{Keys: unlockKeys, Write: true, Field: u + ":1:write", MarkerTTL: 60000, Channel: unlockKeys.Guard,
		Publish: "publish", Holds: layout.ReaderHolds(rw), Numsub: "numsub", ClientID: u, Grants: clientGrants(u), GrantTTL: 2000, Grant: true}
	if r := UnlockReplyOf(send(release.Script(), release)); r.Released != Freed {
		t.Fatalf("write unlock: %+v", r)
	}

	// A semaphore's and a latch's calls, which apply once per request
	// marker: the same marker answers as the first try did, and a later
	// call deletes the answered markers it is given.
	sem, semCh := "req:sem", "req:semch"
	mark := func(count string, held any, id string, answered ...string) Marked {
		k := Marked{Count: count, Held: held, Marker: count + ":req:" + id}
		k.Forget(answered)
		return k
	}
	set := TrySetRequest{Keys: mark(sem, nil, "1"), N: 2, Publish: "publish", MarkerTTL: 60000, Channel: semCh}
	for _, try := range []string{"first", "retried"} {
		if !Set(send(SemTrySetPermits, set)) {
			t.Fatalf("try set permits, %s: not set", try)
		}
	}
	set.Keys = mark(sem, nil, "2")
	if Set(send(SemTrySetPermits, set)) {
		t.Fatal("try set permits of a set semaphore: set")
	}
	if !Taken(send(SemAcquire, SemAcquireRequest{Keys: mark(sem, nil, "3"), N: 2, MarkerTTL: 60000})) {
		t.Fatal("acquire 2 of 2 permits: not taken")
	}
	if Taken(send(SemAcquire, SemAcquireRequest{Keys: mark(sem, nil, "4"), N: 1, MarkerTTL: 60000})) {
		t.Fatal("acquire 1 of 0 permits: taken")
	}
	rel := SemReleaseRequest{Keys: mark(sem, nil, "5", sem+":req:1", sem+":req:3"), N: 3, Publish: "publish", MarkerTTL: 60000,
		Channel: semCh, Hand: 1, Numsub: "numsub"}
	if r := SemReleaseReplyOf(send(SemRelease, rel), true); r.Available != 2 || !r.Handed {
		t.Fatalf("release 3, handing 1 where no one else listens: %+v", r)
	}
	if n, err := rdb.Exists(ctx, sem+":req:1", sem+":req:3").Result(); err != nil || n != 0 {
		t.Fatalf("answered markers left: %d, %v", n, err)
	}
	if n := send(SemDrain, SemDrainRequest{Keys: mark(sem, nil, "6"), MarkerTTL: 60000}); n != 2 {
		t.Fatalf("drain took %d permits, want 2", n)
	}
	ps, held := "req:ps", "req:ps:timeout"
	set = TrySetRequest{Keys: mark(ps, held, "1"), N: 1, Publish: "publish", MarkerTTL: 60000, Channel: semCh}
	if !Set(send(SemTrySetPermits, set)) {
		t.Fatal("try set a permit semaphore's permits: not set")
	}
	if r := SemReleaseReplyOf(send(SemRelease, SemReleaseRequest{Keys: mark(ps, held, "2"), N: 1, Publish: "publish",
		MarkerTTL: 60000, Channel: semCh}), false); r.Available != 2 {
		t.Fatalf("add a permit to a permit semaphore: %+v", r)
	}
	latch := "req:latch"
	if !Set(send(LatchTrySetCount, TrySetRequest{Keys: mark(latch, nil, "1"), N: 1, Publish: "publish", MarkerTTL: 60000,
		Channel: "req:latchch"})) {
		t.Fatal("try set a latch's count: not set")
	}
	down := LatchCountDownRequest{Keys: mark(latch, nil, "2"), Publish: "publish", MarkerTTL: 60000, Channel: "req:latchch"}
	if r := LatchCountDownReplyOf(send(LatchCountDown, down)); r.NotSet || r.Left != 0 {
		t.Fatalf("count down from 1: %+v", r)
	}
	if r := LatchCountDownReplyOf(send(LatchCountDown, down)); r.NotSet || r.Left != 0 {
		t.Fatalf("count down from 1, retried: %+v", r)
	}
	down.Keys = mark(latch, nil, "3")
	if r := LatchCountDownReplyOf(send(LatchCountDown, down)); !r.NotSet {
		t.Fatalf("count down an open latch: %+v", r)
	}
}
