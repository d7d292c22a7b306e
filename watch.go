package relock

import (
	"time"

	"github.com/relock-go/relock/internal/watchdog"
)

// How the watchdog watches holds: a Lease or Permit on an entry of its
// own, or, for the watchdog leases of a reentrant owner on one lock, on
// the owner's shared hold, which one entry renews and whose loss ends
// them all.

// holdKey names the shared hold of a reentrant owner on one lock.
type holdKey struct{ name, owner string }

// hold is one reentrant owner's watchdog-kept hold on one lock, shared by
// all of the owner's watchdog leases of that lock: one entry renews them
// all, and its loss ends them all.
type hold struct {
	c      *Client
	key    holdKey
	entry  *watchdog.Entry
	leases map[*Lease]bool // true for a lease whose release failed
	failed int             // how many leases' releases failed
}

// watch starts watching a new lease: on its own entry, or, for a reentrant
// watchdog lease, on the owner's shared hold.
func (c *Client) watch(l *Lease, group int, lease time.Duration, fixed bool, sent int64) {
	c.watchUntil(l, group, lease, fixed, watchdog.DeadlineFor(sent, lease))
}

// watchUntil is watch with the hold's local deadline given.
func (c *Client) watchUntil(l *Lease, group int, lease time.Duration, fixed bool, deadline int64) {
	if fixed || !l.reentrant {
		c.wd.Add(l.ownEntry(group, lease, fixed), deadline)
		return
	}
	key := holdKey{l.name, l.field}
	if l.renewal == kindRead {
		key.owner += readHold
	}
	c.holdsMu.Lock()
	defer c.holdsMu.Unlock()
	h := c.holds[key]
	if h == nil {
		h = &hold{c: c, key: key, leases: make(map[*Lease]bool)}
		h.entry = &watchdog.Entry{Key: l.name, Owner: l.field, Kind: l.renewal, Group: group, Lease: lease, Data: watched(h)}
		c.holds[key] = h
		c.wd.Add(h.entry, deadline)
	} else {
		// The owner may have taken the lock afresh after the hold's last
		// release, which a renewal sent before may have found gone.
		c.wd.Retaken(h.entry)
		h.entry.Extend(deadline)
	}
	h.leases[l] = false
	l.hold, l.entry = h, h.entry
}

// ownEntry makes the watchdog entry of a lease not sharing a hold.
func (l *Lease) ownEntry(group int, lease time.Duration, fixed bool) *watchdog.Entry {
	renew := lease
	if fixed {
		renew = 0 // checked, never extended
	}
	l.own = watchdog.Entry{Key: l.name, Owner: l.field, Kind: l.renewal, Group: group, Lease: renew, Data: watched(l)}
	l.entry = &l.own
	return l.entry
}

// watched is what a watchdog entry stands for (its Data): a Lease, a
// reentrant owner's shared hold, or a Permit. Every entry is made with a
// watched value, so a new kind of hold must say how it is lost.
type watched interface {
	lost(err error)
}

var (
	_ watched = (*Lease)(nil)
	_ watched = (*hold)(nil)
	_ watched = (*Permit)(nil)
)

// lost is the watchdog's Config.Lost: it ends what the entry stands for.
func (c *Client) lost(e *watchdog.Entry, err error) {
	e.Data.(watched).lost(err)
}

// lost ends every lease of the shared hold.
func (h *hold) lost(err error) {
	c := h.c
	c.holdsMu.Lock()
	h.retire()
	leases := make([]*Lease, 0, len(h.leases))
	for l := range h.leases {
		leases = append(leases, l)
	}
	clear(h.leases)
	h.failed = 0
	c.holdsMu.Unlock()
	for _, l := range leases {
		l.lost(err)
	}
}

// leaveHold takes l out of its shared hold, which is no longer renewed
// once no lease is left in it whose release has not failed.
func (c *Client) leaveHold(l *Lease) {
	h := l.hold
	c.holdsMu.Lock()
	defer c.holdsMu.Unlock()
	failed, ok := h.leases[l]
	if !ok {
		return // lost, or left already
	}
	delete(h.leases, l)
	if failed {
		h.failed--
	}
	if len(h.leases) == 0 {
		h.retire()
		c.wd.Remove(h.entry)
	} else if h.failed == len(h.leases) {
		h.retire()
		c.wd.StopRenewal(h.entry)
	}
}

// abandonHold marks l, whose release failed, in its shared hold: once
// every lease left in the hold has failed a release, the hold is no longer
// renewed and its leases end at its local deadline. The owner's next
// acquisition then starts a hold of its own.
func (c *Client) abandonHold(l *Lease) {
	h := l.hold
	c.holdsMu.Lock()
	defer c.holdsMu.Unlock()
	if failed, ok := h.leases[l]; !ok || failed {
		return
	}
	h.leases[l] = true
	h.failed++
	if h.failed == len(h.leases) {
		h.retire()
		c.wd.StopRenewal(h.entry)
	}
}

// retire makes h no longer the hold that the owner's acquisitions join.
// The caller holds holdsMu.
func (h *hold) retire() {
	if h.c.holds[h.key] == h {
		delete(h.c.holds, h.key)
	}
}
