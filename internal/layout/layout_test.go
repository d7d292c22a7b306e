package layout

import (
	"fmt"
	"strings"
	"testing"

	"github.com/relock-go/relock/internal/slots"
)

// TestLayout pins every name relock uses on Redis, spelled out: most are
// Redisson's, which a Redisson client on the same names reads and writes,
// and the rest are what earlier relock releases left in Redis. A change
// here changes the wire layout.
func TestLayout(t *testing.T) {
	slot := slots.Tag(slots.Of("job")) // the tag of "job"'s slot
	for _, c := range []struct{ got, want string }{
		// Redisson's.
		{Companion(LockChannel, "job"), "redisson_lock__channel:{job}"},
		{Companion(Token, "job"), "redisson_lock_token:{job}"},
		{Marker(UnlockLatch, "job", "0a1b"), "redisson_unlock_latch:{job}:0a1b"},
		{Companion(FairQueue, "job"), "redisson_lock_queue:{job}"},
		{Companion(FairTimeout, "job"), "redisson_lock_timeout:{job}"},
		{WaiterChannel(Companion(LockChannel, "job"), "u:1"), "redisson_lock__channel:{job}:u:1"},
		{Companion(RWChannel, "job"), "redisson_rwlock:{job}"},
		{ReaderHold("job", "u:1", 2), "{job}:u:1:rwlock_timeout:2"},
		{Companion(SemaphoreChannel, "job"), "redisson_sc:{job}"},
		{PermitTimeouts("job"), "{job}:timeout"},
		{LatchChannel("job", false), "redisson_countdownlatch__channel__{job}"},
		{LatchChannels, "redisson_countdownlatch__channel__*"},
		// relock's own.
		{Marker(LockRequest, "job", "u:1:7"), "relock_lock_request:{job}:u:1:7"},
		{Companion(FairAlive, "job"), "relock_fair_alive:{job}"},
		{Companion(LockQueue, "job"), "relock_lock_queue:{job}"},
		{Companion(RWQueue, "job"), "relock_rwlock_queue:{job}"},
		{Companion(PermitQueue, "job"), "relock_permit_queue:{job}"},
		{Marker(SemaphoreRequest, "job", "c0ffee:3"), "relock_semaphore_request:{job}:c0ffee:3"},
		{Marker(LatchRequest, "job", "c0ffee:4"), "relock_latch_request:{job}:c0ffee:4"},
		{Companion(Election, "job"), "relock_election:{job}"},
		{Companion(ElectionLog, "job"), "relock_election_log:{job}"},
		{Companion(ElectionChannel, "job"), "relock_election_channel:{job}"},
		{Companion(Watch, "job"), "relock_watch:{job}"},
		{Fencing("job", false), "relock_fencing"},
		{Fencing("job", true), "relock_fencing:{" + slot + "}"},
		{Grants("c0ffee", "job", false), "relock_grant:c0ffee"},
		{Grants("c0ffee", "job", true), "relock_grant:{" + slot + "}:c0ffee"},
		{GrantPrefix("job", false), "relock_grant:"},
		{GrantPrefix("job", true), "relock_grant:{" + slot + "}:"},
		{ClientKey("c0ffee"), "relock_client:c0ffee"},
		{Pattern(LockChannel), "redisson_lock__channel:*"},
		// Fields relock adds to a lock hash.
		{TokenField, "relock_token"},
		{SinceField, "relock_since"},
		{QueuedField, "relock_queued"},
		{LeaderField, "relock_leader"},
		{LeaderHolderField, "relock_leader_holder"},
		{fmt.Sprint(PermitNoLease), "922337203685477"},
	} {
		if c.got != c.want {
			t.Errorf("got %q, want %q", c.got, c.want)
		}
	}
	for _, own := range []string{LockRequest, FairAlive, LockQueue, RWQueue, PermitQueue, SemaphoreRequest,
		LatchRequest, Election, ElectionLog, ElectionChannel, Watch, GrantChannel, ClientInfo, FencingCounter,
		TokenField, SinceField, QueuedField, LeaderField, LeaderHolderField} {
		if !strings.HasPrefix(own, Own) {
			t.Errorf("%q, relock's own, does not begin with %q", own, Own)
		}
	}
}

// TestOwnHashTag: a name with a hash tag of its own is kept as it is in
// every key made from it, whose slot is then the name's; a name without
// one goes in braces. On a cluster a latch's channel follows the name's
// slot.
func TestOwnHashTag(t *testing.T) {
	const name = "{batch}:done"
	for _, c := range []struct{ got, want string }{
		{Companion(LockChannel, name), "redisson_lock__channel:{batch}:done"},
		{Marker(LockRequest, name, "u:1:7"), "relock_lock_request:{batch}:done:u:1:7"},
		{PermitTimeouts(name), "{batch}:done:timeout"},
		{ReaderHold(name, "u:1", 1), "{batch}:done:u:1:rwlock_timeout:1"},
		{LatchChannel(name, false), "redisson_countdownlatch__channel__{{batch}:done}"},
		{LatchChannel(name, true), "redisson_countdownlatch__channel__{batch}:done"},
		{LatchChannel("job", true), "redisson_countdownlatch__channel__{job}"},
	} {
		if c.got != c.want {
			t.Errorf("got %q, want %q", c.got, c.want)
		}
	}
	for _, name := range []string{"job", "{batch}:done", "a:{b}:c"} {
		want := slots.Of(name)
		for _, k := range []string{
			Companion(LockChannel, name), Marker(UnlockLatch, name, "x"), PermitTimeouts(name),
			ReaderHold(name, "u:1", 1), LatchChannel(name, true), Fencing(name, true),
			Grants("c0ffee", name, true), GrantPrefix(name, true),
		} {
			if got := slots.Of(k); got != want {
				t.Errorf("%q is in slot %d, not in %q's %d", k, got, name, want)
			}
		}
	}
}

// TestReaderHolds: formatted with an owner and a hold number, the rule
// of a lock's reader hold keys gives ReaderHold's key, whatever percent
// signs the name has.
func TestReaderHolds(t *testing.T) {
	for _, name := range []string{"job", "{batch}:done", "50%", "%d%s%%{x}"} {
		for _, owner := range []string{"u:1", "100%:2"} {
			if got, want := fmt.Sprintf(ReaderHolds(name), owner, 3), ReaderHold(name, owner, 3); got != want {
				t.Errorf("ReaderHolds(%q) formats %q, want %q", name, got, want)
			}
		}
	}
}

// TestNameOf: NameOf undoes Companion.
func TestNameOf(t *testing.T) {
	for _, name := range []string{"job", "{batch}:done", "a:{b}"} {
		if got, ok := NameOf(Election, Companion(Election, name)); !ok || got != name {
			t.Errorf("NameOf(Companion(%q)) = %q, %v", name, got, ok)
		}
	}
	if got, ok := NameOf(Election, "job"); ok || got != "job" {
		t.Errorf("NameOf of a key without the prefix = %q, %v", got, ok)
	}
	if !IsGrants(Grants("c0ffee", "job", true)) || IsGrants(Companion(LockChannel, "job")) {
		t.Error("IsGrants")
	}
}

// TestNoAllocations: a key made per call costs one allocation.
func TestNoAllocations(t *testing.T) {
	for _, c := range []struct {
		name string
		f    func()
	}{
		{"Companion", func() { _ = Companion(LockQueue, "job") }},
		{"Marker", func() { _ = Marker(LockRequest, "job", "u:1:7") }},
		{"ReaderHold", func() { _ = ReaderHold("job", "u:1", 1) }},
	} {
		if n := testing.AllocsPerRun(100, c.f); n > 1 {
			t.Errorf("%s: %v allocations, want 1", c.name, n)
		}
	}
}

// TestLatchChannel: Redisson's channel, braces around the whole name,
// except for a name with its own hash tag on a cluster, where only a
// channel of the name's slot can be published by a script.
func TestLatchChannel(t *testing.T) {
	for _, c := range []struct {
		name    string
		cluster bool
		want    string
	}{
		{"job", false, "redisson_countdownlatch__channel__{job}"},
		{"job", true, "redisson_countdownlatch__channel__{job}"},
		{"{batch}:done", false, "redisson_countdownlatch__channel__{{batch}:done}"},
		{"{batch}:done", true, "redisson_countdownlatch__channel__{batch}:done"},
	} {
		got := LatchChannel(c.name, c.cluster)
		if got != c.want {
			t.Errorf("LatchChannel(%q, %v) = %q, want %q", c.name, c.cluster, got, c.want)
		}
		if c.cluster && slots.Of(got) != slots.Of(c.name) {
			t.Errorf("cluster channel %q is not in %q's slot", got, c.name)
		}
	}
}

// TestCompanion: a companion key puts the name in braces, unless the
// name has a hash tag of its own.
func TestCompanion(t *testing.T) {
	for _, c := range []struct{ name, want string }{
		{"orders:42", "redisson_lock_token:{orders:42}"},
		{"{orders}:42", "redisson_lock_token:{orders}:42"},
	} {
		if got := Companion(Token, c.name); got != c.want {
			t.Errorf("Companion(%q) = %q, want %q", c.name, got, c.want)
		}
	}
}
