package relock

import (
	"context"
	"errors"
	"time"

	"github.com/relock-go/relock/internal/scripts"
	"github.com/relock-go/relock/internal/wait"
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
// that an answer named as the Client's own waiters; an RWMutex passes its
// write lock to the Client's one-shot writers with rw_write_unlock.lua,
// while no one but those writers waits. The run's state is a wait.Run,
// shared by the run's leases: the tokens reserved, whether the newest
// answer allows passing on, the switches not answered yet, and a
// FairMutex's heads.
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
// every switch of the run (wait.Run.Settled), so that its script meets
// the run's last hold in Redis.
//
// The passing ends when an answer says someone else may be owed the lock,
// or when the reserved tokens run out before the next block comes: that
// release frees the lock or grants it in its script, as any other.

// runBlock is how many tokens Redis reserves for passing on at once.
// unlock.lua has it as k, which a test compares with it.
const runBlock = 8

// passMargin is the least time a hold must have left before its local
// deadline to be passed on.
const passMargin = 100 * time.Millisecond

// passOrEnd begins the release of l, a hold of a Mutex or an RWMutex's
// write hold whose Client's waiters wait under name: it passes the lock
// on in process to a waiting call of the Client it claims, with pass
// (the lock's passNow), if the run allows, and reports true. Otherwise
// it ends the run, if l holds it (the calls that joined it attempt), and
// returns once every switch of the run is answered: a release that does
// not pass the hold on comes after them.
func (c *Client) passOrEnd(ctx context.Context, l *Lease, name string, pass func(*Lease, *wait.Waiter) bool) (bool, error) {
	if c.passable(l) && l.run.Ready() {
		var one [1]*wait.Waiter
		if ws := c.local.Claim(name, one[:], nil); len(ws) == 1 && pass(l, ws[0]) {
			return true, nil
		}
	}
	c.local.EndRun(name, l)
	return false, l.awaitConfirmed(ctx)
}

// joinable reports whether a call may join the run that h, a *Lease,
// holds now: h's hold is watched, has time left, and may be passed on as
// far as the run's answers tell (wait.Wait.Joinable).
func joinable(h wait.Hold) bool {
	l := h.(*Lease)
	return !l.entry.Ended() && l.entry.Deadline()-l.c.wd.Now() > int64(passMargin) && l.run.Ready()
}

// passable reports whether l's hold may be passed on in process, tokens
// and permission aside: a one-shot hold of a run, not passed to a call
// that had gone, with time left, of a Client without replicas to wait
// for.
func (c *Client) passable(l *Lease) bool {
	return l.run != nil && !l.unwanted && !l.reentrant && !c.rsync.mayWait() &&
		!c.wd.Check(l.entry) && l.entry.Deadline()-c.wd.Now() > int64(passMargin)
}

// passRun passes the hold of l, a Mutex's or an RWMutex's write hold,
// to w, as passNow tells: the new hold's field in the lock's hash is
// field, its watchdog group group, and it holds the run of the Client's
// waiters under name from then; send sends the switch that passes the
// hold with token, reserve asking Redis to reserve the next block. Its
// answer is unlock.lua's to a switch (rw_write_unlock.lua's is the same).
func (c *Client) passRun(l *Lease, w *wait.Waiter, field string, group int, name string,
	send func(ctx context.Context, token uint64, reserve bool) (int64, error)) bool {
	run := l.run
	token, ask := run.Take()
	next, sent, ok := c.passLease(l, w, field, token, group, &c.local)
	if !ok {
		run.NoNews(token, ask)
		return false
	}
	c.local.SetRun(name, next)
	judgeSwitch(c, next, func(ctx context.Context) (int64, error) {
		return send(ctx, token, ask)
	}, func(r int64, err error) {
		reply := scripts.SwitchReplyOf(r)
		switch {
		case err != nil:
			run.Answer(token, ask, wait.Answer{Stop: true})
			c.wd.Lose(next.entry, errUnconfirmed)
		case reply.Switched == scripts.SwitchedOver: // w holds it
			c.wd.Confirmed(next.entry, watchdog.DeadlineFor(sent, w.Lease))
			run.Answer(token, ask, wait.Answer{Permit: reply.MayPass, Block: reply.Block})
		case reply.Switched == scripts.Overtaken && run.Ours(reply.Newer, token): // a newer switch of the run came first
			run.NoNews(token, ask)
		default:
			// The run was broken before this switch (expired, deleted):
			// w has nothing.
			c.wd.Lose(next.entry, watchdog.ErrGone)
			run.Answer(token, ask, wait.Answer{Stop: true})
		}
	})
	return true
}

// passLease passes w, a waiter of list it has claimed, a Lease of l's lock
// and run with token and field, before Redis has it (see above), and
// returns it with when it did so (the switch's sending), or false if w
// has gone: nothing is left of the new lease then.
func (c *Client) passLease(l *Lease, w *wait.Waiter, field string, token uint64, group int, list *wait.List) (*Lease, int64, bool) {
	sent := c.wd.Now()
	next := &Lease{c: c, rel: l.rel, name: l.name, field: field, token: token, end: newEnding(),
		run: l.run, confirmed: make(chan struct{})}
	c.wd.AddUnconfirmed(next.ownEntry(group, w.Lease, w.Fixed), min(l.entry.Deadline(), watchdog.DeadlineFor(sent, w.Lease)))
	if !list.Settle([]*wait.Waiter{w}, 0, next, false) {
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
