package relock

import (
	"context"

	"github.com/relock-go/relock/internal/layout"
	"github.com/relock-go/relock/internal/scripts"
	"github.com/relock-go/relock/internal/wait"
)

// accept makes the Lease of a grant to call a, or returns nil when the
// grant may have run out already (see Client.granted).
func (m *Mutex) accept(a *acquire, g *wait.Grant) *Lease {
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
	owner := a.req.Owner
	if a.reentrant {
		owner = argEmpty // never granted; its holds, if any, are not this call's
	}
	req := m.unlockRequest(owner, "", nil)
	req.Leaving = a.queueMember()
	keys, args := req.Build()
	if err := m.c.leave(context.Background(), m.name, func(ctx context.Context) error {
		return m.c.door.Run(ctx, scripts.Unlock, keys, args...).Err()
	}); err != nil {
		m.c.cfg.logger.Warn("relock: cannot leave the queue of a lock; the Client's next call on it tries again",
			"name", m.name, "err", err)
	}
}

// unlockRequest returns a call of unlock.lua releasing a hold of owner,
// with marker, its release marker, for a reentrant hold (else ""), and w,
// a waiter of this Client to grant the lock to, if any.
func (m *Mutex) unlockRequest(owner any, marker string, w *wait.Waiter) scripts.UnlockRequest {
	req := scripts.UnlockRequest{Keys: m.keys, Owner: owner, Publish: m.c.argPublish, Grants: m.argGrants, Channel: m.argChannel,
		// A grant to another Client would return before replicas
		// acknowledge it.
		GrantOthers: !m.c.rsync.mayWait(),
		// Only the Mutex calls of a Client listen on a Mutex's release
		// channel.
		Listening: m.c.local.Len() > 0 && m.c.hub.Listening(m.channel)}
	if marker != "" {
		req.Marker, req.MarkerTTL = marker, m.c.argMarkerTTL
	}
	if w != nil {
		req.Preferred = w.Member
	}
	return req
}

// settle ends the claim on w of the release that claimed it, sent at
// sent: w is passed the lock if it was granted to w, goes back to sleep if
// it was granted to another waiter, or attempts.
func (m *Mutex) settle(w *wait.Waiter, r scripts.UnlockReply, err error, sent int64) {
	ws := []*wait.Waiter{w}
	switch {
	case err == nil && r.Released == scripts.Granted:
		next := &Lease{c: m.c, rel: m, name: m.name, field: w.Owner, token: r.Token, end: newEnding()}
		m.c.passGranted(next, w, r.Reserved, m.group, m.name, sent)
	case err == nil && r.Released == scripts.GrantedOther:
		m.c.local.Settle(ws, -1, nil, false)
	default:
		// Not passed on (or unknown): the waiter tries itself. A one-shot
		// owner that finds itself holding the lock takes it as its own.
		m.c.local.Settle(ws, -1, nil, true)
	}
}

// releasePassing is a release, req, that may grant the lock to w, a
// waiter of this Client, on the send path (send.go): where the master has
// replicas to wait for, w is passed its Lease only if enough replicas
// acknowledged it; otherwise w's hold is released again and w tries for
// itself. With replica sync no grant goes to another Client.
func (m *Mutex) releasePassing(ctx context.Context, req *scripts.UnlockRequest, w *wait.Waiter) (releaseResult, error) {
	keys, args := req.Build()
	a, err := m.c.send(ctx, &call{name: m.name, script: scripts.Unlock, keys: keys, args: args})
	reply := scripts.UnlockReplyOf(a.r)
	switch {
	case a.sent == 0 && err != nil:
		// Nothing ran (replica sync could not find its master, say): a
		// plain release, and the waiter tries itself.
		req.Preferred = ""
		keys, args := req.Build()
		r, err := m.c.door.Do(ctx, scripts.Unlock, keys, args, nil)
		m.c.local.Settle([]*wait.Waiter{w}, -1, nil, true)
		return releasedBy(scripts.UnlockReplyOf(r)), err
	case err != nil || reply.Released != scripts.Granted || a.t == nil:
		m.settle(w, reply, err, a.sent)
		return releasedBy(reply), err
	}
	if serr := m.c.rsync.judge(ctx, a.t, a.ack); serr != nil {
		// Released, but the waiter may not have it: free it again.
		m.c.stats.syncShort.Add(1)
		m.c.undo(ctx, &unackedPass{m: m, owner: w.Owner})
		m.c.local.Settle([]*wait.Waiter{w}, -1, nil, true) // it tries itself
		return freed, nil
	}
	m.settle(w, reply, nil, a.sent)
	return passed, nil
}

// unackedPass is a one-shot waiter's hold granted by a release that passed
// it, which too few replicas acknowledged: to be undone.
type unackedPass struct {
	m     *Mutex
	owner string
}

// Undo removes the hold, as abandon.lua does for a one-shot owner.
func (h *unackedPass) Undo(ctx context.Context) {
	m := h.m
	keys, args := scripts.AbandonRequest{Lock: m.name, Owner: h.owner, Channel: m.argChannel, Publish: m.c.publish}.Build()
	err := m.c.door.Run(ctx, scripts.Abandon, keys, args...).Err()
	if err != nil {
		m.c.cfg.logger.Warn("relock: cannot release a passed lock too few replicas acknowledged; it expires with its lease",
			"name", m.name, "err", err)
	}
}

// release implements releaser. When the hold was the last, the lock is
// granted to the next waiter in its queue, if any (see grant.go); when that
// is a call of this Client, it is passed its Lease here.
func (m *Mutex) release(ctx context.Context, l *Lease) (releaseResult, error) {
	marker := ""
	if l.reentrant {
		marker = layout.Marker(layout.UnlockLatch, m.name, l.request)
	}
	switch passedOn, err := m.c.passOrEnd(ctx, l, m.name, m.passNow); {
	case err != nil:
		return notHeld, err
	case passedOn:
		return passed, nil
	}
	var one [1]*wait.Waiter
	if ws := m.c.local.Claim(m.name, one[:], nil); len(ws) == 1 {
		req := m.unlockRequest(l.arg(), marker, ws[0])
		return m.releasePassing(ctx, &req, ws[0])
	}
	req := m.unlockRequest(l.arg(), marker, nil)
	keys, args := req.Build()
	r, err := m.c.door.Do(ctx, scripts.Unlock, keys, args, nil)
	return releasedBy(scripts.UnlockReplyOf(r)), err
}

// passNow passes l's lock to w, a waiter of this Client it has claimed,
// at once, and sends the switch that makes it so in Redis (see above),
// without waiting for Redis: a goroutine of the Client judges w's hold by
// the answer, which comes within the cleanup timeout (twice, if the first
// try is not answered). It reports false, having done nothing, if w has
// gone: the release then goes on as if it had not claimed w.
func (m *Mutex) passNow(l *Lease, w *wait.Waiter) bool {
	return m.c.passRun(l, w, w.Owner, m.group, m.name, func(ctx context.Context, token uint64, reserve bool) (int64, error) {
		req := m.unlockRequest(l.arg(), "", w)
		req.PassToken, req.Reserve, req.Since = token, reserve, m.c.nowArg()
		keys, args := req.Build()
		return m.c.door.Do(ctx, scripts.Unlock, keys, args, nil)
	})
}
