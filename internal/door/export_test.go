package door

// Busy counts one more call in flight, as if another caller's call were
// under way, so that every call queues for a flusher; the returned func
// undoes it.
func (d *Door) Busy() func() {
	d.inflight.Add(1)
	return func() { d.inflight.Add(-1) }
}

// Flushers is the most pipelines a Door has in flight at once.
const Flushers = flushers
