package relock

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/relock-go/relock/internal/layout"
	"github.com/relock-go/relock/internal/scripts"
	"github.com/relock-go/relock/internal/slots"
	"github.com/relock-go/relock/internal/wait"
)

// A Mutex's lock call, from the API to Redis and back: Lock starts the
// call (startLock: options, owner) and makes one attempt, which sends
// lock.lua (its request, scripts.LockRequest) through Client.acquire, the
// send path (send.go, over internal/door). Held by another, the call
// sleeps in wait.Loop (internal/wait/loop.go) as its own wait.Call until
// an attempt takes the lock, a grant from another Client's release comes
// (grant.go), or a release of its Client passes it a Lease (pass.go); it
// leaves the lock's queue in Redis if it gives up. Its release is in
// mutex_release.go. FairMutex and RWMutex calls start the same way
// (lockCall) and wait through the same loop.

// Mutex is a reentrant, exclusive, distributed lock on one name, stored in
// Redisson's layout so Java services using Redisson's RLock exclude Go
// services on the same name. It is a cheap handle: make it with
// Client.Mutex whenever convenient. A Mutex is safe for concurrent use;
// whether two calls exclude each other depends on their owners (see
// WithOwner), never on the *Mutex value.
type Mutex struct {
	lockName

	queue  string // the queue of waiters (see grant.go)
	grants string // the Client's grant channel for the lock's slot

	argGrants any // grants, boxed once

	keys *scripts.LockKeys // the keys of lock.lua and unlock.lua
}

// Mutex returns the Mutex of the given name. An invalid name is reported
// by every call on it with ErrInvalidName.
func (c *Client) Mutex(name string) *Mutex {
	m := &Mutex{lockName: lockName{c: c, name: name}}
	if m.err = checkName(name); m.err != nil {
		return m
	}
	m.setChannel(layout.Companion(layout.LockChannel, name))
	m.counter, m.named = c.tokenKeys(name)
	m.group = slots.Of(name)
	m.queue = layout.Companion(layout.LockQueue, name)
	m.grants = c.grantChannel(name)
	m.argGrants = m.grants
	m.keys = scripts.NewLockKeys(name, m.counter, m.queue, m.named)
	return m
}

// Lock blocks until the lock is held, ctx ends, or the Client is closed.
// Without WithLease the watchdog keeps the hold alive until Unlock. While
// it waits it sleeps on the lock's release channel, shared with every other
// waiter of the Client, and retries when woken or when the holder's TTL
// runs out.
//
// When ctx ends the error wraps ctx.Err(), and nothing is left behind: no
// subscription, no timer, and no hold, since an attempt whose reply the
// cancellation cut off is undone in Redis (within the cleanup timeout).
// Other errors: ErrInvalidName, ErrInvalidOption, ErrClosed,
// ErrReplicaSync (see WithReplicaSync), and Redis errors, wrapped.
func (m *Mutex) Lock(ctx context.Context, opts ...LockOption) (*Lease, error) {
	return m.c.traced(ctx, "Lock", "mutex", m.name, func(ctx context.Context) (*Lease, error) { return m.lock(ctx, opts, true) })
}

// TryLock makes one attempt. A lock held by another owner gives
// ErrNotAcquired; other errors are as for Lock.
func (m *Mutex) TryLock(ctx context.Context, opts ...LockOption) (*Lease, error) {
	return m.c.traced(ctx, "TryLock", "mutex", m.name, func(ctx context.Context) (*Lease, error) { return m.lock(ctx, opts, false) })
}

// ForceUnlock deletes the lock whoever holds it and wakes its waiters. It
// reports whether the lock was held. The holder's Lease reports
// ErrLockLost when its Client hears of it (see Lease.Done): at once when
// its Client listens for grants (on one server or under Sentinel, any
// Client that holds something does) or made this call, else at its
// watchdog's next renewal. A key that holds anything but a Mutex's hash (an
// application's hash, a read-write lock's) is left alone with
// ErrWrongType.
func (m *Mutex) ForceUnlock(ctx context.Context) (bool, error) {
	if err := m.check(); err != nil {
		return false, err
	}
	keys, args := scripts.ForceUnlockRequest{Lock: m.name, Queue: m.queue, Channel: m.argChannel,
		Publish: m.c.publish, Grants: m.grants, ClientID: m.c.id}.Build()
	n, err := m.c.door.Run(ctx, scripts.ForceUnlock, keys, args...).Int64()
	if err != nil {
		return false, opError(ctx, "force unlock", m.name, err)
	}
	m.c.forced(m.name, scripts.Deleted(n))
	return scripts.Deleted(n), nil
}

// lockCall is what every lock call of Mutex, FairMutex and RWMutex starts
// with (startLock): its options, its owner, and its lease as a script
// argument.
type lockCall struct {
	cfg       lockConfig
	owner     string
	reentrant bool
	lease     any // the lease in ms, as a script argument
}

// startLock is the prologue of every lock call of c: it refuses a call on
// an invalid handle or a closed Client (check, the handle's own check),
// bad options and an ended ctx, and finds the call's owner. op names the
// call in errors.
func startLock(ctx context.Context, c *Client, check error, op, name string, opts []LockOption) (lockCall, error) {
	if check != nil {
		return lockCall{}, check
	}
	cfg, err := c.lockConfig(opts)
	if err != nil {
		return lockCall{}, err
	}
	if err := ctx.Err(); err != nil {
		return lockCall{}, fmt.Errorf("relock: %s %q: %w", op, name, err)
	}
	c.retryLeaves(ctx, name)
	lc := lockCall{cfg: cfg, lease: c.argLease}
	lc.owner, lc.reentrant = c.owner(ctx)
	if cfg.fixed {
		lc.lease = cfg.lease.Milliseconds()
	}
	return lc, nil
}

// newWaiter returns the call's waiter in its Client's list, which a
// release of the Client may claim, and pass a Lease, if claimable.
func (lc *lockCall) newWaiter(claimable bool) *wait.Waiter {
	w := wait.NewWaiter(lc.owner, claimable)
	w.Lease, w.Fixed = lc.cfg.lease, lc.cfg.fixed
	return w
}

// requestMarker returns a new request marker key for a call of a reentrant
// owner on name, which makes a retried request apply once.
func requestMarker(name, owner string) string {
	return layout.Marker(layout.LockRequest, name, owner+":"+strconv.FormatUint(ownerSeq.Add(1), 10))
}

// acquire is one lock call, shared by its attempts.
type acquire struct {
	lockCall
	req    scripts.LockRequest // the call of lock.lua, which each attempt sends
	m      *Mutex
	waits  bool   // it queues as it finds the lock held
	member string // its place in the queue of waiters, once asked for
	joined int64  // when the first attempt that may have queued it was sent
	other  bool   // the holder its last attempt found is not a relock client
}

// queueMember returns the call's member of the queue of waiters
// (scripts.Member), "" when it does not wait.
func (a *acquire) queueMember() string {
	if a.waits && a.member == "" {
		a.member = scripts.Member(a.cfg.lease, a.req.Kind, a.owner)
	}
	return a.member
}

// Undo undoes an attempt whose reply was lost (door.Undo).
func (a *acquire) Undo(ctx context.Context) { a.m.abandon(ctx, a) }

func (m *Mutex) lock(ctx context.Context, opts []LockOption, block bool) (*Lease, error) {
	lc, err := startLock(ctx, m.c, m.check(), "lock", m.name, opts)
	if err != nil {
		return nil, err
	}
	a := &acquire{lockCall: lc, m: m}
	a.req = scripts.LockRequest{Keys: m.keys, Lease: a.lease, Owner: a.owner, Now: m.c.nowArg()}
	if block && a.cfg.spin == nil {
		a.waits = true
		a.req.Kind = m.c.waiterKind(a.reentrant)
	}
	if a.reentrant { // one-shot owners need no request marker
		a.req.Marker, a.req.MarkerTTL = requestMarker(m.name, a.owner), m.c.argMarkerTTL
	}

	if a.waits && !a.reentrant && m.c.local.MayJoinRun(m.name, joinable) {
		// While the Client passes the lock on in process, the call joins
		// the run without an attempt (wait.Wait.Joinable).
		return m.wait(ctx, a, wait.Result[*Lease]{Retry: grantTTL}, true)
	}
	r, err := a.Attempt(ctx, false)
	if err != nil && !isServerError(err) {
		m.leaveQueue(a) // it may have joined the queue
	}
	if r.Got != nil || err != nil {
		return r.Got, err
	}
	if !block {
		return nil, ErrNotAcquired
	}
	if a.cfg.spin != nil {
		return spin(ctx, m.c, "lock", m.name, a.cfg.spin, r, a)
	}
	return m.wait(ctx, a, r, false)
}

// wait sleeps between attempts, in the lock's queue of waiters (see
// grant.go): on the Client's grant channel, and on the lock's release
// channel once the holder may be a client that only publishes there;
// first is the result of the call's first attempt. A call that has made
// no attempt (joinRun) joins its Client's run if it may
// (wait.Wait.Joinable), or else attempts first.
func (m *Mutex) wait(ctx context.Context, a *acquire, first wait.Result[*Lease], joinRun bool) (*Lease, error) {
	w := a.newWaiter(!a.reentrant)
	w.Member = a.queueMember()
	wt := wait.Wait{Op: "lock", Name: m.name, Channel: m.channel, Policy: lockPolicy,
		Local: m.name, Waiter: w, Grants: m.grants, Joined: true, Sent: a.joined, Hold: a.cfg.lease}
	if joinRun {
		wt.Joinable = joinable
	}
	return wait.Loop(ctx, m.c.localEnv, wt, a, first)
}

// Attempt, Accept, Join and End make a Mutex call its own waiting call
// (wait.Call): its attempts queue it (lock.lua), and it leaves the queue
// as it returns without the lock. It listens on the lock's release
// channel once an attempt found a holder that is not a relock client.
func (a *acquire) Attempt(ctx context.Context, _ bool) (wait.Result[*Lease], error) {
	l, ttl, err := a.m.attempt(ctx, a)
	return wait.Result[*Lease]{Got: l, Retry: retryAfter(ttl), Listen: a.other}, err
}

func (a *acquire) Accept(g *wait.Grant) *Lease { return a.m.accept(a, g) }

func (a *acquire) Join() {}

func (a *acquire) End(queued bool) {
	if queued {
		a.m.leaveQueue(a)
	}
}

// retryAfter is how long a waiter sleeps, at most, when the holder has ttl
// left (negative: unknown).
func retryAfter(ttl time.Duration) time.Duration {
	if ttl < 0 {
		return time.Second
	}
	return ttl + time.Millisecond
}

func lockPolicy(payload string) int {
	if payload == msgReadUnlock {
		return -1
	}
	return 1
}

// attempt runs lock.lua once. It returns a Lease, or the holder's TTL, or
// an error. An attempt whose outcome is unknown is undone before returning,
// and so is one too few replicas acknowledged (see Client.acquire).
func (m *Mutex) attempt(ctx context.Context, a *acquire) (*Lease, time.Duration, error) {
	keys, args := a.req.Build()
	r, sent, err := m.c.acquire(ctx, m.name, scripts.Lock, keys, args, a, positive, nil)
	if a.joined == 0 && a.waits {
		a.joined = sent
		a.req.Joined = true // later attempts leave the queue when they acquire
	}
	if err != nil {
		return nil, 0, opError(ctx, "lock", m.name, err)
	}
	reply := scripts.LockReplyOf(r)
	if reply.Held {
		a.other = reply.Foreign
		return nil, reply.TTL, nil
	}
	l := &Lease{
		c:         m.c,
		rel:       m,
		name:      m.name,
		field:     a.owner,
		fieldArg:  a.req.Owner,
		reentrant: a.reentrant,
		token:     reply.Token,
		end:       newEnding(),
	}
	m.c.watch(l, m.group, a.cfg.lease, a.cfg.fixed, sent)
	m.c.stats.acquired.Add(1)
	return l, 0, nil
}

// abandon undoes an acquisition whose reply was lost, if Redis applied it.
func (m *Mutex) abandon(ctx context.Context, a *acquire) {
	keys, args := scripts.AbandonRequest{Lock: m.name, Marker: a.req.Marker, Owner: a.req.Owner,
		Channel: m.argChannel, Publish: m.c.publish}.Build()
	if err := m.c.door.Run(ctx, scripts.Abandon, keys, args...).Err(); err != nil {
		m.c.cfg.logger.Warn("relock: cannot undo an unanswered lock attempt; it expires with its lease",
			"name", m.name, "lease", a.cfg.lease, "err", err)
	}
}
