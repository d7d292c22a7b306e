package wait

// Joining a run. While a Client passes a lock on in process from one of
// its calls to the next, a call of the Client that comes needs no attempt
// of its own: it joins the list at once, asleep, and the run passes it the
// lock in turn. The run's holder is recorded by name (SetRun); a call
// joins only while that holder may pass the lock on (joinRun, or turned
// for a call that waited for its gate), and the release that ends the run
// (it does not pass the lock on) wakes every call that joined so (EndRun),
// under the same lock as the joining: no call sleeps past the run's end. A
// call that joined makes its first attempt then, or when its retry time
// comes, and is a queued call from there.

// SetRun records h as the holder of its Client's run of name.
func (r *List) SetRun(name string, h Hold) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.runs == nil {
		r.runs = make(map[string]Hold)
	}
	if _, ok := r.runs[name]; !ok {
		r.nRuns.Add(1)
	}
	r.runs[name] = h
}

// MayJoinRun reports whether a call of name may join its Client's run
// now: joinable judges the run's holder. It allocates nothing, so that a
// call with no run to join pays nothing for the look.
func (r *List) MayJoinRun(name string, joinable func(holder Hold) bool) bool {
	if r.nRuns.Load() == 0 {
		return false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	h, ok := r.runs[name]
	return ok && joinable(h)
}

// joinRun adds w as a waiter for name, and has it join its Client's run
// without an attempt if it still may (MayJoinRun): it reports whether it
// did.
func (r *List) joinRun(name string, w *Waiter, joinable func(holder Hold) bool) bool {
	r.mu.Lock()
	r.addLocked(name, w)
	in := r.joinRunLocked(name, w, joinable)
	r.mu.Unlock()
	r.n.Add(1)
	return in
}

// turned ends the wait of w, a quiet waiter for name, for its gate
// (Wait.Gate): news for its owner reaches it from now on. With joinable, it
// joins its Client's run without an attempt, if it may, as in joinRun,
// and turned reports whether it did.
func (r *List) turned(name string, w *Waiter, joinable func(holder Hold) bool) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	w.quiet = false
	r.own(w)
	return joinable != nil && r.joinRunLocked(name, w, joinable)
}

// joinRunLocked has w, a waiter for name, join its Client's run if
// joinable judges its holder able to pass it the lock. Called with mu
// held.
func (r *List) joinRunLocked(name string, w *Waiter, joinable func(holder Hold) bool) bool {
	if h, ok := r.runs[name]; !ok || !joinable(h) {
		return false
	}
	w.inRun = true
	return true
}

// EndRun ends the run of name if h holds it: every call that joined it
// without an attempt is woken to attempt.
func (r *List) EndRun(name string, h Hold) {
	if r.nRuns.Load() == 0 {
		return // no run: every release but a run's last passes here
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if x, ok := r.runs[name]; !ok || x != h {
		return
	}
	delete(r.runs, name)
	r.nRuns.Add(-1)
	for _, w := range r.byName[name] {
		if w.inRun {
			w.inRun = false
			w.wake()
		}
	}
}
