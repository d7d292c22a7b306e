package relock

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"time"

	"github.com/relock-go/relock/internal/scripts"
	"github.com/relock-go/relock/internal/watchdog"
)

// Passing on in process. While a Client holds a Mutex and no one else
// could be owed it (no other Client's waiter is first in its queue, no one
// else listens on its release channel), a release hands the lock to the
// Client's next waiting call at once, without waiting for Redis, and sends
// unlock.lua a switch that makes the waiter the holder there too. The
// waiter's fencing token comes from a block that an earlier answer of
// Redis reserved for the Client (unlock.lua, "Passing on in process"), so
// its Lock returns with everything a Lease tells.
//
// Until Redis answers the switch, the new hold rests on the Client's: the
// lock is held in Redis by the run of holds it passes along (a field of
// the Client with an older token), so no one else can take it, and the
// new hold's local deadline is its predecessor's, or its own lease from
// the switch's sending if that is sooner. The watchdog does not renew it
// until then (a renewal that overtook the switch would find it missing).
// Switches may reach Redis in any order: each replaces a hold of the
// Client with an older token, so the newest stands. Redis's answer
// confirms the hold (its deadline then counts from the switch's sending),
// or reports it overtaken by a newer switch of the run (the hold has been
// passed on already), or finds the run broken before the switch (its hold
// had expired or been deleted): the hold is then lost, and Done closes.
// A release that does not pass the lock on waits for that answer first, so
// that its script meets its own hold in Redis.
//
// The passing ends when an answer says someone else may be owed the lock,
// or when the reserved tokens run out before the next block comes: that
// release frees the lock or grants it in its script, as any other.

// chainBlock is how many tokens Redis reserves for passing on at once.
const chainBlock = 8

var argChainBlock any = chainBlock

// passMargin is the least time a hold must have left before its local
// deadline to be passed on.
const passMargin = 100 * time.Millisecond

// chain is a Client's run of holds of one Mutex passed on in process,
// shared by their leases: the tokens reserved for passing on, whether
// Redis's latest answer allows it, and the switches not answered yet.
// Only the current holder takes tokens; answers add blocks and update the
// permission.
type chain struct {
	mu       sync.Mutex
	next     uint64 // the next token to hand; next > last when none is left
	last     uint64
	queued   uint64        // the first token of a block that comes after last; 0 if none
	asking   bool          // a switch asking for a block is on its way
	permit   bool          // the answer to the newest switch answered allows passing on
	answered uint64        // the token of that switch
	passed   uint64        // the newest token handed
	pending  int           // switches not answered yet
	idle     chan struct{} // closed when pending falls to 0; nil while it is 0
}

// newChain starts a run with the block of tokens from first.
func newChain(first uint64) *chain {
	return &chain{next: first, last: first + chainBlock - 1, permit: true}
}

// ready reports whether the holder may pass the lock on now.
func (ch *chain) ready() bool {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	return ch.permit && (ch.next <= ch.last || ch.queued != 0)
}

// take hands the next token for a switch about to be sent, and reports
// whether the switch should ask for the next block.
func (ch *chain) take() (token uint64, ask bool) {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	if ch.next > ch.last {
		ch.next, ch.last, ch.queued = ch.queued, ch.queued+chainBlock-1, 0
	}
	token = ch.next
	ch.next++
	ch.passed = token
	if !ch.asking && ch.queued == 0 && ch.last-token < chainBlock/2 {
		ch.asking, ask = true, true
	}
	if ch.pending++; ch.pending == 1 {
		ch.idle = make(chan struct{})
	}
	return token, ask
}

// answer records the answer to the switch that handed token, which asked
// for a block if asked: whether passing on may go on (stop: no, whatever
// else), and the first token of a block it reserved (0: none). Answers to
// older switches than the newest answered say nothing about permission.
func (ch *chain) answer(token uint64, asked, stop, permit bool, block uint64) {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	if asked {
		ch.asking = false
	}
	switch {
	case stop:
		ch.permit, ch.answered = false, ^uint64(0)
	case token >= ch.answered:
		ch.answered, ch.permit = token, permit
	}
	if block != 0 && permit {
		ch.queued = block
	}
	if ch.pending--; ch.pending == 0 {
		close(ch.idle)
		ch.idle = nil
	}
}

// settled waits until every switch of the run has been answered. A
// release that does not pass the lock on sends its script after them all,
// so that no switch reaches Redis after the run has ended and every
// answer tells the run's state truly.
func (ch *chain) settled(ctx context.Context) error {
	ch.mu.Lock()
	idle := ch.idle
	ch.mu.Unlock()
	if idle == nil {
		return nil
	}
	select {
	case <-idle:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// ours reports whether token is one the run handed after from.
func (ch *chain) ours(token, from uint64) bool {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	return token > from && token <= ch.passed
}

// mayPassOver reports whether the release of l may pass the lock on in
// process.
func (m *Mutex) mayPassOver(l *Lease) bool {
	return l.chain != nil && !l.unwanted && !l.reentrant && !m.c.rsync.mayWait() &&
		l.chain.ready() && !m.c.wd.Check(l.entry) && l.entry.Deadline()-m.c.wd.Now() > int64(passMargin)
}

// passOver is a release that passes the lock to w, a waiter of this
// Client it has claimed, at once, and sends the switch that makes it so in
// Redis (see above). It returns without waiting for Redis: a goroutine of
// the Client judges w's hold by the answer, which comes within the
// cleanup timeout (twice, if the first try is not answered) whatever ctx
// does.
func (m *Mutex) passOver(ctx context.Context, l *Lease, w *waiter) (int64, error) {
	ch := l.chain
	token, ask := ch.take()
	sent := m.c.wd.Now()
	next := &Lease{c: m.c, rel: m, name: m.name, field: w.owner, token: token, end: newEnding(),
		chain: ch, confirmed: make(chan struct{})}
	m.c.wd.AddUnconfirmed(next.ownEntry(m.group, w.lease, w.fixed), min(l.entry.Deadline(), watchdog.DeadlineFor(sent, w.lease)))
	if !m.c.local.settle([]*waiter{w}, 0, next, false) {
		// w has gone: release as if no one waited here.
		m.c.wd.Remove(next.entry)
		close(next.confirmed)
		ch.answer(token, ask, true, false, 0)
		if err := l.awaitConfirmed(ctx); err != nil {
			return 0, err
		}
		return m.c.batch.Do(ctx, scripts.Unlock, m.unlockKeys, m.unlockArgs(l.arg(), argZero, nil, ""), nil)
	}
	m.c.stats.acquired.Add(1)
	m.c.stats.handoffs.Add(1)
	args := m.unlockArgs(l.arg(), argZero, w, "")
	args[14] = strconv.FormatUint(token, 10)
	if ask {
		args = append(args, argOne)
	} else {
		args = append(args, argZero)
	}
	judge := func() {
		defer close(next.confirmed)
		r, err := m.switchHold(ctx, args)
		switch {
		case err != nil:
			ch.answer(token, ask, true, false, 0)
			m.c.wd.Lose(next.entry, errUnconfirmed)
		case r&3 == 1 || r&3 == 3: // 4b + 2p + 1: w holds it
			m.c.wd.Confirmed(next.entry, watchdog.DeadlineFor(sent, w.lease))
			ch.answer(token, ask, false, r&2 == 2, uint64(r>>2))
		case r&3 == 2 && ch.ours(uint64(r>>2), token): // 4c + 2: a newer switch of the run came first
			ch.answer(token, ask, false, false, 0)
		default:
			// The run was broken before this switch (expired, deleted):
			// w has nothing.
			m.c.wd.Lose(next.entry, watchdog.ErrGone)
			ch.answer(token, ask, true, false, 0)
		}
	}
	if !m.c.spawn(judge) {
		judge()
	}
	return 3, nil
}

// switchHold sends a switch and, if Redis does not answer, sends it once
// more (a switch applied twice does what it does once), each bounded by
// the cleanup timeout.
func (m *Mutex) switchHold(ctx context.Context, args []any) (int64, error) {
	var r int64
	var err error
	for range 2 {
		wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), m.c.cfg.cleanup)
		r, err = m.c.batch.Do(wctx, scripts.Unlock, m.unlockKeys, args, nil)
		cancel()
		if err == nil || isServerError(err) || m.c.ctx.Err() != nil {
			break
		}
	}
	return r, err
}

// errUnconfirmed ends a hold passed on in process whose switch Redis did
// not answer.
var errUnconfirmed = errors.New("no answer from Redis to the switch that passed the lock on")
