package relock

import (
	"context"
	"errors"
	"strconv"
	"time"

	"github.com/relock-go/relock/internal/door"
	"github.com/relock-go/relock/internal/scripts"
	"github.com/relock-go/relock/internal/wait"
)

// Semaphore is a distributed counting semaphore on one name, stored in
// Redisson's RSemaphore layout (a string holding the number of available
// permits; releases publish the new number on "redisson_sc:{name}"), so
// Java services using Redisson share it with Go services.
//
// Permits are not bound to an owner: any call of any process may release
// permits, whether or not it acquired them, and a process that dies
// holding permits never gives them back (use a PermitSemaphore for permits
// that expire with their holder). The layout keeps no total, so a release
// of more permits than were acquired cannot be detected: it raises the
// number available.
//
// A Semaphore is a cheap handle; make it with Client.Semaphore. It is safe
// for concurrent use. Its zero value is not usable.
type Semaphore struct {
	permits
}

// Semaphore returns the Semaphore of the given name. An invalid name is
// reported by every call on it with ErrInvalidName. The semaphore has no
// permits until TrySetPermits, AddPermits or Release gives it some.
func (c *Client) Semaphore(name string) *Semaphore {
	return &Semaphore{newPermits(c, name)}
}

// Release returns n permits (n must be positive) and wakes the local
// waiters they can satisfy; waiters of other processes are woken too. When
// no other client listens on the semaphore's channel, the permits that
// this Client's waiting Acquire calls ask for (oldest first, those that
// fit) are passed to them directly: they return without asking Redis,
// and only the rest are added there.
//
// Release goes out even when ctx has ended, since permits given back late
// are never given back by anyone else: it keeps ctx's values but not its
// cancellation, bounded by the Client's cleanup timeout (or ctx's
// deadline if that is later; a ctx that can never end, by the Redis
// client's own timeouts). It is applied exactly once when it returns
// nil, even if a reply is lost (it is then completed within that bound).
// An error that is not a Redis reply leaves the outcome unknown: calling
// Release again may return the permits twice.
//
// With replica sync (see WithReplicaSync), Release returns once enough
// replicas acknowledged it. When too few did, it returns an error wrapping
// ErrReplicaSync that says the permits were returned on the master but
// not confirmed by enough replicas: a failover may lose them. Do not
// repeat such a Release; ReplicaSync.Retry does not apply to it.
func (s *Semaphore) Release(ctx context.Context, n int) error {
	ctx, cancel := s.c.releaseContext(ctx)
	defer cancel()
	return s.release(ctx, "release", n)
}

func (s *Semaphore) release(ctx context.Context, op string, n int) error {
	if err := s.check(ctx, op, n); err != nil {
		return err
	}
	c := s.c
	if !c.rsync.mayWait() {
		var buf [16]*wait.Waiter
		if ws := c.local.Claim(s.channel, buf[:], fitting(n)); len(ws) > 0 {
			return s.releasePassing(ctx, op, n, ws)
		}
	}
	return s.add(ctx, op, n)
}

// releasePassing releases n permits, of which those that ws ask for (waiting
// calls of this Client, claimed) go straight to them when no one else
// listens on the semaphore's channel (sem_release.lua): they take them
// without an attempt of their own, and only the rest are added in Redis.
// Otherwise, or when the outcome is unknown, the calls attempt. Not with
// replica sync: a call would take permits before replicas acknowledged
// the release.
func (s *Semaphore) releasePassing(ctx context.Context, op string, n int, ws []*wait.Waiter) error {
	c := s.c
	k := 0
	for _, w := range ws {
		k += w.Permits
	}
	req := scripts.SemReleaseRequest{Keys: s.req.marked(nil), N: n, Publish: c.argPublish, MarkerTTL: c.argMarkerTTL, Channel: s.channel,
		Hand: k, Numsub: c.argNumsub}
	keys, args := req.Build()
	r, err := s.req.run(ctx, scripts.SemRelease, keys, args, req.Keys.Marker, always)
	if err != nil || !scripts.SemReleaseReplyOf(r, true).Handed {
		c.local.Settle(ws, -1, nil, true)
		if err != nil {
			return opError(ctx, op, s.name, err)
		}
		return nil
	}
	c.stats.handoffs.Add(uint64(len(ws)))
	back := 0
	for _, w := range c.local.PassEach(ws) {
		back += w.Permits
	}
	if back > 0 {
		// Calls that returned meanwhile: their permits go to Redis after all.
		s.restorePermits(back)
	}
	return nil
}

// restorePermits adds n permits passed to waiting calls that did not take them,
// within the cleanup timeout.
func (s *Semaphore) restorePermits(n int) {
	c := s.c
	ctx, cancel := context.WithTimeout(c.ctx, c.cfg.cleanup)
	defer cancel()
	if err := s.add(ctx, "release", n); err != nil {
		c.cfg.logger.Warn("relock: cannot give back permits passed to a call that left; they stay taken",
			"name", s.name, "permits", n, "err", err)
	}
}

// Acquire blocks until it has taken n permits (n must be positive), ctx
// ends, or the Client is closed. While it waits it sleeps on the
// semaphore's channel, shared with every other waiter of the Client, and
// tries again when a release publishes enough permits for it (at the
// latest every 2s, in case a message was missed). A request for more
// permits than the semaphore will ever have blocks until ctx ends.
//
// When ctx ends the error wraps ctx.Err(), and nothing is left behind: no
// subscription, no timer, and no permits taken, since an attempt whose
// reply the cancellation cut off is undone in Redis (within the cleanup
// timeout). With replica sync, permits taken that too few replicas
// acknowledged are given back at once, and Acquire fails with
// ErrReplicaSync, or, with ReplicaSync.Retry, tries again until ctx ends
// (the error then wraps both). Other errors: ErrInvalidName,
// ErrInvalidOption, ErrClosed, and Redis errors, wrapped.
func (s *Semaphore) Acquire(ctx context.Context, n int) error {
	if err := s.check(ctx, "acquire", n); err != nil {
		return err
	}
	ok, err := s.attempt(ctx, n)
	if ok || err != nil {
		return err
	}
	c := s.c
	// A release of this Client may pass the call its permits (releasePassing),
	// but with replica sync.
	w := wait.NewWaiter("", !c.rsync.mayWait())
	w.Permits = n
	wt := wait.Wait{Op: "acquire", Name: s.name, Channel: s.channel, Local: s.channel, Waiter: w,
		Policy: func(payload string) int {
			c.local.WakeEach(s.channel, fits(payload))
			return 0 // a reconnect still wakes every call, through the hub
		}}
	err = c.waitTries(ctx, wt, func(ctx context.Context) (bool, time.Duration, error) {
		if c.local.TakePassed(w) {
			return true, 0, nil
		}
		ok, err := s.attempt(ctx, n)
		return ok, fallbackRecheck, err
	})
	if err != nil && c.local.TakePassed(w) {
		s.restorePermits(n) // passed as the call gave up
	}
	return err
}

// TryAcquire makes one attempt to take n permits (n must be positive).
// When fewer than n are available it takes none and returns
// ErrNotAcquired, as every Try call of relock does; nil means it took
// them. It never waits for permits; with ReplicaSync.Retry it makes
// the attempt again while too few replicas acknowledge a grant, until ctx
// ends. Other errors are as for Acquire.
func (s *Semaphore) TryAcquire(ctx context.Context, n int) error {
	if err := s.check(ctx, "acquire", n); err != nil {
		return err
	}
	ok, err := s.attempt(ctx, n)
	if err != nil {
		return err
	}
	if !ok {
		return ErrNotAcquired
	}
	return nil
}

// Available returns the number of permits available now (0 when the
// semaphore is not set; negative if a Redisson client reduced the permits
// below what is held).
func (s *Semaphore) Available(ctx context.Context) (int, error) {
	if err := s.check(ctx, "available", 1); err != nil {
		return 0, err
	}
	return s.read(ctx, "available")
}

// Drain takes every available permit and returns how many it took. It
// wakes no waiter. Like Release, it is applied exactly once when it
// returns nil; with replica sync, permits drained that too few replicas
// acknowledged are counted in its result, with an error wrapping
// ErrReplicaSync.
func (s *Semaphore) Drain(ctx context.Context) (int, error) {
	if err := s.check(ctx, "drain", 1); err != nil {
		return 0, err
	}
	v, err := s.writeOnce(ctx, "drain", scripts.SemDrain, positive, func(k scripts.Marked) ([]any, []any) {
		return scripts.SemDrainRequest{Keys: k, MarkerTTL: s.c.argMarkerTTL}.Build()
	})
	return int(v), err
}

// semUndo undoes an acquisition whose reply was lost, or that too few
// replicas acknowledged (door.Undo).
type semUndo struct {
	s      *Semaphore
	n      int
	marker string // the acquisition's request marker
}

func (u *semUndo) Undo(ctx context.Context) {
	c := u.s.c
	keys, args := scripts.SemUndoRequest{Permits: u.s.name, Marker: u.marker, N: u.n, Publish: c.argPublish,
		MarkerTTL: c.argMarkerTTL, Channel: u.s.channel}.Build()
	if err := c.door.Run(ctx, scripts.SemUndo, keys, args...).Err(); err != nil {
		c.cfg.logger.Warn("relock: cannot undo a semaphore acquisition (unanswered, or too few replicas acknowledged it); its permits may stay taken",
			"name", u.s.name, "permits", u.n, "err", err)
	}
}

// attempt runs sem_acquire.lua once (with ReplicaSync.Retry, until enough
// replicas acknowledge a grant). An attempt whose outcome is unknown, or
// that too few replicas acknowledged, is undone before it returns.
func (s *Semaphore) attempt(ctx context.Context, n int) (bool, error) {
	req := scripts.SemAcquireRequest{Keys: s.req.marked(nil), N: n, MarkerTTL: s.c.argMarkerTTL}
	keys, args := req.Build()
	// A try undone for want of replicas leaves its marker saying "undone"
	// (and is answered: the marker can go), so each try after it takes a
	// new marker.
	r, _, err := s.c.acquire(ctx, s.name, scripts.SemAcquire, keys, args, s.undo(n, req.Keys.Marker), isOne, func() ([]any, door.Undo) {
		s.req.done(req.Keys.Marker)
		req.Keys = s.req.marked(nil)
		keys, _ := req.Build()
		return keys, s.undo(n, req.Keys.Marker)
	})
	if errors.Is(err, ErrClosed) {
		return false, ErrClosed
	}
	if err != nil {
		return false, opError(ctx, "acquire", s.name, err)
	}
	if !scripts.Taken(r) {
		return false, nil
	}
	s.req.done(req.Keys.Marker)
	return true, nil
}

// undo returns the undo of an acquisition of n permits with marker.
func (s *Semaphore) undo(n int, marker string) *semUndo {
	return &semUndo{s: s, n: n, marker: marker}
}

// fitting is a release's claim policy for n permits: it claims, oldest
// first, the waiting calls whose requests fit in n together, skipping a
// request too large, as fits does.
func fitting(n int) func(*wait.Waiter) (take, more bool) {
	return func(w *wait.Waiter) (bool, bool) {
		k := w.Permits
		if k <= 0 || k > n {
			return false, true
		}
		n -= k
		return true, n != 0
	}
}

// fits is the wake policy of a message on a semaphore's channel that
// published free permits: it picks, oldest first, the waiting calls they
// can satisfy; each attempts at once. A request too large is skipped, not
// allowed to hold up smaller ones behind it (other clients compete for
// the permits anyway). A count of 0 or less picks every call: nothing was
// freed, but a permit's lease was cut below the earliest expiry the calls
// were given (permit_updatelease.lua), and each must learn the new one. A
// payload that is not a number picks the oldest call.
func fits(payload string) func(*wait.Waiter) bool {
	free, err := strconv.Atoi(payload)
	first, all := true, free <= 0
	return func(w *wait.Waiter) bool {
		switch {
		case err != nil:
			pick := first
			first = false
			return pick
		case all:
			return true
		case w.Permits <= free:
			free -= w.Permits
			return true
		}
		return false
	}
}
