package relock

import (
	"context"

	"github.com/relock-go/relock/internal/layout"
	"github.com/relock-go/relock/internal/scripts"
	"github.com/relock-go/relock/internal/wait"
	"github.com/relock-go/relock/internal/watchdog"
)

// release implements releaser. When waiters of the same Client sleep in
// the lock's queue, the release passes the lock straight to the first of
// the queue if it is one of them.
func (m *FairMutex) release(ctx context.Context, l *Lease) (releaseResult, error) {
	req := scripts.FairUnlockRequest{Keys: m.keys, Owner: l.field, Waiters: m.argWaiters, Publish: m.c.argPublish,
		MarkerTTL: m.c.argMarkerTTL, GrantTTL: argGrantTTL, Heads: argFairHeads, GrantPrefix: m.argGrantPrefix}
	if l.reentrant {
		req.Marker = layout.Marker(layout.UnlockLatch, m.name, l.request)
	}
	// A lock passed in the release script would skip the waiter's
	// WAIT: with replica sync, the queue's head acquires for itself.
	if m.c.rsync.mayWait() {
		req.GrantTTL = argZero
	}
	if m.c.passable(l) {
		if head := l.run.Next(); head != "" {
			if w := m.c.fair.ClaimOwner(m.name, head); w != nil {
				if token, ask, ok := l.run.TakeHead(head); !ok {
					m.c.fair.Settle([]*wait.Waiter{w}, -1, nil, false) // an answer came meanwhile
				} else if m.passNow(l, w, token, ask) {
					return passed, nil
				}
			}
		}
	}
	if err := l.awaitConfirmed(ctx); err != nil {
		return notHeld, err
	}
	if !m.c.rsync.mayWait() {
		var buf [fairMaxCandidates]*wait.Waiter
		if ws := m.c.fair.Claim(m.name, buf[:], nil); len(ws) > 0 {
			return m.releasePassing(ctx, &req, ws)
		}
	}
	keys, args := req.Build()
	r, err := m.c.door.Do(ctx, scripts.FairUnlock, keys, args, nil)
	return releasedBy(scripts.UnlockReplyOf(r)), err
}

// fairMaxCandidates caps the candidates of one release.
const fairMaxCandidates = 16

// releasePassing runs fair_unlock.lua with ws as candidates and passes the lock to
// the one it passed to, if any.
func (m *FairMutex) releasePassing(ctx context.Context, req *scripts.FairUnlockRequest, ws []*wait.Waiter) (releaseResult, error) {
	req.Candidates = make([]scripts.Candidate, 0, len(ws))
	for _, w := range ws {
		req.Candidates = append(req.Candidates, scripts.Candidate{Owner: w.Owner, Lease: w.Lease})
	}
	keys, args := req.Build()
	sent := m.c.wd.Now()
	v, err := m.c.door.Run(ctx, scripts.FairUnlock, keys, args...).Result()
	if err != nil {
		// Unknown outcome: a candidate given the lock finds it holds it
		// when it attempts, and takes it as its own.
		m.c.fair.Settle(ws, -1, nil, true)
		return notHeld, err
	}
	reply, err := scripts.FairUnlockReplyOf(v, len(ws))
	switch {
	case err != nil:
		m.c.fair.Settle(ws, -1, nil, true)
		return notHeld, err
	case reply.Released != scripts.Granted:
		m.c.fair.Settle(ws, -1, nil, false)
		return releasedBy(scripts.UnlockReply{Released: reply.Released}), nil
	}
	w := ws[reply.Candidate]
	next := m.newLease(w.Owner, false, reply.Token)
	if len(reply.Heads) > 0 {
		// Tokens reserved for passing it on in process to the next heads.
		next.run = wait.NewHeadsRun(reply.First, reply.Heads, fairRefill)
	}
	m.c.watch(next, m.group, w.Lease, w.Fixed, sent)
	m.c.stats.acquired.Add(1)
	m.c.stats.handoffs.Add(1)
	if !m.c.fair.Settle(ws, reply.Candidate, next, false) {
		m.c.releaseUnwanted(next)
	} else {
		// w returns with next at once and leaves its subscription, if
		// any, to us: the unsubscribe is off the path of the lock's next
		// pass.
		w.Sub.Close() // nil without one
	}
	return passed, nil
}

// fairHeads is how many of the queue's next heads an answer names at
// most, with a token reserved for each.
const fairHeads = 8

// fairRefill is how few named heads a run may have left before a switch
// asks Redis to name them again. A switch that does not ask runs four
// commands fewer (fair_queue.lua, pass_to).
const fairRefill = 2

var argFairHeads any = fairHeads

// passNow passes a FairMutex's lock on in process to w, the first of the
// queue's next heads that the answer to the run's newest switch named,
// with token, taken for it (see above; fair_pass.lua), as Mutex.passNow
// does.
func (m *FairMutex) passNow(l *Lease, w *wait.Waiter, token uint64, ask bool) bool {
	run := l.run
	next, sent, ok := m.c.passLease(l, w, w.Owner, token, m.group, &m.c.fair)
	if !ok {
		run.NoNews(token, ask)
		return false
	}
	// w returns with next at once and leaves its subscription to us, as
	// after any pass.
	w.Sub.Close()
	req := scripts.FairPassRequest{Keys: m.keys, Owner: w.Owner, Lease: w.Lease, Token: token, Heads: argZero, Now: m.c.nowArg()}
	if ask {
		req.Heads = argFairHeads
	}
	keys, args := req.Build()
	judgeSwitch(m.c, next, func(ctx context.Context) ([]any, error) {
		return m.c.door.Run(ctx, scripts.FairPass, keys, args...).Slice()
	}, func(r []any, err error) {
		reply := scripts.FairPassReplyOf(r)
		switch {
		case err != nil:
			run.AnswerHeads(token, ask, wait.Answer{Stop: true})
			m.c.wd.Lose(next.entry, errUnconfirmed)
		case reply.Switched == scripts.SwitchedOver:
			m.c.wd.Confirmed(next.entry, watchdog.DeadlineFor(sent, w.Lease))
			run.AnswerHeads(token, ask, wait.Answer{Heads: reply.Heads, Block: reply.First})
		case reply.Switched == scripts.Overtaken && run.Ours(reply.Newer, token):
			// A newer switch of the run came first: w has passed it on.
			run.NoNews(token, ask)
		default:
			// The run was broken before this switch: w has nothing.
			m.c.wd.Lose(next.entry, watchdog.ErrGone)
			run.AnswerHeads(token, ask, wait.Answer{Stop: true})
		}
	})
	return true
}
