package scripts

import (
	"fmt"
	"time"
)

// The fair lock's scripts. Each is its own file with the queue functions
// of fair_queue.lua put between its header and its body, so that its
// source still begins with its header.
var (
	FairLock        = loadWith("fair_lock", "clock", "fair_queue", "fence", "lockhash")
	FairUnlock      = loadWith("fair_unlock", "clock", "fence", "fair_queue")
	FairPass        = loadWith("fair_pass", "clock", "fence", "fair_queue")
	FairLeave       = loadFair("fair_leave")
	FairForceUnlock = loadWith("fair_forceunlock", "clock", "fair_queue", "fence", "lockhash")
	FairTell        = loadFair("fair_tell")
)

func loadFair(name string) *Script { return loadWith(name, "clock", "fair_queue") }

// FairKeys are the keys of a fair lock's scripts (fair_queue.lua): made
// once per lock handle, boxed once.
type FairKeys struct {
	Lock     string // the lock's hash
	Queue    string // the list of waiting owners
	Timeouts string // the waiting budgets (Redisson's timeout set)
	Alive    string // relock's liveness of its own waiters
	Counter  string // the fencing counter of the lock's slot
	Guard    string // the guard: the name of the lock's release channel
	// Named is the lock's own token key (fence.lua), "" when the Client
	// keeps none: the fencing mode argument follows from it.
	Named string

	queue   []any // the four every fair script takes: fair_tell.lua's
	guarded []any // with the guard: fair_leave.lua's and fair_forceunlock.lua's
	lock    []any // fair_lock.lua's
	unlock  []any // fair_unlock.lua's and fair_pass.lua's
}

// NewFairKeys returns the keys of a fair lock's scripts.
func NewFairKeys(lock, queue, timeouts, alive, counter, guard, named string) *FairKeys {
	k := &FairKeys{Lock: lock, Queue: queue, Timeouts: timeouts, Alive: alive, Counter: counter, Guard: guard, Named: named}
	k.queue = boxKeys(lock, queue, timeouts, alive)
	k.guarded = withKey(k.queue, guard)
	k.lock = append(k.queue[:4:4], boxKeys(counter, named)...)
	k.unlock = append(k.queue[:4:4], boxKeys(counter, guard, named)...)
	return k
}

func (k *FairKeys) fencing() any {
	if k.Named != "" {
		return argZero
	}
	return argOne
}

// FairLockRequest is a call of fair_lock.lua: acquire or re-enter a fair
// lock, or join its queue (or refresh the caller's entry). Fields of type
// any are boxed once, as LockRequest's.
type FairLockRequest struct {
	Keys *FairKeys
	// Marker is a reentrant owner's request marker; "" for a one-shot
	// owner.
	Marker    string
	MarkerTTL any // the marker's lifetime in ms, given with or without a marker
	Lease     any // the lease in ms
	Owner     any // the owner id "<uuid>:<n>"
	// QueueFor is the waiter timeout in ms for which a caller not
	// granted the lock keeps its place in the queue; "0" for a single
	// attempt that never queues.
	QueueFor any
	Waiters  any // the prefix of the waiters' own channels
	Publish  any // "publish" or "spublish"
	// GrantLease is the lease in ms for which another Client's release
	// may grant the lock to the caller once it is first; "0" for none.
	GrantLease  any
	Now         any // the caller's clock in unix ms, recorded as the hold's start
	GrantPrefix any // the prefix of the grant channels of the lock's slot
	// New says the owner cannot be in the queue yet: the first attempt
	// of a one-shot owner's call, whose id is new.
	New bool

	keys []any
	args [12]any
}

// Build returns the request's KEYS and ARGV. The slices are the request's
// own: a caller sends one call before it builds the next.
func (r *FairLockRequest) Build() (keys, args []any) {
	if r.keys == nil {
		r.keys = r.Keys.lock
		if r.Marker != "" {
			r.keys = withKey(r.Keys.lock, r.Marker)
		}
	}
	a := append(r.args[:0], r.Lease, r.Owner, argFlag(r.Marker != ""), r.MarkerTTL, r.QueueFor, r.Waiters, r.Publish,
		r.Keys.fencing(), r.GrantLease, r.Now, r.GrantPrefix)
	if r.New {
		a = append(a, argOne)
	}
	return r.keys, a
}

// FairLockReplyOf decodes fair_lock.lua's reply: a token (r > 0), or,
// with v = -r-1, how long to wait + 1 in ms as v / 2, and v % 2 as the
// foreign bit (a holder that is not a relock client, or others than
// relock's waiters ahead). TTL is then how long to wait before trying
// again, negative when unknown.
func FairLockReplyOf(r int64) LockReply {
	if r > 0 {
		return LockReply{Token: uint64(r)}
	}
	v := -r - 1
	return LockReply{Held: true, TTL: time.Duration(v/2-1) * time.Millisecond, Foreign: v%2 == 1}
}

// LeaveMode is what fair_leave.lua does beside taking the caller out of
// the queue.
type LeaveMode uint8

// What a leave does.
const (
	// LeaveOnly leaves the queue.
	LeaveOnly LeaveMode = iota
	// UndoOneShot also undoes a one-shot owner's hold, which can only
	// come from the lost call.
	UndoOneShot
	// UndoReentrant also undoes one hold of a reentrant owner if the lost
	// call's request marker shows it was applied.
	UndoReentrant
)

var fairLeaveArgs = [...]any{LeaveOnly: argZero, UndoOneShot: argOne, UndoReentrant: argTwo}

// FairLeaveRequest is a call of fair_leave.lua: take a waiter that gives
// up out of the queue, and undo what a lost call may have taken. Its
// reply is 1 when something was removed.
type FairLeaveRequest struct {
	Keys        *FairKeys
	Owner       any // the owner id
	Waiters     any // the prefix of the waiters' own channels
	Publish     string
	Leave       LeaveMode
	Marker      string // the lost call's request marker, with UndoReentrant
	GrantPrefix any    // the prefix of the grant channels of the lock's slot
}

// Build returns the request's KEYS and ARGV.
func (r FairLeaveRequest) Build() (keys, args []any) {
	keys = r.Keys.guarded
	if r.Leave == UndoReentrant {
		keys = withKey(keys, r.Marker)
	}
	return keys, []any{r.Owner, r.Waiters, r.Publish, fairLeaveArgs[r.Leave], r.GrantPrefix}
}

// FairTellRequest is a call of fair_tell.lua: tell the head of the queue
// to check again. Its reply is 1 when a waiter was told.
type FairTellRequest struct {
	Keys        *FairKeys
	Waiters     any // the prefix of the waiters' own channels
	Publish     string
	GrantPrefix any // the prefix of the grant channels of the lock's slot
}

// Build returns the request's KEYS and ARGV.
func (r FairTellRequest) Build() (keys, args []any) {
	return r.Keys.queue, []any{r.Waiters, r.Publish, r.GrantPrefix}
}

// FairForceUnlockRequest is a call of fair_forceunlock.lua: delete a fair
// lock whoever holds it, tell the head of its queue and its holders'
// Clients. Its reply is 1 when the lock was held (see Deleted).
type FairForceUnlockRequest struct {
	Keys        *FairKeys
	Waiters     any // the prefix of the waiters' own channels
	Publish     string
	GrantPrefix any // the prefix of the grant channels of the lock's slot
}

// Build returns the request's KEYS and ARGV.
func (r FairForceUnlockRequest) Build() (keys, args []any) {
	return r.Keys.guarded, []any{r.Waiters, r.Publish, r.GrantPrefix}
}

// Candidate is a waiter of the releasing Client that a fair release may
// pass the lock to.
type Candidate struct {
	Owner string
	Lease time.Duration
}

// FairUnlockRequest is a call of fair_unlock.lua: release one hold of a
// fair lock, passing it, when that frees it, to the head of the queue if
// the head is a candidate or a relock waiter that takes grants. Fields of
// type any are boxed once, as LockRequest's.
type FairUnlockRequest struct {
	Keys    *FairKeys
	Owner   any // the owner id releasing
	Waiters any // the prefix of the waiters' own channels
	Publish any // "publish" or "spublish"
	// Marker is the release marker of a reentrant owner's release; ""
	// for none.
	Marker    string
	MarkerTTL any
	// GrantTTL is the longest, in ms, a grant to another Client's waiter
	// holds the lock before that waiter renews it; "0" grants to
	// candidates only.
	GrantTTL any
	// Heads is k, how many fencing tokens to reserve for passing the lock
	// on in process.
	Heads       any
	GrantPrefix any // the prefix of the grant channels of the lock's slot
	Candidates  []Candidate
}

// Build returns the request's KEYS and ARGV.
func (r *FairUnlockRequest) Build() (keys, args []any) {
	keys = r.Keys.unlock
	if r.Marker != "" {
		keys = withKey(keys, r.Marker)
	}
	args = make([]any, 0, 9+2*len(r.Candidates))
	args = append(args, r.Owner, r.Waiters, r.Publish, argFlag(r.Marker != ""), r.MarkerTTL, r.Keys.fencing(),
		r.GrantTTL, r.Heads, r.GrantPrefix)
	for _, c := range r.Candidates {
		args = append(args, c.Owner, c.Lease.Milliseconds())
	}
	return keys, args
}

// FairUnlockReply is fair_unlock.lua's answer.
type FairUnlockReply struct {
	// Released is NotHeld, StillHeld, Freed, GrantedOther (to the head,
	// a relock waiter of another Client), or Granted to a candidate.
	Released Released
	// With Granted: the candidate the lock passed to (0-based), its
	// fencing token, and the queue's next heads that are waiters of the
	// releasing Client, with tokens reserved for them from First.
	Candidate int
	Token     uint64
	Heads     []string
	First     uint64
}

// FairUnlockReplyOf decodes fair_unlock.lua's reply: 0 to 3, or {t, i, h,
// r} for a pass to candidate i of candidates.
func FairUnlockReplyOf(v any, candidates int) (FairUnlockReply, error) {
	switch v := v.(type) {
	case int64:
		if v < 0 || v > int64(GrantedOther) {
			return FairUnlockReply{}, fmt.Errorf("unexpected reply %v", v)
		}
		return FairUnlockReply{Released: Released(v)}, nil
	case []any:
		if len(v) == 4 {
			token, i := toInt64(v[0]), toInt64(v[1])
			if i >= 1 && i <= int64(candidates) && token > 0 {
				heads, first := headsOf(v[2], v[3])
				return FairUnlockReply{Released: Granted, Candidate: int(i - 1), Token: uint64(token), Heads: heads, First: first}, nil
			}
		}
	}
	return FairUnlockReply{}, fmt.Errorf("unexpected reply %v", v)
}

// headsOf reads the heads and first reserved token of a fair script's
// answer.
func headsOf(list, first any) ([]string, uint64) {
	xs, _ := list.([]any)
	heads := make([]string, 0, len(xs))
	for _, x := range xs {
		if h, ok := x.(string); ok {
			heads = append(heads, h)
		}
	}
	return heads, uint64(toInt64(first))
}

// FairPassRequest is a call of fair_pass.lua: make a fair lock's hold,
// passed on in process by the Client that holds it, so in Redis (a
// switch).
type FairPassRequest struct {
	Keys  *FairKeys
	Owner string        // the grantee's owner id
	Lease time.Duration // its lease
	Token uint64        // its fencing token, reserved for it by an earlier answer
	// Heads is k, how many of the queue's next heads to name; "0" asks
	// for none.
	Heads any
	Now   any // the Client's clock in unix ms when it passed the lock
}

// Build returns the request's KEYS and ARGV.
func (r FairPassRequest) Build() (keys, args []any) {
	return r.Keys.unlock, []any{r.Owner, r.Lease.Milliseconds(), int64(r.Token), r.Heads, r.Now, r.Keys.fencing()}
}

// FairPassReply is fair_pass.lua's answer.
type FairPassReply struct {
	Switched Switched
	// Newer is the token of the newer hold, with Overtaken.
	Newer uint64
	// With SwitchedOver: the queue's next heads that are the Client's
	// waiters, with tokens reserved for them from First.
	Heads []string
	First uint64
}

// FairPassReplyOf decodes fair_pass.lua's reply: {1, h, r}, {2, c} or
// {0}. Anything else is taken for a broken run.
func FairPassReplyOf(v []any) FairPassReply {
	status := int64(-1)
	if len(v) > 0 {
		status = toInt64(v[0])
	}
	switch {
	case status == 1 && len(v) == 3:
		heads, first := headsOf(v[1], v[2])
		return FairPassReply{Switched: SwitchedOver, Heads: heads, First: first}
	case status == 2 && len(v) == 2:
		return FairPassReply{Switched: Overtaken, Newer: uint64(toInt64(v[1]))}
	}
	return FairPassReply{Switched: RunBroken}
}
