package relock

import (
	"context"
	"slices"
	"sync"

	"github.com/relock-go/relock/internal/layout"
	"github.com/relock-go/relock/internal/scripts"
	"github.com/relock-go/relock/internal/slots"
)

// RWMutex is a distributed reader/writer lock on one name: many readers or
// one writer. It is stored in Redisson's RReadWriteLock layout, so Java
// services using Redisson share and exclude on the same names.
//
// Every reader hold has its own key and TTL in Redis, so a reader that dies
// expires alone while the others keep their holds. (A Redisson reader's
// watchdog renews every reader's keys, so while one holds the same name,
// a dead reader's hold lasts until it leaves.) A writer may take the
// read lock as well (downgrade): when it then unlocks its write holds it
// keeps reading, and waiting readers are let in. The opposite, an owner
// holding the read lock asking for the write lock, would wait for itself
// for ever; it fails at once with ErrUpgrade. Readers are not held back by
// a waiting writer (as in Redisson): a steady stream of overlapping
// readers can keep writers waiting. A release that frees the lock grants
// it to the first waiting writer, whose Lock returns without a round trip
// of its own, unless a reader waits before it or a client that does not
// queue (Redisson) listens; docs/design.md, "Grants of the read-write
// lock".
//
// Holds are reentrant per owner (see WithOwner) for each mode. Only write
// acquisitions advance the fencing counter; see RLock for a reader's
// token.
//
// An RWMutex is a cheap handle: make it with Client.RWMutex whenever
// convenient. It is safe for concurrent use; whether two calls exclude
// each other depends on their owners and modes, never on the *RWMutex
// value. Its zero value is not usable.
type RWMutex struct {
	lockName
	holds any // layout.ReaderHolds(name), boxed: the rule of its reader hold keys

	queue     string // the queue of waiters (rw_queue.lua)
	grants    string // the Client's grant channel for the lock's slot
	argGrants any    // grants, boxed once

	// The keys of the lock scripts, and of the release scripts, which
	// have the guard (rw_queue.lua).
	lockKeys, unlockKeys *scripts.LockKeys

	r ReadLocker
	w WriteLocker
}

// RWMutex returns the read-write lock of the given name. An invalid name
// is reported by every call on it with ErrInvalidName.
func (c *Client) RWMutex(name string) *RWMutex {
	rw := &RWMutex{lockName: lockName{c: c, name: name}}
	rw.r.rw, rw.w.rw = rw, rw
	if rw.err = checkName(name); rw.err != nil {
		return rw
	}
	rw.setChannel(layout.Companion(layout.RWChannel, name))
	rw.counter, rw.named = c.tokenKeys(name)
	rw.holds = layout.ReaderHolds(name)
	rw.group = slots.Of(name)
	rw.queue = layout.Companion(layout.RWQueue, name)
	rw.grants = c.grantChannel(name)
	rw.argGrants = rw.grants
	rw.lockKeys = scripts.NewLockKeys(name, rw.counter, rw.queue, rw.named)
	rw.unlockKeys = scripts.NewRWUnlockKeys(name, rw.counter, rw.queue, rw.channel, rw.named)
	return rw
}

// RLock blocks until the read lock is held, ctx ends, or the Client is
// closed. Readers share the lock; a writer excludes them, except the
// writer's own owner, which may read too (downgrade). Without WithLease
// the watchdog keeps the hold alive until Unlock. While it waits it
// sleeps on the lock's release channel, shared with every other waiter of
// the Client.
//
// The Lease's Token is the lock's fencing counter as it stood when the
// read hold was taken: the token of the last write acquisition, 0 if
// there was none. Readers do not advance it.
//
// When ctx ends the error wraps ctx.Err(), and nothing is left behind: no
// subscription, no timer, and no hold, since an attempt whose reply the
// cancellation cut off is undone in Redis (within the cleanup timeout).
// Other errors: ErrInvalidName, ErrInvalidOption, ErrClosed, ErrWrongType
// (also when the fencing counter holds no number; nothing is written
// then), and Redis errors, wrapped.
func (rw *RWMutex) RLock(ctx context.Context, opts ...LockOption) (*Lease, error) {
	return rw.c.traced(ctx, "RLock", "rw", rw.name, func(ctx context.Context) (*Lease, error) { return rw.lock(ctx, opts, false, true) })
}

// TryRLock makes one attempt at the read lock. A lock held by a writer of
// another owner gives ErrNotAcquired; other errors are as for RLock.
func (rw *RWMutex) TryRLock(ctx context.Context, opts ...LockOption) (*Lease, error) {
	return rw.c.traced(ctx, "TryRLock", "rw", rw.name, func(ctx context.Context) (*Lease, error) { return rw.lock(ctx, opts, false, false) })
}

// Lock blocks until the write lock is held, ctx ends, or the Client is
// closed. The writer excludes every reader and other writer. Each fresh
// write acquisition advances the lock's fencing counter and carries the
// new token; a re-entry carries the holder's.
//
// If the owner in ctx holds the read lock and not the write lock, Lock
// fails at once with ErrUpgrade and changes nothing: waiting would wait
// for its own read holds. The other errors, and what cancelling leaves
// behind, are as for RLock.
func (rw *RWMutex) Lock(ctx context.Context, opts ...LockOption) (*Lease, error) {
	return rw.c.traced(ctx, "Lock", "rw", rw.name, func(ctx context.Context) (*Lease, error) { return rw.lock(ctx, opts, true, true) })
}

// TryLock makes one attempt at the write lock. A lock held by others gives
// ErrNotAcquired; a lock this owner only reads gives ErrUpgrade; other
// errors are as for Lock.
func (rw *RWMutex) TryLock(ctx context.Context, opts ...LockOption) (*Lease, error) {
	return rw.c.traced(ctx, "TryLock", "rw", rw.name, func(ctx context.Context) (*Lease, error) { return rw.lock(ctx, opts, true, false) })
}

// ForceUnlock deletes the lock, in whatever mode and whoever holds it,
// with its reader hold keys, and wakes every waiter. It reports whether
// the lock was held. The holders hear of it as a Mutex's holder does (see
// Mutex.ForceUnlock). A key that holds anything but a read-write lock's
// hash (an application's hash, a Mutex's), or a reader hold key that
// holds no string, is left alone with ErrWrongType.
func (rw *RWMutex) ForceUnlock(ctx context.Context) (bool, error) {
	if err := rw.check(); err != nil {
		return false, err
	}
	keys, args := scripts.RWForceUnlockRequest{Lock: rw.name, Queue: rw.queue, Guard: rw.channel, Channel: rw.argChannel,
		Publish: rw.c.publish, Holds: rw.holds, Grants: rw.grants, ClientID: rw.c.id}.Build()
	n, err := rw.c.door.Run(ctx, scripts.RWForceUnlock, keys, args...).Int64()
	if err != nil {
		return false, opError(ctx, "force unlock", rw.name, err)
	}
	rw.c.forced(rw.name, scripts.Deleted(n))
	return scripts.Deleted(n), nil
}

// RLocker returns the read lock as a Locker, for Multi and helpers that
// take any lock: its Lock and TryLock are RLock and TryRLock.
func (rw *RWMutex) RLocker() *ReadLocker { return &rw.r }

// WLocker returns the write lock as a Locker: its Lock and TryLock are
// the RWMutex's.
func (rw *RWMutex) WLocker() *WriteLocker { return &rw.w }

// ReadLocker is the read side of an RWMutex as a Locker. It is safe for
// concurrent use. Get one from RWMutex.RLocker; its zero value is not
// usable.
type ReadLocker struct{ rw *RWMutex }

// Name returns the lock's name.
func (r *ReadLocker) Name() string { return r.rw.name }

// Lock is RWMutex.RLock.
func (r *ReadLocker) Lock(ctx context.Context, opts ...LockOption) (*Lease, error) {
	return r.rw.RLock(ctx, opts...)
}

// TryLock is RWMutex.TryRLock.
func (r *ReadLocker) TryLock(ctx context.Context, opts ...LockOption) (*Lease, error) {
	return r.rw.TryRLock(ctx, opts...)
}

// WriteLocker is the write side of an RWMutex as a Locker. It is safe for
// concurrent use. Get one from RWMutex.WLocker; its zero value is not
// usable.
type WriteLocker struct{ rw *RWMutex }

// Name returns the lock's name.
func (w *WriteLocker) Name() string { return w.rw.name }

// Lock is RWMutex.Lock.
func (w *WriteLocker) Lock(ctx context.Context, opts ...LockOption) (*Lease, error) {
	return w.rw.Lock(ctx, opts...)
}

// TryLock is RWMutex.TryLock.
func (w *WriteLocker) TryLock(ctx context.Context, opts ...LockOption) (*Lease, error) {
	return w.rw.TryLock(ctx, opts...)
}

// rwOp names an operation of one side for errors: "lock" or "rlock".
func rwOp(write bool, op string) string {
	if write {
		return op
	}
	return "r" + op
}

// writerTurns lets one writer of the Client at a time, per lock, wait in
// the lock's queue in Redis; the others wait for their turn, quiet
// (wait.Wait.Gate). The end of a write lock wakes every waiter of its
// channel, since every waiting reader may enter; without turns it would
// also wake every writer of the Client, all but one of them to fail
// again, and a grant or a word to a second writer would find no call to
// take it. Its zero value is ready.
type writerTurns struct {
	mu    sync.Mutex
	m     map[string]*turnLine // by the lock's queue
	spare *turnLine            // one line no lock uses, for the next
}

// turnLine is one lock's writers that take turns: the one that has the
// turn, and after it those waiting for it, oldest first, each by the gate
// that lets it through once it has the turn.
type turnLine struct {
	waiting []chan struct{}
}

// take has a writer take part in the turns on name: it has the turn at
// once if no other writer has it or waits for it (a nil gate), or else
// waits for it: the gate returned lets it through once it has it.
func (t *writerTurns) take(name string) (gate chan struct{}) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if line := t.m[name]; line != nil {
		gate = make(chan struct{}, 1)
		line.waiting = append(line.waiting, gate)
		return gate
	}
	if t.m == nil {
		t.m = make(map[string]*turnLine)
	}
	line := t.spare
	if line == nil {
		line = &turnLine{}
	}
	t.spare = nil
	t.m[name] = line
	return nil
}

// leave ends the part in the turns on name of the writer that take gave
// gate: one still waiting goes; one that has the turn, whether its gate
// let it through yet or not, hands the turn to the next waiting, if any.
func (t *writerTurns) leave(name string, gate chan struct{}) {
	t.mu.Lock()
	defer t.mu.Unlock()
	line := t.m[name]
	if i := slices.Index(line.waiting, gate); gate != nil && i >= 0 {
		line.waiting = slices.Delete(line.waiting, i, i+1)
		return
	}
	if len(line.waiting) == 0 {
		delete(t.m, name)
		t.spare = line
		return
	}
	next := line.waiting[0]
	line.waiting = slices.Delete(line.waiting, 0, 1)
	next <- struct{}{} // never blocks: each gate is sent to once
}
