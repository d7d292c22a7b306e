package relock

import (
	"context"
	"errors"
	"fmt"
	"sync"
)

// Composite leases. A MultiLock or RedLock hold is one Lease standing for
// several member holds, each an ordinary Lease renewed by its own Client's
// watchdog. The composite has no watchdog entry of its own: its members
// tell it when they end (whenDone), and its Err judges them on every call,
// so a member's local deadline reaches the composite without a goroutine.

// parts are the member holds behind a composite lease.
type parts struct {
	members []*Lease // nil where a RedLock holds no node
	quorum  int      // members that must stay held: all of them for a MultiLock
}

// newComposite returns the lease of a composite hold over members, lost as
// soon as fewer than quorum of them are held. c is the Client whose logger
// reports its loss.
func newComposite(c *Client, name string, token uint64, members []*Lease, quorum int) *Lease {
	l := &Lease{c: c, name: name, token: token, end: newEnding(), parts: &parts{members: members, quorum: quorum}}
	// Once the composite is lost, finish stops renewing its surviving
	// members.
	for _, m := range members {
		if m != nil {
			m.whenDone(func() { l.parts.check(l) })
		}
	}
	return l
}

// check ends l as lost when fewer than a quorum of its members are held.
// A member released by l's own Unlock still counts: only a loss does not.
func (p *parts) check(l *Lease) {
	if l.end.err.Load() != nil {
		return
	}
	held, all := 0, 0
	for _, m := range p.members {
		if m != nil {
			all++
			if !errors.Is(m.Err(), ErrLockLost) {
				held++
			}
		}
	}
	if held < p.quorum {
		l.finish(ErrLockLost, fmt.Sprintf("%d of %d member holds left, %d needed", held, all, p.quorum))
	}
}

// unlock releases every member of l that is not released yet, all at
// once, and judges the outcome:
//
//   - at least a quorum released (now or by an earlier call): nil. Members
//     whose release failed are no longer renewed and expire with their
//     leases.
//   - too few released even if every failed release had worked, because
//     members were gone (expired, deleted, lost): ErrNotHeld, and Err
//     reports ErrLockLost. The members that failed expire with their leases.
//   - otherwise the error of a failed release: the members not released
//     are no longer renewed and expire within their leases (l is lost
//     then), and Unlock may be called again to free them at once.
//
// A failed release of a member already lost, or of any member once l is
// lost, counts as gone: nothing renews it any more.
func (p *parts) unlock(ctx context.Context, l *Lease) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.released {
		return ErrNotHeld
	}
	errs := release(ctx, p.members)
	lost := errors.Is(l.Err(), ErrLockLost)
	var ok, gone int
	var failed []*Lease
	var first error
	for i, m := range p.members {
		if m == nil {
			continue
		}
		switch err := errs[i]; {
		case err == nil:
			ok++
		case errors.Is(err, ErrNotHeld):
			gone++
		case lost || errors.Is(m.Err(), ErrLockLost):
			gone++
			drop(m)
		default:
			failed = append(failed, m)
			if first == nil {
				first = err
			}
		}
	}
	switch {
	case ok >= p.quorum:
		giveUp(l, failed, first)
		l.released = true
		l.finish(ErrReleased, "")
		return nil
	case ok+len(failed) < p.quorum:
		giveUp(l, failed, first)
		l.released = true
		l.finish(ErrLockLost, "unlock found member holds gone")
		return ErrNotHeld
	}
	return fmt.Errorf("relock: unlock %q: %d of %d member holds not released: %w", l.name, len(failed), ok+gone+len(failed), first)
}

// giveUp stops renewing members whose release failed, leaving them to
// expire with their leases.
func giveUp(l *Lease, failed []*Lease, err error) {
	if len(failed) == 0 {
		return
	}
	for _, m := range failed {
		drop(m)
	}
	l.c.cfg.logger.Warn("relock: cannot release member holds; they expire with their leases",
		"name", l.name, "members", len(failed), "err", err)
}

// release unlocks the members not released yet, concurrently, and returns
// each member's error (nil for one released now or before). Each member's
// Unlock goes out even if ctx has ended, bounded by its Client's cleanup
// timeout.
func release(ctx context.Context, members []*Lease) []error {
	errs := make([]error, len(members))
	var wg sync.WaitGroup
	for i, m := range members {
		if m == nil || errors.Is(m.Err(), ErrReleased) {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = m.Unlock(ctx)
		}()
	}
	wg.Wait()
	return errs
}

// rollback releases the holds a failed acquisition took, within the
// cleanup timeout even if ctx has ended. A hold it cannot release is no
// longer renewed and expires with its lease.
func rollback(ctx context.Context, held []*Lease) {
	errs := release(ctx, held)
	for i, err := range errs {
		if err != nil && !errors.Is(err, ErrNotHeld) {
			m := held[i]
			drop(m)
			m.c.cfg.logger.Warn("relock: cannot release a member hold of a failed acquisition; it expires with its lease",
				"name", m.name, "err", err)
		}
	}
	clear(held)
}

// drop stops renewing a hold without releasing it in Redis: it expires
// with its lease unless an Unlock frees it first.
func drop(m *Lease) {
	switch {
	case m == nil:
	case m.parts != nil:
		for _, x := range m.parts.members {
			drop(x)
		}
	default:
		m.unwatch()
	}
}

// Tokens returns the fencing tokens of a MultiLock or RedLock lease's
// member holds: for a MultiLock, one per member in the order given to
// Multi; for a RedLock, one per Client in the order given to NewRedLock,
// 0 for a node the lease does not hold. For any other lease it returns
// []uint64{Token()}. Each token orders the holds of its own lock name on
// its own Redis deployment only.
func (l *Lease) Tokens() []uint64 {
	if l.parts == nil {
		return []uint64{l.token}
	}
	tokens := make([]uint64, len(l.parts.members))
	for i, m := range l.parts.members {
		if m != nil {
			tokens[i] = m.Token()
		}
	}
	return tokens
}

// lockID names one lock: a name on a Client.
type lockID struct {
	c    *Client
	name string
}

// identified is implemented by relock's lockers: the locks a locker takes,
// so that Multi can refuse a lock listed twice.
type identified interface {
	lockIDs() []lockID
}

func (m *Mutex) lockIDs() []lockID     { return []lockID{{m.c, m.name}} }
func (m *FairMutex) lockIDs() []lockID { return []lockID{{m.c, m.name}} }

// Both sides of an RWMutex are one lock: a MultiLock cannot take both.
func (r *ReadLocker) lockIDs() []lockID  { return r.rw.lockIDs() }
func (w *WriteLocker) lockIDs() []lockID { return w.rw.lockIDs() }

func (rw *RWMutex) lockIDs() []lockID {
	if rw == nil {
		return nil
	}
	return []lockID{{rw.c, rw.name}}
}
