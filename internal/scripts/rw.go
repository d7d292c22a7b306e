package scripts

// The read-write lock's scripts (Redisson's RReadWriteLock layout). Each
// file's header names its KEYS, ARGV and return values.
var (
	RWReadLock    = loadWith("rw_read_lock", "clock", "fence", "queue", "lockhash", "rw_wait")
	RWWriteLock   = loadWith("rw_write_lock", "clock", "fence", "queue", "lockhash", "rw_wait")
	RWReadUnlock  = loadWith("rw_read_unlock", "clock", "fence", "queue", "rw_readers", "rw_queue", "rw_release")
	RWWriteUnlock = loadWith("rw_write_unlock", "clock", "fence", "queue", "rw_readers", "rw_queue", "rw_release")
	RWRenew       = load("rw_renew")
	RWForceUnlock = loadWith("rw_forceunlock", "clock", "fence", "queue", "rw_readers", "lockhash")
)

// NewRWUnlockKeys returns the keys of a read-write lock's release
// scripts: a lock's keys with the guard, the name of the lock's release
// channel (rw_queue.lua), before the lock's own token key.
func NewRWUnlockKeys(lock, counter, queue, guard, named string) *LockKeys {
	return &LockKeys{Lock: lock, Counter: counter, Queue: queue, Named: named, Guard: guard,
		args: boxKeys(lock, counter, queue, guard, named)}
}

// Queued says whether an earlier attempt of a read-write lock call may
// have queued it (rw_wait.lua).
type Queued uint8

// Whether an earlier attempt may have queued the call.
const (
	NotQueued   Queued = iota // "0"
	MayBeQueued               // "1"
	// MayBeQueuedUnheard: it may be queued as a one-shot writer that
	// does not listen ("o"), whose place its member that listens ("O")
	// takes. "2"
	MayBeQueuedUnheard
)

var queuedArgs = [...]any{NotQueued: argZero, MayBeQueued: argOne, MayBeQueuedUnheard: argTwo}

// RWLockRequest is a call of rw_read_lock.lua or rw_write_lock.lua:
// acquire or re-enter one side of a read-write lock, or keep the call's
// place in its queue of waiters. Fields of type any are boxed once, as
// LockRequest's.
type RWLockRequest struct {
	Keys  *LockKeys
	Write bool // the write lock; false for the read lock
	// Marker is a reentrant owner's request marker; "" for a one-shot
	// owner.
	Marker string
	// ReaderHold is the hold key a one-shot reader's call writes, its
	// first (rw_read_lock.lua); "" for others.
	ReaderHold string
	MarkerTTL  any // the marker's lifetime in ms, given with or without a marker
	Lease      any // the lease in ms
	Owner      any // the owner id "<uuid>:<n>"
	Holds      any // the read lock's: the rule of the lock's reader hold keys
	Kind       Kind
	QueueTTL   any // ms the queue outlives the holder's TTL, at least
	Queued     Queued

	keys []any // Keys with the last key, made for last
	last string
	args [8]any
}

// Script returns the script the request calls.
func (r *RWLockRequest) Script() *Script {
	if r.Write {
		return RWWriteLock
	}
	return RWReadLock
}

// Build returns the request's KEYS and ARGV. The slices are the request's
// own: a caller sends one call before it builds the next.
func (r *RWLockRequest) Build() (keys, args []any) {
	last := r.Marker
	if last == "" {
		last = r.ReaderHold
	}
	if r.keys == nil || r.last != last {
		r.keys, r.last = r.Keys.with(last), last
	}
	fifth := r.Holds
	if r.Write {
		fifth = r.Keys.fencing()
	}
	a := append(r.args[:0], r.Lease, r.Owner, argFlag(r.Marker != ""), r.MarkerTTL, fifth, r.Kind.arg(), r.QueueTTL, queuedArgs[r.Queued])
	return r.keys, a
}

// RWUnlockRequest is a call of rw_read_unlock.lua or rw_write_unlock.lua:
// release one hold of a side of a read-write lock, leave its queue, undo
// an acquisition whose reply was lost, or make a write hold passed on in
// process so in Redis (a switch). Fields of type any are boxed once, as
// LockRequest's.
type RWUnlockRequest struct {
	Keys  *LockKeys // NewRWUnlockKeys's
	Write bool      // the write lock; false for the read lock
	Field any       // the hold's field: the owner id, or "<owner>:write"
	// Marker is the release marker of a reentrant owner's release, so
	// that a retry is applied once; with Undo, the request marker of an
	// acquisition whose reply was lost, undone only if it was applied.
	// "" for none.
	Marker    string
	Undo      bool
	MarkerTTL any
	Channel   any // the lock's release channel
	Publish   any // "publish" or "spublish"
	Holds     any // the rule of the lock's reader hold keys
	Numsub    any // "numsub" or "shardnumsub"
	ClientID  any // the releasing Client's "<uuid>"
	Grants    any // the releasing Client's grant channel
	GrantTTL  any // the longest a grant holds the lock before its grantee renews it, ms
	Leaving   string
	// Grant lets a release that frees the lock grant it to the first
	// waiting writer.
	Grant bool
	// Writer is the member of the releasing Client's writer to grant the
	// lock to when it is first in the queue, or to pass it to with
	// PassToken; "" for none.
	Writer string
	// PassToken, when not 0, makes the request a switch: the releasing
	// Client has passed its write hold to Writer in process with this
	// token. Reserve asks for the next block of tokens.
	PassToken uint64
	Reserve   bool
}

// Script returns the script the request calls.
func (r *RWUnlockRequest) Script() *Script {
	if r.Write {
		return RWWriteUnlock
	}
	return RWReadUnlock
}

// Build returns the request's KEYS and ARGV.
func (r *RWUnlockRequest) Build() (keys, args []any) {
	mode := argZero
	switch {
	case r.Marker != "" && r.Undo:
		mode = argTwo
	case r.Marker != "":
		mode = argOne
	}
	n := 13
	switch {
	case r.PassToken != 0:
		n += 3
	case r.Writer != "":
		n++
	}
	a := append(make([]any, 0, n), r.Field, r.Channel, r.Publish, mode, r.MarkerTTL, r.Holds,
		r.Numsub, r.ClientID, r.Grants, r.GrantTTL, argOrEmpty(r.Leaving), argFlag(r.Grant), r.Keys.fencing())
	switch {
	case r.PassToken != 0:
		a = append(a, r.Writer, int64(r.PassToken), argFlag(r.Reserve))
	case r.Writer != "":
		a = append(a, r.Writer)
	}
	return r.Keys.with(r.Marker), a
}

// RWForceUnlockRequest is a call of rw_forceunlock.lua: delete a
// read-write lock whoever holds it, with its reader hold keys, wake its
// waiters and tell its holders' Clients. Its reply is 1 when the lock was
// held (see Deleted).
type RWForceUnlockRequest struct {
	Lock, Queue, Guard string
	Channel            any // the lock's release channel
	Publish            string
	Holds              any    // the rule of the lock's reader hold keys
	Grants             string // the calling Client's grant channel
	ClientID           string // the calling Client's "<uuid>"
}

// Build returns the request's KEYS and ARGV.
func (r RWForceUnlockRequest) Build() (keys, args []any) {
	return boxKeys(r.Lock, r.Queue, r.Guard), []any{r.Channel, r.Publish, r.Holds, r.Grants, r.ClientID}
}
