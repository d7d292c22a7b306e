package relock

import (
	"context"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/relock-go/relock/internal/layout"
	"github.com/relock-go/relock/internal/scripts"
	"github.com/relock-go/relock/internal/slots"
	"github.com/relock-go/relock/internal/wait"
)

// PermitSemaphore is a distributed semaphore whose permits have ids and
// leases, stored in Redisson's RPermitExpirableSemaphore layout: a string
// holding the number of free permits, a zset "{name}:timeout" of held
// permit ids (raw bytes, shown in hex) scored by their expiry in unix
// milliseconds, and the channel "redisson_sc:{name}". relock's permit ids
// are 24 bytes, its Client's uuid and a number, so that relock ls and show
// tell who holds each; Redisson's are 16 random bytes. Either library
// releases the other's permits by id.
//
// Each acquisition returns a Permit. Without WithLease the Client's
// watchdog renews the permit until it is released, like a Mutex hold; with
// WithLease(d) it expires after d. A permit whose holder died comes back
// once its lease has run out: every acquisition, Available and UpdateLease
// call reclaims expired permits, judged by the server's clock (never a
// client's), and wakes the waiters at once. Waiters also sleep no longer
// than until the earliest expiry they were given.
//
// A PermitSemaphore is a cheap handle; make it with
// Client.PermitSemaphore. It is safe for concurrent use. Its zero value is
// not usable.
type PermitSemaphore struct {
	permits
	timeoutKey string
	group      int
	keys       *scripts.PermitKeys
	queue      string // the queue of waiting calls (permit_lib.lua)
	grants     string // the Client's grant channel for the semaphore's slot
	argGrants  any    // grants, boxed once
}

// PermitSemaphore returns the PermitSemaphore of the given name. An
// invalid name is reported by every call on it with ErrInvalidName. The
// semaphore has no permits until TrySetPermits or AddPermits gives it some.
func (c *Client) PermitSemaphore(name string) *PermitSemaphore {
	ps := &PermitSemaphore{permits: newPermits(c, name)}
	if ps.err != nil {
		return ps
	}
	ps.timeoutKey = layout.PermitTimeouts(name)
	ps.held = ps.timeoutKey
	ps.group = slots.Of(name)
	ps.queue = layout.Companion(layout.PermitQueue, name)
	ps.keys = scripts.NewPermitKeys(name, ps.timeoutKey, ps.channel, ps.queue)
	ps.grants = c.grantChannel(name)
	ps.argGrants = ps.grants
	return ps
}

// Acquire blocks until it holds a permit, ctx ends, or the Client is
// closed. Without WithLease the watchdog keeps the permit until Release.
// While it waits it sleeps on the semaphore's channel, shared with every
// other waiter of the Client, and tries again when woken or when the
// earliest held permit expires.
//
// When ctx ends the error wraps ctx.Err(), and nothing is left behind: no
// subscription, no timer, and no permit, since an attempt whose reply the
// cancellation cut off is released in Redis (within the cleanup timeout).
// With replica sync, a permit taken that too few replicas acknowledged is
// released at once, and Acquire fails with ErrReplicaSync, or, with
// ReplicaSync.Retry, tries again until ctx ends (the error then wraps
// both). With WithSpin it polls by backoff instead of sleeping on the
// channel. Other errors: ErrInvalidName, ErrInvalidOption, ErrClosed, and
// Redis errors, wrapped.
func (ps *PermitSemaphore) Acquire(ctx context.Context, opts ...LockOption) (*Permit, error) {
	return ps.acquire(ctx, opts, true)
}

// TryAcquire makes one attempt. When no permit is free it returns
// ErrNotAcquired; other errors are as for Acquire. With ReplicaSync.Retry
// it makes the attempt again while too few replicas acknowledge a grant,
// until ctx ends.
func (ps *PermitSemaphore) TryAcquire(ctx context.Context, opts ...LockOption) (*Permit, error) {
	return ps.acquire(ctx, opts, false)
}

// Available returns the number of free permits, after reclaiming expired
// ones (0 when the semaphore is not set).
func (ps *PermitSemaphore) Available(ctx context.Context) (int, error) {
	if err := ps.check(ctx, "available", 1); err != nil {
		return 0, err
	}
	keys, args := scripts.PermitAvailableRequest{Keys: ps.keys, Publish: ps.c.argPublish, Channel: ps.channel}.Build()
	v, err := ps.c.door.Run(ctx, scripts.PermitAvailable, keys, args...).Int64()
	if err != nil {
		return 0, opError(ctx, "available", ps.name, err)
	}
	return int(v), nil
}

// Release releases the permit of the given id, held by any process (a
// Permit's own Release is the usual way). It returns ErrUnknownPermit when
// no permit of that id is held (it was released, or its lease had run
// out), and ErrInvalidOption when id is not 48 hex digits (a relock
// permit's) or 32 (a Redisson permit's). A Permit of
// this process released this way learns of it at its next renewal. With
// replica sync, a release too few replicas acknowledged returns an error
// wrapping ErrReplicaSync that says the permit was released on the master
// only; do not repeat it. The release goes out even when ctx has ended,
// bounded as Lease.Unlock's is.
func (ps *PermitSemaphore) Release(ctx context.Context, id string) error {
	ctx, cancel := ps.c.releaseContext(ctx)
	defer cancel()
	raw, err := ps.checkID(ctx, "release", id)
	if err != nil {
		return err
	}
	keys, args := ps.releaseRequest(raw, "").Build()
	r, err := ps.c.write(ctx, writeCall{name: ps.name, script: scripts.PermitRelease, keys: keys,
		args: args, direct: true, changed: nonZero})
	if err != nil && !isUnconfirmed(err) {
		return opError(ctx, "release", ps.name, err)
	}
	switch scripts.PermitReleasedBy(r) {
	case scripts.PermitUnknown:
		return fmt.Errorf("%w: %s of %q", ErrUnknownPermit, id, ps.name)
	case scripts.PermitExpired:
		return fmt.Errorf("%w: %s of %q had expired", ErrUnknownPermit, id, ps.name)
	}
	if err != nil {
		return opError(ctx, "release", ps.name, err) // released on the master only
	}
	return nil
}

// UpdateLease sets the lease of the permit of the given id, held by any
// process, to d from now, and reports ErrUnknownPermit if no permit of
// that id is held. d must be at least 1ms. It is meant for permits held
// elsewhere: a Permit of this process keeps its own idea of its deadline
// (use Permit.UpdateLease), and its watchdog, if it has one, goes on
// renewing it. With replica sync, an update too few replicas acknowledged
// returns an error wrapping ErrReplicaSync that says it was applied on the
// master only.
func (ps *PermitSemaphore) UpdateLease(ctx context.Context, id string, d time.Duration) error {
	raw, err := ps.checkID(ctx, "update lease", id)
	if err != nil {
		return err
	}
	if err := checkLease(d); err != nil {
		return err
	}
	ok, err := ps.updateLease(ctx, raw, d)
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("%w: %s of %q", ErrUnknownPermit, id, ps.name)
	}
	return nil
}

// updateLease runs permit_updatelease.lua and reports whether the permit was
// held. An update applied on the master that too few replicas
// acknowledged reports true, with an error for which isUnconfirmed holds.
func (ps *PermitSemaphore) updateLease(ctx context.Context, raw string, d time.Duration) (bool, error) {
	keys, args := scripts.PermitUpdateLeaseRequest{Keys: ps.keys, ID: raw, Lease: d, Publish: ps.c.argPublish, Channel: ps.channel}.Build()
	r, err := ps.c.write(ctx, writeCall{name: ps.name, script: scripts.PermitUpdateLease, keys: keys,
		args: args, direct: true, changed: isOne})
	if err != nil {
		return scripts.Updated(r) && isUnconfirmed(err), opError(ctx, "update lease", ps.name, err)
	}
	return scripts.Updated(r), nil
}

func (ps *PermitSemaphore) checkID(ctx context.Context, op, id string) (string, error) {
	if err := ps.check(ctx, op, 1); err != nil {
		return "", err
	}
	raw, err := hex.DecodeString(id)
	if err != nil || len(raw) != permitIDLen && len(raw) != redissonPermitIDLen {
		return "", fmt.Errorf("%w: permit id %q is not %d hex digits (relock's) or %d (Redisson's)", ErrInvalidOption, id, 2*permitIDLen, 2*redissonPermitIDLen)
	}
	return string(raw), nil
}

// The length of a permit id in bytes: relock's (see permitID), and
// Redisson's, 16 random bytes.
const permitIDLen, redissonPermitIDLen = 24, 16

// permitID returns the raw id of the permit of the call whose owner id is
// "<clientID>:<seq>": the 16 bytes of the Client's uuid, then seq in 8
// bytes, big-endian (permit_id in permit_lib.lua makes the same from the
// owner id). The scripts, relock's and Redisson's, treat ids as opaque
// bytes; that an id begins with its Client's uuid lets relock ls and show
// find who holds a permit, as they find a lock's holder from its owner id.
func permitID(clientID string, seq uint64) string {
	var digits [32]byte
	n := 0
	for i := 0; i < len(clientID) && n < len(digits); i++ {
		if clientID[i] != '-' {
			digits[n] = clientID[i]
			n++
		}
	}
	var b [permitIDLen]byte
	_, _ = hex.Decode(b[:16], digits[:])
	binary.BigEndian.PutUint64(b[16:], seq)
	return string(b[:])
}

// permitAttempt is one acquire call, shared by its attempts: they all use
// one permit id, so that a retried or repeated attempt never takes a
// second permit.
type permitAttempt struct {
	ps  *PermitSemaphore
	cfg lockConfig
	raw string
	// req is the call of permit_acquire.lua each attempt sends: its
	// Member is set once the call queues (Join).
	req scripts.PermitAcquireRequest

	member string // its place in the queue of waiters, once it queues
	joined int64  // when the first attempt that may have queued it was sent
}

// releaseRequest returns a call of permit_release.lua releasing the
// permit raw; leaving is the member of a call leaving the queue, or "".
// Without replica sync the permit is granted to the first queued call.
func (ps *PermitSemaphore) releaseRequest(raw, leaving string) scripts.PermitReleaseRequest {
	c := ps.c
	return scripts.PermitReleaseRequest{Keys: ps.keys, ID: raw, Publish: c.argPublish, Numsub: c.argNumsub,
		ClientID: c.argID, Grants: ps.argGrants, GrantTTL: argGrantTTL, Leaving: leaving,
		Grant: !c.rsync.mayWait()} // a grant would return before replicas acknowledge it
}

// Undo releases a permit whose acquisition reply was lost, or that too few
// replicas acknowledged (door.Undo).
func (a *permitAttempt) Undo(ctx context.Context) {
	c := a.ps.c
	keys, args := a.ps.releaseRequest(a.raw, "").Build()
	if err := c.door.Run(ctx, scripts.PermitRelease, keys, args...).Err(); err != nil {
		c.cfg.logger.Warn("relock: cannot undo a permit acquisition (unanswered, or too few replicas acknowledged it); it expires with its lease",
			"name", a.ps.name, "lease", a.cfg.lease, "err", err)
	}
}

func (ps *PermitSemaphore) acquire(ctx context.Context, opts []LockOption, waits bool) (*Permit, error) {
	if err := ps.check(ctx, "acquire", 1); err != nil {
		return nil, err
	}
	cfg, err := ps.c.lockConfig(opts)
	if err != nil {
		return nil, err
	}
	ps.c.retryLeaves(ctx, ps.name)
	a := &permitAttempt{ps: ps, cfg: cfg, raw: permitID(ps.c.id, ownerSeq.Add(1))}
	a.req = scripts.PermitAcquireRequest{Keys: ps.keys, ID: a.raw, Lease: cfg.lease.Milliseconds(), Publish: ps.c.argPublish, QueueTTL: argGrantTTL}
	r, err := a.Attempt(ctx, false)
	if r.Got != nil || err != nil {
		return r.Got, err
	}
	if !waits {
		return nil, ErrNotAcquired
	}
	if cfg.spin != nil {
		return spin(ctx, ps.c, "acquire", ps.name, cfg.spin, r, a)
	}
	seq := ownerSeq.Add(1)
	owner := ps.c.id + ":" + strconv.FormatUint(seq, 10)
	wt := wait.Wait{Op: "acquire", Name: ps.name, Channel: ps.channel, Policy: permitPolicy,
		Local: ps.queue, Waiter: wait.NewWaiter(owner, false), Hold: cfg.lease}
	if !ps.c.rsync.mayWait() {
		// The call queues as owner, asking for the permit id a release
		// grants it (permit_lib.lua).
		wt.Grants = ps.grants
		a.member = scripts.Member(cfg.lease, scripts.OneShot, owner)
		a.raw = permitID(ps.c.id, seq)
		a.req.ID = a.raw
	}
	p, err := wait.Loop(ctx, ps.c.localEnv, wt, a, r)
	return p, err
}

// permitPolicy is the hub's policy for a semaphore's channel when permit
// semaphore calls wait on it: a count of free permits wakes as many
// waiters; 0 (a lease cut short, permit_updatelease.lua) or less wakes
// every waiter to check again.
func permitPolicy(payload string) int {
	n, err := strconv.Atoi(payload)
	switch {
	case err != nil:
		return 1
	case n <= 0:
		return -1
	}
	return n
}

// Attempt, Accept, Join and End make a PermitSemaphore's acquire call its
// own waiting call (wait.Call), which always listens.
func (a *permitAttempt) Attempt(ctx context.Context, _ bool) (wait.Result[*Permit], error) {
	p, retry, err := a.attempt(ctx)
	return wait.Result[*Permit]{Got: p, Retry: retry, Listen: true}, err
}

// attempt runs permit_acquire.lua once (with ReplicaSync.Retry, until
// enough replicas acknowledge a grant): it returns the Permit the call
// took, or else how long to sleep at most. An attempt whose outcome is
// unknown, or that too few replicas acknowledged, is undone before it
// returns.
func (a *permitAttempt) attempt(ctx context.Context) (*Permit, time.Duration, error) {
	ps := a.ps
	keys, args := a.req.Build()
	r, sent, err := ps.c.acquire(ctx, ps.name, scripts.PermitAcquire, keys, args, a, isZero, nil)
	if a.joined == 0 && a.req.Member != "" {
		a.joined = sent
		a.req.Queued = true // later attempts leave the queue when they acquire
	}
	if errors.Is(err, ErrClosed) {
		return nil, 0, ErrClosed
	}
	if err != nil {
		return nil, 0, opError(ctx, "acquire", ps.name, err)
	}
	switch reply := scripts.PermitAcquireReplyOf(r); {
	case reply.ExpiresIn > 0:
		return nil, reply.ExpiresIn + time.Millisecond, nil
	case !reply.Acquired:
		return nil, fallbackRecheck, nil
	}
	p := a.permit()
	p.watch(a.cfg.lease, a.cfg.fixed, sent)
	ps.c.stats.acquired.Add(1)
	return p, 0, nil
}

// permit returns the call's Permit, not yet watched.
func (a *permitAttempt) permit() *Permit {
	return &Permit{ps: a.ps, raw: a.raw, id: hex.EncodeToString([]byte(a.raw)), end: newEnding()}
}

// Accept takes the permit a release granted the call with g, unless the
// grant may have run out already (see Client.granted).
func (a *permitAttempt) Accept(g *wait.Grant) *Permit {
	deadline, ok := a.ps.c.grantDeadline(g, a.joined)
	if !ok {
		return nil
	}
	p := a.permit()
	p.watchUntil(a.cfg.lease, a.cfg.fixed, deadline)
	a.ps.c.confirmGrant(p.entry.Load(), a.cfg, g)
	return p
}

// Join makes the call's next attempts queue it.
func (a *permitAttempt) Join() {
	a.req.Member = a.member
}

// End takes the call out of the queue if it may be there, and releases
// the permit if one was granted to it meanwhile (the next call then gets
// it), within the cleanup timeout.
func (a *permitAttempt) End(queued bool) {
	if !queued || a.joined == 0 {
		return
	}
	ps := a.ps
	keys, args := ps.releaseRequest(a.raw, a.member).Build()
	if err := ps.c.leave(context.Background(), ps.name, func(ctx context.Context) error {
		return ps.c.door.Run(ctx, scripts.PermitRelease, keys, args...).Err()
	}); err != nil {
		ps.c.cfg.logger.Warn("relock: cannot leave the queue of a permit semaphore; the Client's next call on it tries again",
			"name", ps.name, "err", err)
	}
}
