package wait

import "time"

// News. Another Client's release reaches a waiting call by its owner: it
// grants the call the lock (Grant), or wakes it to attempt now or by a
// time (Wake). A call may learn that it was granted before its waiter is
// added: a grant can reach the Client between the reply to the attempt
// that queued the call and the call's sleep. Such news is kept by owner
// for the waiter added after it.

// Grant is a hold another Client's release granted to a waiting call
// (relock's grant.go): its fencing token, how long the lock lives from the
// grant at least, and how long after the call joined the queue the grant
// came.
type Grant struct {
	Token    uint64
	TTL, Age time.Duration
}

// mailed is news for an owner whose waiter was not added yet.
type mailed struct {
	g       *Grant
	recheck time.Duration // 0: none; negative: now
	at      time.Time
}

// mailLife is how long news waits for its call, at least: a call adds its
// waiter right after the attempt that queued it, or has returned. Older
// news goes within as long again.
const mailLife = 2 * time.Second

// Grant records g, granted to the waiter of owner, and wakes it; with no
// such waiter yet, the news is kept for one added within mailLife.
func (r *List) Grant(owner string, g *Grant) { r.record(owner, g, 0) }

// Wake wakes the waiter of owner to attempt within d (0: now); with no
// such waiter yet, the news is kept for one added within mailLife.
func (r *List) Wake(owner string, d time.Duration) { r.record(owner, nil, d) }

// record records a grant, or a time to attempt by (0: now), for the waiter
// of owner and wakes it, or keeps the news.
func (r *List) record(owner string, g *Grant, recheck time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if w := r.byOwner[owner]; w != nil {
		w.note(g, recheck)
		return
	}
	now := time.Now()
	forgetOld(r.mail, func(m *mailed) time.Time { return m.at }, mailLife, &r.pruned, now)
	if r.mail == nil {
		r.mail = make(map[string]*mailed)
	}
	m := r.mail[owner]
	if m == nil {
		m = &mailed{}
		r.mail[owner] = m
	}
	m.at = now
	switch {
	case g != nil:
		m.g = g
	case recheck <= 0:
		m.recheck = -1 // now
	case m.recheck == 0 || recheck < m.recheck:
		m.recheck = recheck
	}
}

// forgetOld deletes the entries of m made (at) more than life before now,
// at most once per life: last is when it last did.
func forgetOld[V any](m map[string]V, at func(V) time.Time, life time.Duration, last *time.Time, now time.Time) {
	if now.Sub(*last) <= life {
		return
	}
	*last = now
	for k, v := range m {
		if now.Sub(at(v)) > life {
			delete(m, k)
		}
	}
}

// wakeOther wakes one waiter of name other than w to attempt within d.
func (r *List) wakeOther(name string, w *Waiter, d time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, x := range r.byName[name] {
		if x != w && !x.quiet {
			x.note(nil, d)
			return
		}
	}
}

// WakeEach wakes, oldest first, the waiters of name that pick chooses (a
// semaphore's policy: the calls the permits freed can satisfy): each
// attempts at once.
func (r *List) WakeEach(name string, pick func(w *Waiter) bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, w := range r.byName[name] {
		if pick(w) {
			w.wake() // one woken already attempts anyway
		}
	}
}

// note records g or recheck for w (0: attempt now), and wakes it. Called
// with mu held.
func (w *Waiter) note(g *Grant, recheck time.Duration) {
	switch {
	case g != nil:
		w.granted = g
	case recheck <= 0:
		w.woken = true
	case w.recheck == 0 || recheck < w.recheck:
		w.recheck = recheck
	}
	w.ring()
}

// wake wakes w to attempt now, and wakes it. Called with mu held.
func (w *Waiter) wake() {
	w.woken = true
	w.ring()
}

// ring wakes w to read its news.
func (w *Waiter) ring() {
	select {
	case w.news <- struct{}{}:
	default:
	}
}

// news returns and clears what w was granted or woken for: a grant, a time to attempt by,
// or to attempt now.
func (r *List) news(w *Waiter) (g *Grant, recheck time.Duration, now bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	g, recheck, now = w.granted, w.recheck, w.woken
	w.granted, w.recheck, w.woken = nil, 0, false
	return g, recheck, now
}
