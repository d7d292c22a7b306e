package wait

import (
	"context"
	"sync"
)

// Turns lets one call at a time, per name, wait in the queue in Redis;
// the others of the Client wait for their turn here. An RWMutex's waiting
// writers take turns: the end of a write lock wakes every waiter of its
// channel, since every waiting reader may enter; without turns it would
// also wake every writer of the Client, all but one of them to fail
// again, and a grant or a word to a second writer would find no call to
// take it. A call waits for its turn as the first phase of its Loop
// (awaitTurn, below). Its zero value is ready.
type Turns struct {
	mu    sync.Mutex
	m     map[string]*Turn // by name
	spare *Turn            // one turn no name uses, for the next
}

// Turn is the turn of one Client's calls on one name.
type Turn struct {
	slot chan struct{} // holds a value while a call has the turn
	refs int           // calls having or awaiting the turn; guarded by Turns.mu
}

// Slot returns the turn's slot: a send takes the turn, once no other call
// has it.
func (t *Turn) Slot() chan<- struct{} { return t.slot }

// Join registers a call's interest in the turn on name, and returns the
// turn, which the call takes with a send on its Slot; Drop ends the
// interest of a call that never took it.
func (r *Turns) Join(name string) *Turn {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.join(name)
}

// join is Join with mu held.
func (r *Turns) join(name string) *Turn {
	if r.m == nil {
		r.m = make(map[string]*Turn)
	}
	t := r.m[name]
	if t == nil {
		if t = r.spare; t != nil {
			r.spare = nil
		} else {
			t = &Turn{slot: make(chan struct{}, 1)}
		}
		r.m[name] = t
	}
	t.refs++
	return t
}

// Try takes the turn on name if no call of the Client has it or waits for
// it; Leave gives it up.
func (r *Turns) Try(name string) (*Turn, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.m[name] != nil {
		return nil, false
	}
	t := r.join(name)
	t.slot <- struct{}{}
	return t, true
}

// Leave gives up t, the turn on name that the caller has.
func (r *Turns) Leave(name string, t *Turn) {
	<-t.slot
	r.Drop(name, t)
}

// Drop ends a call's interest in t, the turn on name, which it does not
// have.
func (r *Turns) Drop(name string, t *Turn) {
	r.mu.Lock()
	if t.refs--; t.refs == 0 {
		delete(r.m, name)
		r.spare = t
	}
	r.mu.Unlock()
}

// awaitTurn waits until the call has its turn (Wait.Turns). Meanwhile it
// sleeps in its list, quiet: no fellow call wakes it, and news is not
// kept for it. A release of the Client may claim it (if Claimable) and
// pass it what it waits for, or settle the claim with nothing: the call
// then attempts, without joining the queue in Redis, and sleeps on if it
// fails. Once it has the turn, it may join its Client's run (Joinable).
func (l *loop[O, N]) awaitTurn(ctx context.Context) (O, error) {
	var none O
	w, wt := l.w, l.wt
	l.turn = wt.Turns.Join(wt.Local)
	w.quiet = true
	wt.List.Add(wt.Local, w)
	l.added = true
	if w.Claimable {
		wt.List.Sleep(w)
	}
	l.env.Stats.Asleep.Add(1) // once a release may claim it, as in sleep
	defer l.env.Stats.Asleep.Add(-1)
	for {
		select {
		case l.turn.Slot() <- struct{}{}:
			l.myTurn = true
			if w.Claimable && !wt.List.Rise(w) {
				// A release of this Client may be passing it what it waits
				// for; if not, its first attempt with the turn takes what
				// a release passed it with a lost reply.
				o, err := l.awaitOutcome(ctx)
				if l.done = o != none; l.done || err != nil {
					return o, err
				}
			}
			l.inRun = wt.List.Turned(wt.Local, w, wt.Joinable)
			return none, nil
		case o := <-w.outcome: // nil channel unless claimable
			if l.done = o != none; l.done {
				return o, nil
			}
			done, _, err := l.c.Attempt(ctx)
			if l.done = done; done || err != nil {
				return none, err
			}
			wt.List.Sleep(w)
		case <-ctx.Done():
			return none, l.ctxErr(ctx)
		case <-l.env.Closing:
			return none, l.env.Closed
		}
	}
}
