// Package layout names the keys and channels relock uses on Redis, for
// the library and its command line alike. Most follow Redisson's layout,
// so that both lock the same names; those named relock_ are relock's own.
package layout

import "strings"

// Prefixes of a lock's companion keys and channels (see Companion).
const (
	LockChannel = "redisson_lock__channel" // a lock's release channel
	// A lock's own fencing token key, as Redisson's RFencedLock and
	// earlier relock releases keep it.
	Token       = "redisson_lock_token"
	UnlockLatch = "redisson_unlock_latch" // release markers of reentrant owners
	LockRequest = "relock_lock_request"   // acquisition markers of reentrant owners
	FairQueue   = "redisson_lock_queue"   // a fair lock's queue of waiting owners
	FairTimeout = "redisson_lock_timeout" // and their deadlines
	FairAlive   = "relock_fair_alive"     // the liveness of a fair lock's relock waiters
	RWChannel   = "redisson_rwlock"       // a read-write lock's release channel
	LockQueue   = "relock_lock_queue"     // a lock's queue of waiting relock calls
	RWQueue     = "relock_rwlock_queue"   // a read-write lock's queue of waiting relock calls
	PermitQueue = "relock_permit_queue"   // a permit semaphore's queue of waiting relock calls
	// A relock Client's channel for the grants made to its waiting calls:
	// GrantChannel + ":" + uuid, or per slot on a cluster.
	GrantChannel = "relock_grant"
	// A relock Client's hash of who it is: ClientInfo + ":" + uuid, with
	// fields host, pid, program, version, started and name.
	ClientInfo = "relock_client"
	// A semaphore's channel (Semaphore and PermitSemaphore), told the
	// number of permits available: SemaphoreChannel + ":{name}".
	SemaphoreChannel = "redisson_sc"
	// A countdown latch's channel: see LatchChannel.
	LatchChannelPrefix = "redisson_countdownlatch__channel__"
	// An election's lock: a lock hash (as a Mutex's) whose holder is the
	// leader, with the leader's record in the fields LeaderField and
	// LeaderHolderField: Election + ":{name}".
	Election = "relock_election"
	// An election's log of leader records, a stream: ElectionLog + ":{name}".
	ElectionLog = "relock_election_log"
	// An election's channel, told the term of every change:
	// ElectionChannel + ":{name}".
	ElectionChannel = "relock_election_channel"
)

// Fields of an election's lock hash that hold the leader's record (JSON:
// since, term, value, holder, host, pid, program, client) and the owner
// id of the holder that wrote it.
const (
	LeaderField       = "relock_leader"
	LeaderHolderField = "relock_leader_holder"
)

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

// Companion returns the key or channel "prefix:{name}" that hashes to the
// same cluster slot as name, or "prefix:name" when name has its own hash
// tag.
func Companion(prefix, name string) string {
	if strings.IndexByte(name, '{') >= 0 {
		return prefix + ":" + name
	}
	return prefix + ":{" + name + "}"
}

// PermitTimeouts returns the zset of a permit semaphore's held permits:
// "{name}:timeout", or "name:timeout" when name has its own hash tag
// (Redisson's layout).
func PermitTimeouts(name string) string {
	if strings.IndexByte(name, '{') >= 0 {
		return name + ":timeout"
	}
	return "{" + name + "}:timeout"
}
