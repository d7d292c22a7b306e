package relock

import (
	"context"

	"github.com/relock-go/relock/internal/layout"
	"github.com/relock-go/relock/internal/scripts"
)

// accept makes the Lease of a grant to call a, or returns nil when the
// grant may have run out already (see Client.granted).
func (m *Mutex) accept(a *acquire, g *grant) *Lease {
	l := &Lease{c: m.c, rel: m, name: m.name, field: a.owner, token: g.Token, end: newEnding()}
	if !m.c.granted(l, m.group, a.cfg, g, a.joined) {
		return nil
	}
	return l
}

// leaveQueue takes call a out of the lock's queue as it returns without
// the lock, and releases the lock if it was granted to a meanwhile (the
// next waiter then gets it), within the cleanup timeout.
func (m *Mutex) leaveQueue(a *acquire) {
	if !a.waits {
		return
	}
	owner := any(a.owner)
	if a.reentrant {
		owner = argEmpty // never granted; its holds, if any, are not this call's
	}
	args := m.unlockArgs(owner, false, nil, a.queueMember())
	if err := m.c.leave(context.Background(), m.name, func(ctx context.Context) error {
		return scripts.Unlock.Run(ctx, m.c.batch.Direct(), m.keys, args...).Err()
	}); err != nil {
		m.c.cfg.logger.Warn("relock: cannot leave the queue of a lock; the Client's next call on it tries again",
			"name", m.name, "err", err)
	}
}

// unlockArgs returns the ARGV of unlock.lua releasing a hold of owner:
// marked when its keys hold a release marker (a reentrant hold), w the
// waiter of this Client to grant the lock to (nil for none), leaving the
// queue member of a call leaving the queue ("" for none), and passed, for
// a hold passed on in process, its token and whether to reserve more (the
// Client's clock goes with them, as the hold's start).
// The arguments past the fifth that are "" or "0" at the end are left out,
// as a plain release needs none of them and each costs the server.
func (m *Mutex) unlockArgs(owner any, marked bool, w *waiter, leaving string, passed ...any) []any {
	listen, remote, preferred, left := argZero, argOne, argEmpty, argEmpty
	// Only the Mutex calls of a Client listen on a Mutex's release channel.
	if m.c.local.Len() > 0 && m.c.hub.Listening(m.channel) {
		listen = argOne
	}
	if m.c.rsync.mayWait() {
		remote = argZero // a grant to another Client would return before replicas acknowledge it
	}
	if w != nil {
		preferred = w.Member
	}
	if leaving != "" {
		left = leaving
	}
	args := []any{owner, m.c.argPublish, m.c.argFencing, m.argGrants, remote, m.argChannel, listen, preferred, left, argEmpty, argZero, argEmpty, argEmpty}
	if len(passed) > 0 {
		copy(args[unlockArgPassed:], passed)
		args[unlockArgSince] = m.c.nowArg()
	}
	if marked {
		args[unlockArgMarkerTTL] = m.c.argMarkerTTL
	}
	n := len(args)
	for n > unlockArgsFixed && (args[n-1] == argEmpty || args[n-1] == argZero) {
		n--
	}
	return args[:n]
}

// settle ends the claim on w of the release that claimed it, sent at
// sent: w is passed the lock if it was granted to w, goes back to sleep if
// it was granted to another waiter, or attempts.
func (m *Mutex) settle(w *waiter, r int64, err error, sent int64) {
	ws := []*waiter{w}
	switch {
	case err == nil && r < 0:
		next := &Lease{c: m.c, rel: m, name: m.name, field: w.Owner, token: uint64(-r) >> 1, end: newEnding()}
		m.c.passGranted(next, w, r&1 == 1, m.group, m.name, sent)
	case err == nil && r == 3:
		m.c.local.Settle(ws, -1, nil, false)
	default:
		// Not passed on (or unknown): the waiter tries itself. A one-shot
		// owner that finds itself holding the lock takes it as its own.
		m.c.local.Settle(ws, -1, nil, true)
	}
}

// releasePassing is a release that may grant the lock to w, a waiter of
// this Client, on the send path (send.go): where the master has replicas
// to wait for, w is passed its Lease only if enough replicas acknowledged
// it; otherwise w's
// hold is released again and w tries for itself. With replica sync no
// grant goes to another Client.
func (m *Mutex) releasePassing(ctx context.Context, l *Lease, w *waiter, keys []any) (int64, error) {
	args := m.unlockArgs(l.arg(), l.reentrant, w, "")
	a, err := m.c.send(ctx, &call{name: m.name, script: scripts.Unlock, keys: keys, args: args})
	switch {
	case a.sent == 0 && err != nil:
		// Nothing ran (replica sync could not find its master, say): a
		// plain release, and the waiter tries itself.
		r, err := m.c.batch.Do(ctx, scripts.Unlock, keys, m.unlockArgs(l.arg(), l.reentrant, nil, ""), nil)
		m.c.local.Settle([]*waiter{w}, -1, nil, true)
		return r, err
	case err != nil || a.r >= 0 || a.t == nil:
		m.settle(w, a.r, err, a.sent)
		return a.r, err
	}
	if serr := m.c.rsync.judge(ctx, a.t, a.ack); serr != nil {
		// Released, but the waiter may not have it: free it again.
		m.c.stats.syncShort.Add(1)
		m.c.undo(ctx, &unackedPass{m: m, owner: w.Owner})
		m.c.local.Settle([]*waiter{w}, -1, nil, true) // it tries itself
		return 2, nil
	}
	m.settle(w, a.r, nil, a.sent)
	return a.r, nil
}

// unackedPass is a one-shot waiter's hold granted by a release that passed it, which too few replicas acknowledged: to be undone.
type unackedPass struct {
	m     *Mutex
	owner string
}

// Undo removes the hold, as abandon.lua does for a one-shot owner.
func (h *unackedPass) Undo(ctx context.Context) {
	m := h.m
	err := scripts.Abandon.Run(ctx, m.c.batch.Direct(), []any{m.name}, h.owner, m.argChannel, m.c.publish, argZero).Err()
	if err != nil {
		m.c.cfg.logger.Warn("relock: cannot release a passed lock too few replicas acknowledged; it expires with its lease",
			"name", m.name, "err", err)
	}
}

// release implements releaser. When the hold was the last, the lock is
// granted to the next waiter in its queue, if any (see grant.go); when that
// is a call of this Client, it is passed its Lease here.
func (m *Mutex) release(ctx context.Context, l *Lease) (int64, error) {
	keys := m.keys
	if l.reentrant {
		keys = with(m.keys, layout.Marker(layout.UnlockLatch, m.name, l.request))
	}
	switch passed, err := m.c.passOrEnd(ctx, l, m.name, m.passNow); {
	case err != nil:
		return 0, err
	case passed:
		return 3, nil
	}
	var one [1]*waiter
	if ws := m.c.local.Claim(m.name, one[:], nil); len(ws) == 1 {
		return m.releasePassing(ctx, l, ws[0], keys)
	}
	return m.c.batch.Do(ctx, scripts.Unlock, keys, m.unlockArgs(l.arg(), l.reentrant, nil, ""), nil)
}

// passNow passes l's lock to w, a waiter of this Client it has claimed,
// at once, and sends the switch that makes it so in Redis (see above),
// without waiting for Redis: a goroutine of the Client judges w's hold by
// the answer, which comes within the cleanup timeout (twice, if the first
// try is not answered). It reports false, having done nothing, if w has
// gone: the release then goes on as if it had not claimed w.
func (m *Mutex) passNow(l *Lease, w *waiter) bool {
	return m.c.passRun(l, w, w.Owner, m.group, m.name, func(ctx context.Context, token, reserve any) (int64, error) {
		args := m.unlockArgs(l.arg(), false, w, "", token, reserve)
		return m.c.batch.Do(ctx, scripts.Unlock, m.keys, args, nil)
	})
}
