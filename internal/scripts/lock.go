package scripts

import (
	"time"
)

// The Mutex's scripts.
var (
	Lock        = loadWith("lock", "clock", "fence", "queue", "lockhash")
	Unlock      = loadWith("unlock", "clock", "fence", "queue")
	Abandon     = load("abandon")
	Renew       = load("renew")
	ForceUnlock = loadWith("forceunlock", "clock", "queue", "fence", "lockhash")
)

// LockKeys are the keys a lock's scripts share (lock.lua, unlock.lua and
// the read-write lock's): made once per lock handle, boxed once.
type LockKeys struct {
	Lock    string // the lock's hash
	Counter string // the fencing counter of the lock's slot (fence.lua)
	Queue   string // the lock's queue of waiters
	// Named is the lock's own token key (fence.lua), "" when the Client
	// keeps none: the fencing mode argument follows from it.
	Named string
	// Guard is the guard key of a read-write lock's release scripts
	// (rw_queue.lua), before Named; "" for others.
	Guard string

	args []any
}

// NewLockKeys returns the keys of a lock's scripts.
func NewLockKeys(lock, counter, queue, named string) *LockKeys {
	return &LockKeys{Lock: lock, Counter: counter, Queue: queue, Named: named, args: boxKeys(lock, counter, queue, named)}
}

// fencing returns the fencing mode of fence.lua: "0" when the lock's own
// token key is among the KEYS, "1" when not.
func (k *LockKeys) fencing() any {
	if k.Named != "" {
		return argZero
	}
	return argOne
}

// with returns the keys followed by marker when it is not "".
func (k *LockKeys) with(marker string) []any {
	if marker == "" {
		return k.args
	}
	return withKey(k.args, marker)
}

// LockRequest is a call of lock.lua: acquire or re-enter a Mutex, or
// keep the call's place in its queue of waiters. Fields of type any are
// values the caller boxes once (per Client, lock or lock call), so that
// building the request allocates nothing for them.
type LockRequest struct {
	Keys *LockKeys
	// Marker is a reentrant owner's request marker, so that a retried
	// request is applied once; "" for a one-shot owner, never seen twice.
	Marker    string
	MarkerTTL any // the marker's lifetime in ms, with Marker
	Lease     any // the lease in ms
	Owner     any // the owner id "<uuid>:<n>"
	Kind      Kind
	Now       any  // the caller's clock in unix ms, recorded as the hold's start
	Joined    bool // an earlier attempt of the call may have queued it

	keys       []any // Keys with Marker, made for keysMarker
	keysMarker string
	args       [7]any
}

// Build returns the request's KEYS and ARGV. The slices are the request's
// own: a caller sends one call before it builds the next.
func (r *LockRequest) Build() (keys, args []any) {
	if r.keys == nil || r.keysMarker != r.Marker {
		r.keys, r.keysMarker = r.Keys.with(r.Marker), r.Marker
	}
	a := append(r.args[:0], r.Lease, r.Owner, r.Keys.fencing(), r.Kind.arg(), r.Now)
	// Whether the call may have queued is left out while it is "0",
	// unless the marker's lifetime follows.
	switch {
	case r.Marker != "":
		a = append(a, argFlag(r.Joined), r.MarkerTTL)
	case r.Joined:
		a = append(a, argOne)
	}
	return r.keys, a
}

// LockReply is lock.lua's answer (and the read-write lock's lock
// scripts').
type LockReply struct {
	// Token is the fencing token of the hold taken; 0 when the lock is
	// held by another owner (and for a read lock taken before any writer
	// held it, or a write lock refused as an upgrade: see the RWMutex's).
	Token uint64
	// Held is true when another owner holds the lock; TTL is then its
	// remaining time to live, negative when it has none, and Foreign
	// whether a holder may be other than a relock client, whose release
	// only publishes on the lock's release channel.
	Held    bool
	TTL     time.Duration
	Foreign bool
}

// LockReplyOf decodes a lock script's reply: a token (r >= 0), or, with
// v = -r-1, the holder's TTL + 1 in ms as v // 2 and the foreign bit as
// v % 2.
func LockReplyOf(r int64) LockReply {
	if r >= 0 {
		return LockReply{Token: uint64(r)}
	}
	v := -r - 1
	return LockReply{Held: true, TTL: time.Duration(v>>1-1) * time.Millisecond, Foreign: v&1 == 1}
}

// UnlockRequest is a call of unlock.lua: release one hold of a Mutex, or
// leave its queue of waiters, or make a hold passed on in process so in
// Redis (a switch). Fields of type any are boxed once, as LockRequest's.
type UnlockRequest struct {
	Keys *LockKeys
	// Marker is the release marker of a reentrant owner's release, so
	// that a retry is applied once; "" for none.
	Marker    string
	MarkerTTL any // the marker's lifetime in ms, with Marker
	Owner     any // the owner id releasing; "" for a call that only leaves the queue
	Publish   any // "publish" or "spublish"
	Grants    any // the releasing Client's grant channel
	Channel   any // the lock's release channel
	// GrantOthers lets the release grant the lock to another Client's
	// waiter; false grants to the releasing Client's own only.
	GrantOthers bool
	// Listening says the releasing Client listens on the release channel
	// itself.
	Listening bool
	// Preferred is the member of a waiter of the releasing Client to
	// grant the lock to when the first in the queue is the Client's too.
	Preferred string
	// Leaving is the member of a call leaving the queue.
	Leaving string
	// PassToken, when not 0, makes the request a switch: the releasing
	// Client has passed its hold to Preferred in process with this token.
	// Reserve asks for the next block of tokens, and Since is the
	// Client's clock (unix ms, boxed) when it passed the hold.
	PassToken uint64
	Reserve   bool
	Since     any
}

// Build returns the request's KEYS and ARGV, leaving out the trailing
// arguments that are "" or "0": a plain release needs none of them, and
// each costs the server.
func (r *UnlockRequest) Build() (keys, args []any) {
	tail := [7]any{argFlag(r.Listening), argOrEmpty(r.Preferred), argOrEmpty(r.Leaving), argEmpty, argZero, argEmpty, argEmpty}
	if r.PassToken != 0 {
		tail[3], tail[4], tail[6] = int64(r.PassToken), argFlag(r.Reserve), r.Since
	}
	if r.Marker != "" {
		tail[5] = r.MarkerTTL
	}
	n := len(tail)
	for n > 0 && (tail[n-1] == argEmpty || tail[n-1] == argZero) {
		n--
	}
	args = make([]any, 0, 6+n)
	args = append(args, r.Owner, r.Publish, r.Keys.fencing(), r.Grants, argFlag(r.GrantOthers), r.Channel)
	return r.Keys.with(r.Marker), append(args, tail[:n]...)
}

// argOrEmpty boxes s, without an allocation when it is "".
func argOrEmpty(s string) any {
	if s == "" {
		return argEmpty
	}
	return s
}

// Released is what a release script did.
type Released uint8

// What a release script did.
const (
	// NotHeld: the owner held no hold (expired, deleted or never held).
	NotHeld Released = iota
	// StillHeld: one hold released; the lock is still held (by the
	// owner's other holds, or a read-write lock's other side).
	StillHeld
	// Freed: the last hold released, and the lock is free.
	Freed
	// GrantedOther: the last hold released, and the lock granted to the
	// first waiter of the queue, of another Client, told on its Client's
	// grant channel.
	GrantedOther
	// Granted: the last hold released, and the lock granted to the
	// releasing Client's own waiter named in the request (Preferred).
	Granted
)

// UnlockReply is the answer of a release (unlock.lua, rw_read_unlock.lua,
// rw_write_unlock.lua) that was not a switch.
type UnlockReply struct {
	Released Released
	// Token is the grantee's fencing token, with Granted; Reserved says
	// the tokens after it are reserved for the grantee's Client to pass
	// the lock on in process.
	Token    uint64
	Reserved bool
}

// UnlockReplyOf decodes a release's reply: 0 to 3, or -(2t + p) for a
// grant to the releasing Client's waiter.
func UnlockReplyOf(r int64) UnlockReply {
	switch {
	case r < 0:
		return UnlockReply{Released: Granted, Token: uint64(-r) >> 1, Reserved: r&1 == 1}
	case r <= int64(GrantedOther):
		return UnlockReply{Released: Released(r)}
	}
	return UnlockReply{Released: NotHeld}
}

// Switched is what a switch (a release with a PassToken) found.
type Switched uint8

// What a switch found.
const (
	// RunBroken: the Client held the lock no more (its run of holds had
	// expired or been deleted): the grantee has nothing.
	RunBroken Switched = iota
	// Overtaken: a hold of the Client with a newer token is there already
	// (its switch came first): nothing was done.
	Overtaken
	// Switched: the grantee holds the lock with the switch's token.
	SwitchedOver
)

// SwitchReply is the answer to a switch of unlock.lua or
// rw_write_unlock.lua.
type SwitchReply struct {
	Switched Switched
	// Newer is the token of the newer hold, with Overtaken.
	Newer uint64
	// MayPass says, with SwitchedOver, that the Client may go on passing
	// the lock in process; Block is then the first of the tokens reserved
	// for that (0: none).
	MayPass bool
	Block   uint64
}

// SwitchReplyOf decodes a switch's reply: 4r + 2p + 1 when the grantee
// holds the lock, 4c + 2 when overtaken, 0 when the run was broken.
func SwitchReplyOf(r int64) SwitchReply {
	switch {
	case r&1 == 1:
		return SwitchReply{Switched: SwitchedOver, MayPass: r&2 == 2, Block: uint64(r >> 2)}
	case r&3 == 2:
		return SwitchReply{Switched: Overtaken, Newer: uint64(r >> 2)}
	}
	return SwitchReply{Switched: RunBroken}
}

// AbandonRequest is a call of abandon.lua: undo an acquisition whose reply
// was lost, if Redis applied it.
type AbandonRequest struct {
	Lock string // the lock's hash
	// Marker is the lost request's marker, for a reentrant owner: the
	// undo happens only if the marker shows the acquisition applied. ""
	// for a one-shot owner, whose field can only come from it.
	Marker  string
	Owner   any // the owner id
	Channel any // the lock's release channel
	Publish any // "publish" or "spublish"
}

// Build returns the request's KEYS and ARGV.
func (r AbandonRequest) Build() (keys, args []any) {
	return boxKeys(r.Lock, r.Marker), []any{r.Owner, r.Channel, r.Publish, argFlag(r.Marker != "")}
}

// ForceUnlockRequest is a call of forceunlock.lua: delete a lock whoever
// holds it, wake its waiters and tell its holders' Clients. Its reply is
// 1 when the lock was held (see Deleted).
type ForceUnlockRequest struct {
	Lock, Queue string
	Channel     any // the lock's release channel
	Publish     string
	Grants      string // the calling Client's grant channel
	ClientID    string // the calling Client's "<uuid>"
}

// Build returns the request's KEYS and ARGV.
func (r ForceUnlockRequest) Build() (keys, args []any) {
	return boxKeys(r.Lock, r.Queue), []any{r.Channel, r.Publish, r.Grants, r.ClientID}
}

// Deleted reads the reply of a force unlock: whether the lock was held
// and is now deleted.
func Deleted(r int64) bool { return r == 1 }
