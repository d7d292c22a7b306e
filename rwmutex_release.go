package relock

import (
	"context"

	"github.com/relock-go/relock/internal/layout"
	"github.com/relock-go/relock/internal/scripts"
)

// rwUnlockScript returns the release script of one side. Each publishes
// Redisson's message: a lock freed by its readers can only be wanted by
// writers, so "0" wakes one waiter; the end of a write lock may let every
// waiting reader in, so "1" wakes them all.
func rwUnlockScript(write bool) *scripts.Script {
	if write {
		return scripts.RWWriteUnlock
	}
	return scripts.RWReadUnlock
}

// unlockArgs returns the ARGV of the release scripts for the hold field,
// with mode as the marker mode; leaving is the queue member of a call
// leaving the queue, or "". Without replica sync a release that frees the
// lock grants it to the first waiting writer (rw_queue.lua).
func (rw *RWMutex) unlockArgs(field, mode any, leaving string) []any {
	c := rw.c
	allow := argOne
	if c.rsync.mayWait() {
		allow = argZero // a grant would return before replicas acknowledge it
	}
	return []any{field, rw.argChannel, c.argPublish, mode, c.argMarkerTTL, rw.holds,
		c.argNumsub, c.argID, rw.argGrants, argGrantTTL, leaving, allow, c.argFencing}
}

// release implements releaser for the read side.
func (r *ReadLocker) release(ctx context.Context, l *Lease) (int64, error) {
	return r.rw.release(ctx, l, false)
}

// release implements releaser for the write side.
func (w *WriteLocker) release(ctx context.Context, l *Lease) (int64, error) {
	return w.rw.release(ctx, l, true)
}

func (rw *RWMutex) release(ctx context.Context, l *Lease, write bool) (int64, error) {
	if write {
		switch passed, err := rw.c.passOrEnd(ctx, l, rw.queue, rw.passNow); {
		case err != nil:
			return 0, err
		case passed:
			return 3, nil
		}
	}
	keys, mode := rw.unlockKeys, argZero
	if l.reentrant {
		keys, mode = with(rw.unlockKeys, layout.Marker(layout.UnlockLatch, rw.name, l.request)), argOne
	}
	script, args := rwUnlockScript(write), rw.unlockArgs(l.field, mode, "")
	if rw.c.rsync.mayWait() {
		return rw.c.batch.Do(ctx, script, keys, args, nil)
	}
	var one [1]*waiter
	ws := rw.c.local.Claim(rw.queue, one[:], nil)
	if len(ws) == 0 {
		return rw.c.batch.Do(ctx, script, keys, args, nil)
	}
	// A writer of this Client sleeps in the queue: if it is first when
	// the lock is freed, the script grants it the lock, and its call
	// returns on this reply with no grant message (rw_queue.lua).
	w := ws[0]
	sent := rw.c.wd.Now()
	r, err := rw.c.batch.Do(ctx, script, keys, append(args, w.Member), nil)
	switch {
	case err == nil && r < 0: // -(2t + p)
		next := &Lease{c: rw.c, rel: &rw.w, name: rw.name, field: w.Owner + ":write", token: uint64(-r) >> 1, end: newEnding()}
		rw.c.passGranted(next, w, r&1 == 1, rw.group, rw.queue, sent)
	case err == nil && (r == 1 || r == 3):
		// Still held, or granted to another Client's writer: it sleeps on.
		rw.c.local.Settle(ws, -1, nil, false)
	default:
		// Freed (or unknown): it attempts.
		rw.c.local.Settle(ws, -1, nil, true)
	}
	return r, err
}

// passNow passes an RWMutex's write lock on in process to w, a one-shot
// writer of this Client it has claimed, as Mutex.passNow does; the
// switch is rw_write_unlock.lua's.
func (rw *RWMutex) passNow(l *Lease, w *waiter) bool {
	member := w.Member
	if member == "" { // a writer not queued yet: the switch takes nothing out of the queue
		member = queueMember(w.Lease, argKindOneShot.(string), w.Owner)
	}
	return rw.c.passRun(l, w, w.Owner+":write", rw.group, rw.queue, func(ctx context.Context, token, reserve any) (int64, error) {
		args := append(rw.unlockArgs(l.field, argZero, ""), member, token, reserve)
		return rw.c.batch.Do(ctx, scripts.RWWriteUnlock, rw.unlockKeys, args, nil)
	})
}
