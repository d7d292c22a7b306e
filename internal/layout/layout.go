// Package layout is the one place that names the keys and channels relock
// uses on Redis and builds them from a primitive's name, hash tags
// included, for the library, the command line and the tests alike: no
// other package spells a name, and the scripts (internal/scripts) take
// every key as KEYS and every prefix they extend as ARGV, built here.
// Most names follow Redisson's layout, so that both lock the same names;
// those beginning with Own are relock's own. layout_test.go pins every one.
package layout

import (
	"strconv"
	"strings"

	"github.com/relock-go/relock/internal/slots"
)

// Prefixes of a primitive's companion keys and channels (see Companion).
const (
	LockChannel = "redisson_lock__channel" // a lock's release channel
	// A lock's own fencing token key, as Redisson's RFencedLock and
	// earlier relock releases keep it.
	Token       = "redisson_lock_token"
	UnlockLatch = "redisson_unlock_latch" // release markers of reentrant owners (see Marker)
	LockRequest = "relock_lock_request"   // acquisition markers of reentrant owners (see Marker)
	FairQueue   = "redisson_lock_queue"   // a fair lock's queue of waiting owners
	FairTimeout = "redisson_lock_timeout" // and their deadlines
	FairAlive   = "relock_fair_alive"     // the liveness of a fair lock's relock waiters
	RWChannel   = "redisson_rwlock"       // a read-write lock's release channel
	LockQueue   = "relock_lock_queue"     // a lock's queue of waiting relock calls
	RWQueue     = "relock_rwlock_queue"   // a read-write lock's queue of waiting relock calls
	PermitQueue = "relock_permit_queue"   // a permit semaphore's queue of waiting relock calls
	// A semaphore's channel (Semaphore and PermitSemaphore), told the
	// number of permits available, as Redisson's.
	SemaphoreChannel = "redisson_sc"
	SemaphoreRequest = "relock_semaphore_request" // request markers of a semaphore's calls (see Marker)
	LatchRequest     = "relock_latch_request"     // request markers of a countdown latch's calls (see Marker)
	// An election's lock: a lock hash (as a Mutex's) whose holder is the
	// leader, with the leader's record in the fields LeaderField and
	// LeaderHolderField.
	Election = "relock_election"
	// An election's log of leader records, a stream.
	ElectionLog = "relock_election_log"
	// An election's channel, told the term of every change.
	ElectionChannel = "relock_election_channel"
	// The command line's own channel beside a lock's release channel, to
	// which a holder's watch subscribes: nothing is published on it, and
	// neither the library nor Redisson knows it.
	Watch = "relock_watch"
)

// Own begins the name of every key and channel that is relock's own
// rather than Redisson's (and the fields relock adds to a lock hash).
const Own = "relock_"

// Names not made from a primitive's name: a Client's own, and a server's
// or a hash slot's.
const (
	// A relock Client's channel for the grants made to its waiting calls:
	// see Grants.
	GrantChannel = "relock_grant"
	// A relock Client's hash of who it is, with fields host, pid, program,
	// version, started and name: see ClientKey.
	ClientInfo = "relock_client"
	// The fencing counter of a standalone server or Sentinel, shared by
	// every lock there; a cluster has one per hash slot in use (see
	// Fencing).
	FencingCounter = "relock_fencing"
)

// A countdown latch's channel: see LatchChannel.
const (
	LatchChannelPrefix = "redisson_countdownlatch__channel__"
	// LatchChannels matches every countdown latch's channel, as a glob
	// pattern (an ACL channel pattern too).
	LatchChannels = LatchChannelPrefix + "*"
)

// ReaderHoldInfix separates a reader's owner id from the number of its
// hold in a read-write lock's reader hold key (see ReaderHold).
const ReaderHoldInfix = ":rwlock_timeout:"

// Fields of an election's lock hash that hold the leader's record (JSON:
// since, term, value, holder, host, pid, program, client) and the owner
// id of the holder that wrote it.
const (
	LeaderField       = "relock_leader"
	LeaderHolderField = "relock_leader_holder"
)

// PermitNoLease is the expiry score of a permit held without a lease in a
// permit semaphore's zset (Redisson's).
const PermitNoLease = 922337203685477

// TokenField is the field of a lock hash that holds the current holder's
// fencing token.
const TokenField = "relock_token"

// SinceField is the field of a Mutex's or FairMutex's hash that holds when
// relock granted it to its holder, in unix ms: by the acquiring Client's
// clock (to the second), or the server's for a grant by a release.
const SinceField = "relock_since"

// QueuedField is the field of a Mutex's hash that says someone may be in
// the lock's queue of waiters, so that the holder's release looks there:
// "1" when present.
const QueuedField = "relock_queued"

// ownTag reports whether name carries a hash tag of its own (relock
// refuses a name with a brace but no proper tag): the keys made from it
// then hold it as it is, which puts them in its cluster slot; otherwise
// they hold it in braces, "{name}".
func ownTag(name string) bool { return strings.IndexByte(name, '{') >= 0 }

// Companion returns the key or channel "prefix:{name}" that hashes to the
// same cluster slot as name, or "prefix:name" when name has its own hash
// tag.
func Companion(prefix, name string) string {
	if ownTag(name) {
		return prefix + ":" + name
	}
	return prefix + ":{" + name + "}"
}

// NameOf returns the name whose companion key or channel of prefix is key
// (Companion's inverse), and whether key is one; key itself when it is
// not. Companion gives "a" and "{a}" one key, whose name NameOf says is
// "a".
func NameOf(prefix, key string) (string, bool) {
	rest, ok := strings.CutPrefix(key, prefix+":")
	if !ok {
		return key, false
	}
	if inner, ok := strings.CutPrefix(rest, "{"); ok {
		if name, ok := strings.CutSuffix(inner, "}"); ok && !strings.Contains(name, "{") {
			return name, true
		}
	}
	return rest, true
}

// Pattern returns the glob pattern (an ACL key or channel pattern too)
// that matches every companion key or channel of prefix: "prefix:*".
func Pattern(prefix string) string { return prefix + ":*" }

// Marker returns a marker key of name that makes a retried call apply
// once: Companion(prefix, name) + ":" + id, prefix being LockRequest or
// UnlockLatch (a reentrant owner's acquisitions and releases),
// SemaphoreRequest or LatchRequest, and id the call's own.
func Marker(prefix, name, id string) string {
	if ownTag(name) {
		return prefix + ":" + name + ":" + id
	}
	return prefix + ":{" + name + "}:" + id
}

// WaiterChannel returns the channel of one waiter of a fair lock whose
// release channel is channel, as Redisson names it: channel, a colon and
// the waiter's owner id.
func WaiterChannel(channel, owner string) string { return WaiterChannels(channel) + owner }

// WaiterChannels returns the prefix of the own channels of a fair lock's
// waiters, whose release channel is channel: a waiter owner listens on
// WaiterChannels(channel) + owner (Redisson's layout), which the fair
// scripts are given to extend.
func WaiterChannels(channel string) string { return channel + ":" }

// PermitTimeouts returns the zset of a permit semaphore's held permits:
// "{name}:timeout", or "name:timeout" when name has its own hash tag
// (Redisson's layout).
func PermitTimeouts(name string) string {
	if ownTag(name) {
		return name + ":timeout"
	}
	return "{" + name + "}:timeout"
}

// LatchChannel returns a countdown latch's channel. Redisson always names
// it "redisson_countdownlatch__channel__{" + name + "}", and so does relock
// on a standalone server or Sentinel. On a cluster (cluster true) a name
// with its own hash tag, such as "{batch}:done", would give a channel of
// another slot ("{{batch}" is its tag), which a script of the name's slot
// cannot publish on (CROSSSLOT: Redisson cannot count such a latch down on
// a cluster either); relock then uses the prefix followed by the bare name,
// which hashes to the name's slot.
func LatchChannel(name string, cluster bool) string {
	if cluster && strings.IndexByte(name, '{') >= 0 {
		return LatchChannelPrefix + name
	}
	return LatchChannelPrefix + "{" + name + "}"
}

// ReaderHold returns the key of hold i (from 1) of the reader owner of the
// read-write lock name, Redisson's "{name}:<owner>:rwlock_timeout:<i>" (or
// "name:..." when name has its own hash tag): a key that lives exactly as
// long as the hold.
func ReaderHold(name, owner string, i int) string {
	if ownTag(name) {
		return name + ":" + owner + ReaderHoldInfix + strconv.Itoa(i)
	}
	return "{" + name + "}:" + owner + ReaderHoldInfix + strconv.Itoa(i)
}

// ReaderHolds returns the rule of name's reader hold keys as a format for
// Lua's string.format (and Go's fmt): formatted with an owner id (%s) and
// a hold number (%d) it gives ReaderHold(name, owner, i), the percent
// signs of name doubled. The scripts that must name the holds of readers
// they find in the lock's hash, whose owners no caller knows, take it as
// an argument.
func ReaderHolds(name string) string {
	name = strings.ReplaceAll(name, "%", "%%")
	if ownTag(name) {
		return name + ":%s" + ReaderHoldInfix + "%d"
	}
	return "{" + name + "}:%s" + ReaderHoldInfix + "%d"
}

// Fencing returns the fencing counter that serves the lock name: on a
// standalone server or Sentinel (cluster false) FencingCounter, shared by
// every lock; on a cluster the counter of name's hash slot, in that slot:
// "relock_fencing:{<tag>}", <tag> being the slot's (slots.Tag).
func Fencing(name string, cluster bool) string {
	if !cluster {
		return FencingCounter
	}
	return FencingCounter + ":{" + slots.Tag(slots.Of(name)) + "}"
}

// Grants returns the channel on which the Client uuid hears of the grants
// made to its waiting calls on the lock name: "relock_grant:<uuid>" on a
// standalone server or Sentinel, one per hash slot on a cluster,
// "relock_grant:{<tag>}:<uuid>", <tag> being the slot's (slots.Tag). It is
// GrantPrefix(name, cluster) followed by uuid.
func Grants(uuid, name string, cluster bool) string {
	if !cluster {
		return GrantChannel + ":" + uuid
	}
	return GrantChannel + ":{" + slots.Tag(slots.Of(name)) + "}:" + uuid
}

// GrantPrefix returns what every Client's grant channel for the lock name
// begins with (see Grants): a script that tells another Client's waiter
// adds that Client's uuid to it.
func GrantPrefix(name string, cluster bool) string {
	if !cluster {
		return GrantChannel + ":"
	}
	return GrantChannel + ":{" + slots.Tag(slots.Of(name)) + "}:"
}

// IsGrants reports whether channel is a Client's grant channel.
func IsGrants(channel string) bool { return strings.HasPrefix(channel, GrantChannel+":") }

// ClientKey returns the key of the Client uuid's hash of who it is:
// "relock_client:<uuid>".
func ClientKey(uuid string) string { return ClientInfo + ":" + uuid }
