package wait

import "sync"

// Turns lets one call at a time, per name, wait in the queue in Redis;
// the others of the Client wait for their turn here. An RWMutex's waiting
// writers take turns: the end of a write lock wakes every waiter of its
// channel, since every waiting reader may enter; without turns it would
// also wake every writer of the Client, all but one of them to fail
// again, and a grant or a word to a second writer would find no call to
// take it. Its zero value is ready.
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
