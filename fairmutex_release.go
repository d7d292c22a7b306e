package relock

import (
	"context"
	"fmt"

	"github.com/relock-go/relock/internal/layout"
	"github.com/relock-go/relock/internal/scripts"
	"github.com/relock-go/relock/internal/wait"
	"github.com/relock-go/relock/internal/watchdog"
)

// release implements releaser. When waiters of the same Client sleep in
// the lock's queue, the release passes the lock straight to the first of
// the queue if it is one of them.
func (m *FairMutex) release(ctx context.Context, l *Lease) (int64, error) {
	keys, flag := m.unlockKeys, argZero
	if l.reentrant {
		keys, flag = with(m.unlockKeys, layout.Marker(layout.UnlockLatch, m.name, l.request)), argOne
	}
	// A lock passed in the release script would skip the waiter's
	// WAIT: with replica sync, the queue's head acquires for itself.
	grants := argGrantTTL
	if m.c.rsync.mayWait() {
		grants = argZero
	}
	args := []any{l.field, m.argWaiters, m.c.argPublish, flag, m.c.argMarkerTTL, m.c.argFencing, grants, argFairHeads, m.argGrantPrefix}
	if m.c.passable(l) {
		if head := l.run.Next(); head != "" {
			if w := m.c.fair.ClaimOwner(m.name, head); w != nil {
				if token, ask, ok := l.run.TakeHead(head); !ok {
					m.c.fair.Settle([]*waiter{w}, -1, nil, false) // an answer came meanwhile
				} else if m.passNow(l, w, token, ask) {
					return 3, nil
				}
			}
		}
	}
	if err := l.awaitConfirmed(ctx); err != nil {
		return 0, err
	}
	if !m.c.rsync.mayWait() {
		var buf [fairMaxCandidates]*waiter
		if ws := m.c.fair.Claim(m.name, buf[:], nil); len(ws) > 0 {
			return m.releasePassing(ctx, keys, args, ws)
		}
	}
	return m.c.batch.Do(ctx, scripts.FairUnlock, keys, args, nil)
}

// fairMaxCandidates caps the candidates of one release.
const fairMaxCandidates = 16

// releasePassing runs fair_unlock.lua with ws as candidates and passes the lock to
// the one it passed to, if any. It returns what Lease.Unlock expects of a
// releaser: negative when the lock passed on.
func (m *FairMutex) releasePassing(ctx context.Context, keys []any, args []any, ws []*waiter) (int64, error) {
	for _, w := range ws {
		args = append(args, w.Owner, w.Lease.Milliseconds())
	}
	sent := m.c.wd.Now()
	v, err := scripts.FairUnlock.Run(ctx, m.c.batch.Direct(), keys, args...).Result()
	if err != nil {
		// Unknown outcome: a candidate given the lock finds it holds it
		// when it attempts, and takes it as its own.
		m.c.fair.Settle(ws, -1, nil, true)
		return 0, err
	}
	r, ok := v.([]any)
	if !ok || len(r) != 4 {
		m.c.fair.Settle(ws, -1, nil, false)
		n, _ := v.(int64)
		return n, nil
	}
	token, _ := r[0].(int64)
	i, _ := r[1].(int64)
	if i < 1 || int(i) > len(ws) || token <= 0 {
		m.c.fair.Settle(ws, -1, nil, true)
		return 0, fmt.Errorf("unexpected reply %v", v)
	}
	w := ws[i-1]
	next := m.newLease(w.Owner, false, uint64(token))
	if heads, first := fairHeadsOf(r[2], r[3]); len(heads) > 0 {
		// Tokens reserved for passing it on in process to the next heads.
		next.run = wait.NewHeadsRun(first, heads, fairRefill)
	}
	m.c.watch(next, m.group, w.Lease, w.Fixed, sent)
	m.c.stats.acquired.Add(1)
	m.c.stats.handoffs.Add(1)
	if !m.c.fair.Settle(ws, int(i-1), next, false) {
		m.c.releaseUnwanted(next)
	} else {
		// w returns with next at once and leaves its subscription, if
		// any, to us: the unsubscribe is off the path of the lock's next
		// pass.
		w.Sub.Close() // nil without one
	}
	return -1, nil
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
func (m *FairMutex) passNow(l *Lease, w *waiter, token uint64, ask bool) bool {
	run := l.run
	next, sent, ok := m.c.passLease(l, w, w.Owner, token, m.group, &m.c.fair)
	if !ok {
		run.NoNews(token, ask)
		return false
	}
	// w returns with next at once and leaves its subscription to us, as
	// after any pass.
	w.Sub.Close()
	heads, since := argZero, m.c.nowArg()
	if ask {
		heads = argFairHeads
	}
	judgeSwitch(m.c, next, func(ctx context.Context) ([]any, error) {
		return scripts.FairPass.Run(ctx, m.c.batch.Direct(), m.unlockKeys, w.Owner, w.Lease.Milliseconds(), token, heads, since, m.c.argFencing).Slice()
	}, func(r []any, err error) {
		status := int64(-1)
		if err == nil && len(r) > 0 {
			status, _ = r[0].(int64)
		}
		switch {
		case err != nil:
			run.AnswerHeads(token, ask, true, nil, 0)
			m.c.wd.Lose(next.entry, errUnconfirmed)
		case status == 1 && len(r) == 3:
			heads, first := fairHeadsOf(r[1], r[2])
			m.c.wd.Confirmed(next.entry, watchdog.DeadlineFor(sent, w.Lease))
			run.AnswerHeads(token, ask, false, heads, first)
		case status == 2 && len(r) == 2 && run.Ours(uint64(toInt(r[1])), token):
			// A newer switch of the run came first: w has passed it on.
			run.NoNews(token, ask)
		default:
			// The run was broken before this switch: w has nothing.
			m.c.wd.Lose(next.entry, watchdog.ErrGone)
			run.AnswerHeads(token, ask, true, nil, 0)
		}
	})
	return true
}

// fairHeadsOf reads the heads and first reserved token of a fair
// script's answer.
func fairHeadsOf(list, first any) ([]string, uint64) {
	xs, _ := list.([]any)
	heads := make([]string, 0, len(xs))
	for _, x := range xs {
		if h, ok := x.(string); ok {
			heads = append(heads, h)
		}
	}
	return heads, uint64(toInt(first))
}

// toInt reads an integer reply, 0 if it is none.
func toInt(v any) int64 {
	n, _ := v.(int64)
	return n
}
