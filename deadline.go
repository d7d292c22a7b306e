package relock

import (
	"slices"
	"time"
)

// Deadline returns the hold's local deadline: the moment, on this
// process's monotonic clock, at which the hold is lost unless a renewal is
// confirmed before it (see the package doc's lost-lock signal). A
// confirmed watchdog renewal moves it later; a fixed lease's does not
// move. A program that must stop its work before another holder can start
// stops it by this time. A MultiLock or RedLock lease returns the moment
// its members' deadlines leave fewer than its quorum held. Once the hold
// has ended the value means nothing.
func (l *Lease) Deadline() time.Time {
	if l.parts == nil {
		return l.c.wd.Time(l.entry.Deadline())
	}
	// Members may be on different Clients, each with its own clock.
	var ds []time.Time
	for _, m := range l.parts.members {
		if m != nil {
			ds = append(ds, m.Deadline())
		}
	}
	if len(ds) < l.parts.quorum {
		return time.Time{} // lost already
	}
	// Earliest first: once the deadline at len-quorum has passed, fewer
	// than quorum members remain.
	slices.SortFunc(ds, time.Time.Compare)
	return ds[len(ds)-l.parts.quorum]
}

// Deadline returns the permit's local deadline, as Lease.Deadline does
// for a lock's hold.
func (p *Permit) Deadline() time.Time { return p.ps.c.wd.Time(p.entry.Load().Deadline()) }

// Deadline returns the leadership's local deadline, as Lease.Deadline
// does for a lock's hold: the leader must stop acting as one by then.
func (l *Leadership) Deadline() time.Time { return l.lease.Deadline() }
