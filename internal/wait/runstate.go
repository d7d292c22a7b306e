package wait

import (
	"context"
	"slices"
	"sync"
)

// Run is a Client's run of holds of one lock passed on in process, shared
// by their leases: the fencing tokens Redis reserved for passing on,
// whether Redis's newest answer allows it, and the switches not answered
// yet (a switch is the script call that makes the call passed the lock
// its holder in Redis). Only the current holder takes tokens; answers add
// blocks and update the permission. A FairMutex's run (NewHeadsRun) also
// keeps the queue's next heads that are waiters of the Client, in order,
// as the newest answer named them: it passes the lock to them only, first
// to last.
type Run struct {
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

	heads  []string     // a FairMutex's next holders (see above)
	log    []passedHold // a FairMutex's passes not yet answered, oldest first
	refill int          // how few heads may be left before a switch asks for more
}

// passedHold is one pass of a FairMutex's run: to whom, with which token.
type passedHold struct {
	token uint64
	owner string
}

// NewRun starts a Mutex's (or an RWMutex's write lock's) run with the
// block of size tokens from first; later blocks have size tokens too.
func NewRun(first, size uint64) *Run {
	return &Run{next: first, last: first + size - 1, size: size, permit: true}
}

// NewHeadsRun starts a FairMutex's run that may pass the lock to heads,
// in order, with the tokens from first. A switch asks Redis to name the
// queue's next heads again once refill or fewer are left (TakeHead).
func NewHeadsRun(first uint64, heads []string, refill int) *Run {
	r := &Run{refill: refill}
	r.setHeads(first, heads)
	return r
}

// setHeads makes heads the run's next holders, with the tokens from
// first; none stops passing.
func (r *Run) setHeads(first uint64, heads []string) {
	r.heads = heads
	r.next, r.last = first, first+uint64(len(heads))-1
	r.permit = len(heads) > 0
}

// Ready reports whether the holder of a Mutex may pass it on now: the
// newest answer allows it and a token is left, in the current block or
// a queued one.
func (r *Run) Ready() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.permit && (r.next <= r.last || r.queued != 0)
}

// Take takes the next token of a Mutex's run for a switch about to be
// sent, and reports whether the switch should ask for the next block:
// when none is queued or asked for and less than half of the current
// block is left. Only the run's holder takes, once Ready says it may.
func (r *Run) Take() (token uint64, ask bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.next > r.last {
		r.next, r.last, r.queued = r.queued, r.queued+r.size-1, 0
	}
	token = r.next
	r.next++
	r.passed = token
	if !r.asking && r.queued == 0 && r.last-token < r.size/2 {
		r.asking, ask = true, true
	}
	r.sent()
	return token, ask
}

// sent counts a switch on its way.
func (r *Run) sent() {
	if r.pending++; r.pending == 1 {
		r.idle = make(chan struct{})
	}
}

// done counts a switch answered.
func (r *Run) done() {
	if r.pending--; r.pending == 0 {
		close(r.idle)
		r.idle = nil
	}
}

// Answer is what the answer to a switch of a run says of the run:
// whether passing on must stop (whatever else), else whether it may go on
// (Permit, a Mutex's run), and the first token of a block reserved for it
// (Block, 0: none). A FairMutex's run is told the queue's next heads that
// are the Client's waiters instead (Heads), the block reserved for them.
type Answer struct {
	Stop   bool
	Permit bool
	Block  uint64
	Heads  []string
}

// Answer records a, the answer to the switch of a Mutex's run that passed
// token, which asked for a block if asked. Answers to older switches than
// the newest answered say nothing about permission.
func (r *Run) Answer(token uint64, asked bool, a Answer) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if asked {
		r.asking = false
	}
	switch {
	case a.Stop:
		r.permit, r.answered = false, ^uint64(0)
	case token >= r.answered:
		r.answered, r.permit = token, a.Permit
	}
	if a.Block != 0 && a.Permit {
		r.queued = a.Block
	}
	r.done()
}

// Next returns the waiter a FairMutex's holder may pass the lock to now,
// the first of the heads; "" if none.
func (r *Run) Next() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.permit || len(r.heads) == 0 || r.next > r.last {
		return ""
	}
	return r.heads[0]
}

// TakeHead takes the token for passing a FairMutex to owner, and takes
// owner off the heads, if owner is still the first of them (an answer may
// have come since Next); ok is false if not. ask reports whether the
// switch should ask Redis to name the queue's next heads again: when no
// switch asking is on its way and the run's refill or fewer heads are
// left. The heads named stay the queue's next ones until they are passed
// the lock: the queue only grows at its tail, and a head that leaves does
// so by its own call, which takes it off the Client's waiters, so that
// the release that finds it gone frees the lock in Redis instead.
func (r *Run) TakeHead(owner string) (token uint64, ask, ok bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.permit || len(r.heads) == 0 || r.heads[0] != owner || r.next > r.last {
		return 0, false, false
	}
	token = r.next
	r.next++
	r.passed = token
	r.log = append(r.log, passedHold{token, owner})
	r.heads = r.heads[1:]
	if !r.asking && len(r.heads) <= r.refill {
		r.asking, ask = true, true
	}
	r.sent()
	return token, ask, true
}

// NoNews ends the wait for the switch that passed token, which asked for
// a block (or heads) if asked, when its answer says nothing new (a newer
// switch of the run came first) or it was never sent (its waiter had
// gone).
func (r *Run) NoNews(token uint64, asked bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if asked {
		r.asking = false
	}
	r.forget(token)
	r.done()
}

// forget takes the pass with token off the log.
func (r *Run) forget(token uint64) {
	r.log = slices.DeleteFunc(r.log, func(p passedHold) bool { return p.token == token })
}

// AnswerHeads records a, the answer to the switch of a FairMutex's run
// that passed token, which asked Redis to name the queue's next heads if
// asked: a.Stop ends passing on; otherwise a.Heads are the queue's next
// heads that are the Client's waiters, as the switch left the queue, with
// tokens reserved for them from a.Block. Answers to older switches than
// the newest answered say nothing new: an asking switch answered after a
// newer one leaves the heads as they are, and the run ends when they
// run out.
func (r *Run) AnswerHeads(token uint64, asked bool, a Answer) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.forget(token)
	if asked {
		r.asking = false
	}
	switch {
	case a.Stop:
		r.permit, r.answered, r.heads = false, ^uint64(0), nil
	case token >= r.answered && !asked:
		r.answered = token
	case token >= r.answered:
		// Holders the run passed the lock to whose switches are not
		// answered yet may still be queued: they are not passed it again.
		r.answered = token
		left := a.Heads[:0]
		for _, h := range a.Heads {
			if !slices.ContainsFunc(r.log, func(p passedHold) bool { return p.owner == h }) {
				left = append(left, h)
			}
		}
		r.setHeads(a.Block, left)
	}
	r.done()
}

// Settled waits until every switch of the run has been answered, or
// returns ctx's error when ctx ends first. A release that does not pass
// the lock on sends its script after them all, so that no switch reaches
// Redis after the run has ended and every answer tells the run's state
// truly.
func (r *Run) Settled(ctx context.Context) error {
	r.mu.Lock()
	idle := r.idle
	r.mu.Unlock()
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

// Ours reports whether token is one the run passed after from: a switch
// answered as overtaken by the holder with token was overtaken by a newer
// switch of the same run.
func (r *Run) Ours(token, from uint64) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return token > from && token <= r.passed
}
