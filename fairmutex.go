package relock

import (
	"context"
	"fmt"
	"time"

	"github.com/relock-go/relock/internal/layout"
	"github.com/relock-go/relock/internal/scripts"
	"github.com/relock-go/relock/internal/slots"
)

// FairMutex is a Mutex that grants the lock in the order its waiters first
// asked for it, across processes: a queue in Redis holds the waiting
// owners, and a release tells only the first of them: a relock waiter on
// its Client's grant channel, a Redisson waiter on its own channel.
// It stores Redisson's fair-lock layout (RFairLock), so Java services
// using Redisson's fair lock queue up with Go services on the same name.
// Holds are Mutex holds: a FairMutex and a Mutex of one name exclude each
// other, but only FairMutex waiters keep the order.
//
// A waiter keeps its place by refreshing its queue entry every third of the
// waiter timeout (see WithWaiterTimeout). A waiter whose process died stops
// refreshing; once its liveness deadline passes, the next call on the lock
// removes it and the waiter after it moves up, however long nobody called
// on the lock before. Deadlines are the server's clock. A waiter that gives
// up leaves the queue before its Lock call returns. The queue keys are
// deleted when the last waiter leaves; they never get a TTL, since
// Redisson's waiters share them.
//
// With Redisson clients on the same name, one queue serves both in
// arrival order: relock keeps Redisson's scores in the shared timeout set
// (see docs/design.md), so that Redisson's arithmetic on them never drops
// a live relock waiter while Redisson's default wait time is in use.
//
// A FairMutex is a cheap handle, safe for concurrent use; its zero value
// is not usable: make it with Client.FairMutex.
type FairMutex struct {
	lockName
	// argWaiters is the prefix of the waiters' own channels
	// (layout.WaiterChannels), boxed: a Redisson waiter <owner> listens on
	// it + owner.
	argWaiters any

	grants         string // the Client's grant channel for the lock's slot
	argGrantPrefix any    // grants without the Client's id: every Client's grant channel is this and its id

	waiterTimeout time.Duration
	argWaiter     any // waiterTimeout in ms, boxed

	keys  *scripts.FairKeys // the keys of its scripts (fair_queue.lua)
	queue string            // the FIFO of waiters
}

// DefaultWaiterTimeout is the waiter timeout of a FairMutex made without
// WithWaiterTimeout.
const DefaultWaiterTimeout = 5 * time.Second

// A FairOption configures a FairMutex, given to Client.FairMutex. An
// invalid FairOption makes every call on the FairMutex fail with
// ErrInvalidOption.
type FairOption func(*fairConfig) error

type fairConfig struct {
	waiterTimeout time.Duration
}

// WithWaiterTimeout sets how long a queued waiter keeps its place without
// refreshing it. A waiter refreshes its entry every d/3, so a live waiter
// never loses its place unless Redis is out of its reach for about d; a
// dead one holds up the queue for at most d. The default is 5s; d must be
// at least 30ms, or every call fails with ErrInvalidOption.
func WithWaiterTimeout(d time.Duration) FairOption {
	return func(c *fairConfig) error {
		if d < 30*time.Millisecond {
			return fmt.Errorf("%w: waiter timeout %v is below 30ms", ErrInvalidOption, d)
		}
		c.waiterTimeout = d
		return nil
	}
}

// FairMutex returns the FairMutex of the given name. An invalid name is
// reported by every call on it with ErrInvalidName, an invalid option with
// ErrInvalidOption.
func (c *Client) FairMutex(name string, opts ...FairOption) *FairMutex {
	return c.newFairMutex(name, checkName(name), opts)
}

// newFairMutex returns the FairMutex of name, which nameErr, if not nil,
// reports invalid. A primitive built on a FairMutex of a name it makes
// from its caller's (Election) checks its caller's name, not the longer
// one it makes.
func (c *Client) newFairMutex(name string, nameErr error, opts []FairOption) *FairMutex {
	m := &FairMutex{lockName: lockName{c: c, name: name}}
	cfg := fairConfig{waiterTimeout: DefaultWaiterTimeout}
	if m.err = nameErr; m.err != nil {
		return m
	}
	if m.err = applyOptions(&cfg, opts); m.err != nil {
		return m
	}
	m.waiterTimeout = cfg.waiterTimeout
	m.argWaiter = cfg.waiterTimeout.Milliseconds()
	m.setChannel(layout.Companion(layout.LockChannel, name))
	m.grants = c.grantChannel(name)
	m.argGrantPrefix = layout.GrantPrefix(name, c.cluster)
	m.argWaiters = layout.WaiterChannels(m.channel)
	m.counter, m.named = c.tokenKeys(name)
	m.group = slots.Of(name)
	m.queue = layout.Companion(layout.FairQueue, name)
	m.keys = scripts.NewFairKeys(name, m.queue, layout.Companion(layout.FairTimeout, name), layout.Companion(layout.FairAlive, name),
		m.counter, m.channel, m.named)
	return m
}

// Lock blocks until the lock is held, ctx ends, or the Client is closed.
// A call that cannot have the lock at once joins the lock's queue and is
// granted the lock after every waiter that joined before it. Without
// WithLease the watchdog keeps the hold alive until Unlock. A reentrant
// owner (WithOwner) that holds the lock re-enters it at once, past the
// queue. With WithSpin the call polls instead of sleeping on its channel,
// and keeps its place in the queue all the same.
//
// When ctx ends the error wraps ctx.Err(), and nothing is left behind: the
// call has left the queue (the next waiter is told if it is now first),
// and it holds no subscription, timer or hold. Other errors:
// ErrInvalidName, ErrInvalidOption, ErrClosed, and Redis errors, wrapped.
func (m *FairMutex) Lock(ctx context.Context, opts ...LockOption) (*Lease, error) {
	return m.c.traced(ctx, "Lock", "fair", m.name, func(ctx context.Context) (*Lease, error) { return m.lock(ctx, opts, true) })
}

// TryLock makes one attempt, which never joins the queue: it succeeds if
// the lock is free and no live waiter is first in the queue (the caller's
// owner may be), or if the caller's owner holds the lock already.
// Otherwise it returns ErrNotAcquired; other errors are as for Lock.
func (m *FairMutex) TryLock(ctx context.Context, opts ...LockOption) (*Lease, error) {
	return m.c.traced(ctx, "TryLock", "fair", m.name, func(ctx context.Context) (*Lease, error) { return m.lock(ctx, opts, false) })
}

// ForceUnlock deletes the lock whoever holds it and tells the first
// waiter. It reports whether the lock was held. The queue is left as it
// is. The holder hears of it as a Mutex's does (see Mutex.ForceUnlock),
// and a key that holds anything but a lock's hash is left alone with
// ErrWrongType.
func (m *FairMutex) ForceUnlock(ctx context.Context) (bool, error) {
	if err := m.check(); err != nil {
		return false, err
	}
	keys, args := scripts.FairForceUnlockRequest{Keys: m.keys, Waiters: m.argWaiters, Publish: m.c.publish,
		GrantPrefix: m.argGrantPrefix}.Build()
	n, err := m.c.door.Run(ctx, scripts.FairForceUnlock, keys, args...).Int64()
	if err != nil {
		return false, opError(ctx, "force unlock", m.name, err)
	}
	m.c.forced(m.name, scripts.Deleted(n))
	return scripts.Deleted(n), nil
}

// fairAcquire is one lock call, shared by its attempts.
type fairAcquire struct {
	lockCall
	req    scripts.FairLockRequest // the call of fair_lock.lua, which each attempt sends
	m      *FairMutex
	waits  bool  // its attempts queue it
	joined int64 // when its first attempt, which may have queued it, was sent
	other  bool  // its last attempt found a holder, or waiters ahead, that are not relock's
}

// Undo undoes an attempt whose reply was lost (door.Undo): the hold it
// may have taken, and its queue entry.
func (a *fairAcquire) Undo(ctx context.Context) {
	mode := scripts.UndoOneShot
	if a.reentrant {
		mode = scripts.UndoReentrant
	}
	a.m.leave(a, mode)
}

func (m *FairMutex) lock(ctx context.Context, opts []LockOption, wait bool) (*Lease, error) {
	lc, err := startLock(ctx, m.c, m.check(), "lock", m.name, opts)
	if err != nil {
		return nil, err
	}
	a := &fairAcquire{lockCall: lc, m: m}
	// A one-shot owner's id is new: its first attempt need not look for it
	// in the queue.
	a.req = scripts.FairLockRequest{Keys: m.keys, MarkerTTL: m.c.argMarkerTTL, Lease: a.lease, Owner: a.owner,
		QueueFor: argZero, Waiters: m.argWaiters, Publish: m.c.argPublish, GrantLease: argZero, Now: m.c.nowArg(),
		GrantPrefix: m.argGrantPrefix, New: !a.reentrant}
	if wait {
		a.req.QueueFor = m.argWaiter // how long the call keeps its place in the queue unrefreshed
		a.waits = true
	}
	if a.reentrant {
		a.req.Marker = requestMarker(m.name, a.owner)
	}
	if wait && !a.reentrant && a.cfg.spin == nil && !m.c.rsync.mayWait() {
		a.req.GrantLease = a.lease // another Client's release may grant the lock to the call
	}

	r, err := a.Attempt(ctx, false)
	if r.Got != nil || err != nil {
		return r.Got, err
	}
	if !wait {
		return nil, ErrNotAcquired
	}
	return m.wait(ctx, a, r)
}

// attempt runs fair_lock.lua once. It returns a Lease, or how long to wait
// before trying again (negative: unknown), or an error. An attempt whose
// outcome is unknown is undone before returning.
func (m *FairMutex) attempt(ctx context.Context, a *fairAcquire) (*Lease, time.Duration, error) {
	keys, args := a.req.Build()
	r, sent, err := m.c.acquire(ctx, m.name, scripts.FairLock, keys, args, a, positive, nil)
	a.req.New = false
	if a.joined == 0 && a.waits {
		a.joined = sent
	}
	if err != nil {
		return nil, 0, opError(ctx, "lock", m.name, err)
	}
	reply := scripts.FairLockReplyOf(r)
	if reply.Held {
		a.other = reply.Foreign
		return nil, reply.TTL, nil
	}
	l := m.newLease(a.owner, a.reentrant, reply.Token)
	m.c.watch(l, m.group, a.cfg.lease, a.cfg.fixed, sent)
	m.c.stats.acquired.Add(1)
	return l, 0, nil
}

func (m *FairMutex) newLease(owner string, reentrant bool, token uint64) *Lease {
	return &Lease{
		c:         m.c,
		rel:       m,
		name:      m.name,
		field:     owner,
		reentrant: reentrant,
		token:     token,
		end:       newEnding(),
	}
}

// leave runs fair_leave.lua, within the cleanup timeout: takes the call's
// owner out of the queue and, by mode, undoes a hold whose reply was lost.
// A leave that fails is sent again by the Client's next call on the lock.
func (m *FairMutex) leave(a *fairAcquire, mode scripts.LeaveMode) {
	keys, args := scripts.FairLeaveRequest{Keys: m.keys, Owner: a.req.Owner, Waiters: m.argWaiters, Publish: m.c.publish,
		Leave: mode, Marker: a.req.Marker, GrantPrefix: m.argGrantPrefix}.Build()
	err := m.c.leave(context.Background(), m.name, func(ctx context.Context) error {
		return m.c.door.Run(ctx, scripts.FairLeave, keys, args...).Err()
	})
	if err != nil {
		m.c.cfg.logger.Warn("relock: cannot leave a fair lock's queue; the Client's next call on it tries again",
			"name", m.name, "err", err)
	}
}
