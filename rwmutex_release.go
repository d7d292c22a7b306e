package relock

import (
	"context"

	"github.com/relock-go/relock/internal/layout"
	"github.com/relock-go/relock/internal/scripts"
	"github.com/relock-go/relock/internal/wait"
)

// unlockRequest returns a call of the release script of one side (write
// or not) for the hold field, with marker, its release marker, for a
// reentrant hold (else ""). Each publishes Redisson's message: a lock
// freed by its readers can only be wanted by writers, so "0" wakes one
// waiter; the end of a write lock may let every waiting reader in, so "1"
// wakes them all. Without replica sync a release that frees the lock
// grants it to the first waiting writer (rw_queue.lua).
func (rw *RWMutex) unlockRequest(write bool, field any, marker string) scripts.RWUnlockRequest {
	c := rw.c
	return scripts.RWUnlockRequest{Keys: rw.unlockKeys, Write: write, Field: field, Marker: marker, MarkerTTL: c.argMarkerTTL,
		Channel: rw.argChannel, Publish: c.argPublish, Holds: rw.holds, Numsub: c.argNumsub, ClientID: c.argID,
		Grants: rw.argGrants, GrantTTL: argGrantTTL,
		Grant: !c.rsync.mayWait()} // a grant would return before replicas acknowledge it
}

// release implements releaser for the read side.
func (r *ReadLocker) release(ctx context.Context, l *Lease) (releaseResult, error) {
	return r.rw.release(ctx, l, false)
}

// release implements releaser for the write side.
func (w *WriteLocker) release(ctx context.Context, l *Lease) (releaseResult, error) {
	return w.rw.release(ctx, l, true)
}

func (rw *RWMutex) release(ctx context.Context, l *Lease, write bool) (releaseResult, error) {
	if write {
		switch passedOn, err := rw.c.passOrEnd(ctx, l, rw.queue, rw.passNow); {
		case err != nil:
			return notHeld, err
		case passedOn:
			return passed, nil
		}
	}
	marker := ""
	if l.reentrant {
		marker = layout.Marker(layout.UnlockLatch, rw.name, l.request)
	}
	req := rw.unlockRequest(write, l.field, marker)
	var one [1]*wait.Waiter
	var ws []*wait.Waiter
	if !rw.c.rsync.mayWait() {
		ws = rw.c.local.Claim(rw.queue, one[:], nil)
	}
	if len(ws) == 0 {
		keys, args := req.Build()
		r, err := rw.c.door.Do(ctx, req.Script(), keys, args, nil)
		return releasedBy(scripts.UnlockReplyOf(r)), err
	}
	// A writer of this Client sleeps in the queue: if it is first when
	// the lock is freed, the script grants it the lock, and its call
	// returns on this reply with no grant message (rw_queue.lua).
	w := ws[0]
	req.Writer = w.Member
	sent := rw.c.wd.Now()
	keys, args := req.Build()
	r, err := rw.c.door.Do(ctx, req.Script(), keys, args, nil)
	reply := scripts.UnlockReplyOf(r)
	switch {
	case err == nil && reply.Released == scripts.Granted:
		next := &Lease{c: rw.c, rel: &rw.w, name: rw.name, field: w.Owner + ":write", token: reply.Token, end: newEnding()}
		rw.c.passGranted(next, w, reply.Reserved, rw.group, rw.queue, sent)
	case err == nil && (reply.Released == scripts.StillHeld || reply.Released == scripts.GrantedOther):
		// Still held, or granted to another Client's writer: it sleeps on.
		rw.c.local.Settle(ws, -1, nil, false)
	default:
		// Freed (or unknown): it attempts.
		rw.c.local.Settle(ws, -1, nil, true)
	}
	return releasedBy(reply), err
}

// passNow passes an RWMutex's write lock on in process to w, a one-shot
// writer of this Client it has claimed, as Mutex.passNow does; the
// switch is rw_write_unlock.lua's.
func (rw *RWMutex) passNow(l *Lease, w *wait.Waiter) bool {
	member := w.Member
	if member == "" { // a writer not queued yet: the switch takes nothing out of the queue
		member = scripts.Member(w.Lease, scripts.OneShot, w.Owner)
	}
	return rw.c.passRun(l, w, w.Owner+":write", rw.group, rw.queue, func(ctx context.Context, token uint64, reserve bool) (int64, error) {
		req := rw.unlockRequest(true, l.field, "")
		req.Writer, req.PassToken, req.Reserve = member, token, reserve
		keys, args := req.Build()
		return rw.c.door.Do(ctx, req.Script(), keys, args, nil)
	})
}
