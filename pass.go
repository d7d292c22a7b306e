package relock

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/relock-go/relock/internal/watchdog"
)

// Passing on in process. While a Client holds a Mutex and no one else
// could be owed it (no other Client's waiter is first in its queue, no one
// else listens on its release channel), a release passes the lock to the
// Client's next waiting call at once, without waiting for Redis, and sends
// unlock.lua a switch that makes the waiter the holder there too. The
// waiter's fencing token comes from a block that an earlier answer of
// Redis reserved for the Client (unlock.lua, "Passing on in process"), so
// its Lock returns with everything a Lease tells. A FairMutex does the
// same with fair_pass.lua, passing the lock only to the queue's next heads
// that an answer named as the Client's own waiters, in queue order; an
// RWMutex passes its write lock to the Client's one-shot writers with
// rw_write_unlock.lua, while no one but those writers waits.
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
// A release that does not pass the lock on first waits for the answers to
// every switch of the run, so that its script meets the run's last hold in
// Redis and no switch comes after the run has ended.
//
// The passing ends when an answer says someone else may be owed the lock,
// or when the reserved tokens run out before the next block comes: that
// release frees the lock or grants it in its script, as any other.

// chainBlock is how many tokens Redis reserves for passing on at once.
// unlock.lua has it as k, which a test compares with it.
const chainBlock = 8

// passMargin is the least time a hold must have left before its local
// deadline to be passed on.
const passMargin = 100 * time.Millisecond

// chain is a Client's run of holds of one lock passed on in process,
// shared by their leases: the tokens reserved for passing on, whether
// Redis's latest answer allows it, and the switches not answered yet.
// Only the current holder takes tokens; answers add blocks and update the
// permission. A FairMutex's run also keeps the queue's next heads that
// are waiters of the Client, in order, as the latest answer named them:
// it passes the lock to them only, first to last.
type chain struct {
	mu       sync.Mutex
	next     uint64 // the next token to pass; next > last when none is left
	last     uint64
	queued   uint64        // the first token of a block that comes after last; 0 if none
	asking   bool          // a switch asking for a block is on its way
	permit   bool          // the answer to the newest switch answered allows passing on
	answered uint64        // the token of that switch
	passed   uint64        // the newest token passed
	size     uint64        // tokens in a Mutex's block
	pending  int           // switches not answered yet
	idle     chan struct{} // closed when pending falls to 0; nil while it is 0

	heads []string     // a FairMutex's next holders (see above)
	log   []passedHold // a FairMutex's passes not yet answered, oldest first
}

// passedHold is one pass of a FairMutex's run: to whom, with which token.
type passedHold struct {
	token uint64
	owner string
}

// newChain starts a Mutex's run with the block of size tokens from
// first.
func newChain(first, size uint64) *chain {
	return &chain{next: first, last: first + size - 1, size: size, permit: true}
}

// newFairChain starts a FairMutex's run that may pass the lock to heads,
// in order, with the tokens from first.
func newFairChain(first uint64, heads []string) *chain {
	ch := &chain{}
	ch.setHeads(first, heads)
	return ch
}

// setHeads makes heads the run's next holders, with the tokens from
// first; none stops passing.
func (ch *chain) setHeads(first uint64, heads []string) {
	ch.heads = heads
	ch.next, ch.last = first, first+uint64(len(heads))-1
	ch.permit = len(heads) > 0
}

// ready reports whether the holder of a Mutex may pass it on now.
func (ch *chain) ready() bool {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	return ch.permit && (ch.next <= ch.last || ch.queued != 0)
}

// take takes the next token for a switch about to be sent, and reports
// whether the switch should ask for the next block.
func (ch *chain) take() (token uint64, ask bool) {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	if ch.next > ch.last {
		ch.next, ch.last, ch.queued = ch.queued, ch.queued+ch.size-1, 0
	}
	token = ch.next
	ch.next++
	ch.passed = token
	if !ch.asking && ch.queued == 0 && ch.last-token < ch.size/2 {
		ch.asking, ask = true, true
	}
	ch.sent()
	return token, ask
}

// sent counts a switch on its way.
func (ch *chain) sent() {
	if ch.pending++; ch.pending == 1 {
		ch.idle = make(chan struct{})
	}
}

// done counts a switch answered.
func (ch *chain) done() {
	if ch.pending--; ch.pending == 0 {
		close(ch.idle)
		ch.idle = nil
	}
}

// answer records the answer to the switch of a Mutex's run that passed
// token, which asked for a block if asked: whether passing on may go on
// (stop: no, whatever else), and the first token of a block it reserved
// (0: none). Answers to older switches than the newest answered say
// nothing about permission.
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
	ch.done()
}

// fairNext returns the waiter a FairMutex's holder may pass the lock to
// now, the first of the heads; "" if none.
func (ch *chain) fairNext() string {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	if !ch.permit || len(ch.heads) == 0 || ch.next > ch.last {
		return ""
	}
	return ch.heads[0]
}

// takeHead takes the token for passing a FairMutex to owner, and takes
// owner off the heads, if owner is still the first of them (an answer may
// have come since fairNext); ok is false if not. ask reports whether the
// switch should ask Redis to name the queue's next heads again: when no
// switch asking is on its way and fairRefill or fewer heads are left.
// The heads named stay the queue's next ones until they are passed the
// lock: the queue only grows at its tail, and a head that leaves does so
// by its own call, which takes it off the Client's waiters, so that the
// release that finds it gone frees the lock in Redis instead.
func (ch *chain) takeHead(owner string) (token uint64, ask, ok bool) {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	if !ch.permit || len(ch.heads) == 0 || ch.heads[0] != owner || ch.next > ch.last {
		return 0, false, false
	}
	token = ch.next
	ch.next++
	ch.passed = token
	ch.log = append(ch.log, passedHold{token, owner})
	ch.heads = ch.heads[1:]
	if !ch.asking && len(ch.heads) <= fairRefill {
		ch.asking, ask = true, true
	}
	ch.sent()
	return token, ask, true
}

// noNews ends the wait for the switch that passed token, which asked for
// a block if asked, when its answer says nothing new (a newer switch of
// the run came first) or it was never sent (its waiter had gone).
func (ch *chain) noNews(token uint64, asked bool) {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	if asked {
		ch.asking = false
	}
	ch.forget(token)
	ch.done()
}

// forget takes the pass with token off the log.
func (ch *chain) forget(token uint64) {
	ch.log = slices.DeleteFunc(ch.log, func(p passedHold) bool { return p.token == token })
}

// answerFair records the answer to the switch of a FairMutex's run that
// passed token, which asked Redis to name the queue's next heads if
// asked: stop ends passing on; otherwise heads are the queue's next heads
// that are the Client's waiters, as the switch left the queue, with
// tokens reserved for them from first. Answers to older switches than
// the newest answered say nothing new: an asking switch answered after a
// newer one leaves the heads as they are, and the run ends when they
// run out.
func (ch *chain) answerFair(token uint64, asked, stop bool, heads []string, first uint64) {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	ch.forget(token)
	if asked {
		ch.asking = false
	}
	switch {
	case stop:
		ch.permit, ch.answered, ch.heads = false, ^uint64(0), nil
	case token >= ch.answered && !asked:
		ch.answered = token
	case token >= ch.answered:
		// Holders the run passed the lock to whose switches are not
		// answered yet may still be queued: they are not passed it again.
		ch.answered = token
		left := heads[:0]
		for _, h := range heads {
			if !slices.ContainsFunc(ch.log, func(p passedHold) bool { return p.owner == h }) {
				left = append(left, h)
			}
		}
		ch.setHeads(first, left)
	}
	ch.done()
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

// ours reports whether token is one the run passed after from.
func (ch *chain) ours(token, from uint64) bool {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	return token > from && token <= ch.passed
}

// passOrEnd begins the release of l, a hold of a Mutex or an RWMutex's
// write hold whose Client's waiters wait under name: it passes the lock
// on in process to a waiting call of the Client it claims, with pass
// (the lock's passNow), if the run allows, and reports true. Otherwise
// it ends the run, if l holds it (the calls that joined it attempt), and
// returns once every switch of the run is answered: a release that does
// not pass the hold on comes after them.
func (c *Client) passOrEnd(ctx context.Context, l *Lease, name string, pass func(*Lease, *waiter) bool) (bool, error) {
	if c.passable(l) && l.chain.ready() {
		var one [1]*waiter
		if ws := c.local.Claim(name, one[:], nil); len(ws) == 1 && pass(l, ws[0]) {
			return true, nil
		}
	}
	c.local.EndRun(name, l)
	return false, l.awaitConfirmed(ctx)
}

// joinable reports whether a call may join the run that h holds now: h's
// hold is watched, has time left, and may be passed on as far as the
// run's answers tell (wait.List.JoinRun).
func joinable(h *Lease) bool {
	return !h.entry.Ended() && h.entry.Deadline()-h.c.wd.Now() > int64(passMargin) && h.chain.ready()
}

// passable reports whether l's hold may be passed on in process, tokens
// and permission aside: a one-shot hold of a run, not passed to a call
// that had gone, with time left, of a Client without replicas to wait
// for.
func (c *Client) passable(l *Lease) bool {
	return l.chain != nil && !l.unwanted && !l.reentrant && !c.rsync.mayWait() &&
		!c.wd.Check(l.entry) && l.entry.Deadline()-c.wd.Now() > int64(passMargin)
}

// passRun passes the hold of l, a Mutex's or an RWMutex's write hold,
// to w, as passNow tells: the new hold's field in the lock's hash is
// field, its watchdog group group, and it holds the run of the Client's
// waiters under name from then; send sends the switch that passes the
// hold with token, and the switch's reserve argument ("1" to ask Redis to
// reserve the next block). Its answer is unlock.lua's to a switch
// (rw_write_unlock.lua's is the same).
func (c *Client) passRun(l *Lease, w *waiter, field string, group int, name string,
	send func(ctx context.Context, token, reserve any) (int64, error)) bool {
	ch := l.chain
	token, ask := ch.take()
	next, sent, ok := c.passLease(l, w, field, token, group, &c.local)
	if !ok {
		ch.noNews(token, ask)
		return false
	}
	c.local.SetRun(name, next)
	tok, reserve := strconv.FormatUint(token, 10), argZero
	if ask {
		reserve = argOne
	}
	judgeSwitch(c, next, func(ctx context.Context) (int64, error) {
		return send(ctx, tok, reserve)
	}, func(r int64, err error) {
		switch {
		case err != nil:
			ch.answer(token, ask, true, false, 0)
			c.wd.Lose(next.entry, errUnconfirmed)
		case r&1 == 1: // 4b + 2p + 1: w holds it
			c.wd.Confirmed(next.entry, watchdog.DeadlineFor(sent, heldFor(w).lease))
			ch.answer(token, ask, false, r&2 == 2, uint64(r>>2))
		case r&3 == 2 && ch.ours(uint64(r>>2), token): // 4c + 2: a newer switch of the run came first
			ch.noNews(token, ask)
		default:
			// The run was broken before this switch (expired, deleted):
			// w has nothing.
			c.wd.Lose(next.entry, watchdog.ErrGone)
			ch.answer(token, ask, true, false, 0)
		}
	})
	return true
}

// passLease passes w, a waiter of list it has claimed, a Lease of l's lock
// and run with token and field, before Redis has it (see above), and
// returns it with when it did so (the switch's sending), or false if w
// has gone: nothing is left of the new lease then.
func (c *Client) passLease(l *Lease, w *waiter, field string, token uint64, group int, list *waiters) (*Lease, int64, bool) {
	sent := c.wd.Now()
	next := &Lease{c: c, rel: l.rel, name: l.name, field: field, token: token, end: newEnding(),
		chain: l.chain, confirmed: make(chan struct{})}
	cfg := heldFor(w)
	c.wd.AddUnconfirmed(next.ownEntry(group, cfg.lease, cfg.fixed), min(l.entry.Deadline(), watchdog.DeadlineFor(sent, cfg.lease)))
	if !list.Settle([]*waiter{w}, 0, next, false) {
		c.wd.Remove(next.entry)
		close(next.confirmed)
		return nil, 0, false
	}
	c.stats.acquired.Add(1)
	c.stats.handoffs.Add(1)
	return next, sent, true
}

// judgeSwitch sends a switch with send and judges next, the hold it
// passes on, by the outcome with judge, in a goroutine of c (at once when
// c is closing). A switch Redis does not answer is sent once more
// (applied twice, it does what it does once), each try bounded by the
// cleanup timeout.
func judgeSwitch[T any](c *Client, next *Lease, send func(context.Context) (T, error), judge func(T, error)) {
	run := func() {
		defer close(next.confirmed)
		var r T
		var err error
		for range 2 {
			ctx, cancel := context.WithTimeout(c.ctx, c.cfg.cleanup)
			r, err = send(ctx)
			cancel()
			if err == nil || isServerError(err) || c.ctx.Err() != nil {
				break
			}
		}
		judge(r, err)
	}
	if !c.spawn(run) {
		run()
	}
}

// errUnconfirmed ends a hold passed on in process whose switch Redis did
// not answer.
var errUnconfirmed = errors.New("no answer from Redis to the switch that passed the lock on")
