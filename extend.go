package relock

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/relock-go/relock/internal/watchdog"
)

// Extend makes a hold taken with WithLease last at least d from now, as
// other lock libraries' Extend or Refresh do. In Redis the lock's expiry
// becomes d from now unless it is later already: Extend never shortens
// it, since another hold of the same owner may need it. The lease's local
// deadline, which Done and Err follow, moves to d from when Extend was
// sent, less the drift margin (see docs/design.md), if that is later. d
// must be at least 1ms, or Extend returns ErrInvalidOption.
//
// A lease kept by the watchdog (taken without WithLease) is renewed
// already: Extend refuses it with ErrInvalidOption, sending nothing.
//
// Extend returns an error wrapping ErrNotHeld when the lease was unlocked
// (or its Unlock failed), and when Redis no longer holds it (the lease is
// then lost); one wrapping ErrLockLost when the lease was lost before, or
// while Extend waited for Redis (its local deadline passed: unlock it
// then); and ErrClosed once the Client is closed. After a Redis
// or context error the lease keeps its deadline and Extend may be called
// again. With replica sync, an extension too few replicas acknowledged
// returns an error matching ErrUnconfirmed: Redis's master has it, but the
// lease keeps its old deadline, since a replica promoted now may not.
//
// Each lease keeps its own deadline: a re-entry of the lock with a longer
// WithLease keeps the lock longer in Redis, but the earlier lease still
// reports ErrLockLost at its own deadline unless it is extended too. A
// reader's Extend lengthens every read hold of its owner on that lock,
// which Redis keeps together.
//
// The lease of a MultiLock or RedLock extends every member hold at once,
// after checking that every member has a fixed lease (nothing is sent
// otherwise). It succeeds when every member (a MultiLock) or a quorum of
// them (a RedLock) was extended. Otherwise the members extended keep their
// new deadlines, which cannot be taken back, and the others their old
// ones: the lease as a whole keeps its old deadline, and is lost at it.
func (l *Lease) Extend(ctx context.Context, d time.Duration) error {
	if err := checkLease(d); err != nil {
		return err
	}
	if l.parts != nil {
		return l.parts.extend(ctx, l, d)
	}
	return l.extend(ctx, d)
}

// extend is Extend of a single hold.
func (l *Lease) extend(ctx context.Context, d time.Duration) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.extendable(); err != nil {
		return err
	}
	c := l.c
	if err := c.checkOpen(); err != nil {
		return err
	}
	if l.confirmed != nil {
		// A hold passed on in process is its owner's in Redis once the
		// switch that passed it is answered.
		select {
		case <-l.confirmed:
		case <-ctx.Done():
			return opError(ctx, "extend", l.name, ctx.Err())
		}
	}
	entry := l.entry
	probe := &watchdog.Entry{Key: entry.Key, Owner: entry.Owner, Kind: entry.Kind, Group: entry.Group, Lease: d}
	call := newRenewCall([]*watchdog.Entry{probe}, 0, func(e *watchdog.Entry) time.Duration { return e.Lease })
	sent := c.wd.Now()
	c.sendRenewals(ctx, []*renewCall{call})
	held, err := call.Reply.Int64Slice()
	switch {
	case err != nil:
		return opError(ctx, "extend", l.name, err)
	case len(held) != 1:
		return fmt.Errorf("relock: extend %q: unexpected reply %v", l.name, held)
	case held[0] != 1:
		c.wd.Lose(entry, watchdog.ErrGone)
		return fmt.Errorf("relock: extend %q: %w", l.name, ErrNotHeld)
	case call.short:
		return &unconfirmedError{err: fmt.Errorf("relock: extend %q: %w: too few replicas acknowledged it; the lease keeps its deadline", l.name, ErrReplicaSync)}
	}
	entry.Extend(watchdog.DeadlineFor(sent, d))
	if c.wd.Check(entry) {
		// Lost before the answer came: a new deadline comes too late.
		return fmt.Errorf("relock: extend %q: %w", l.name, l.Err())
	}
	return nil
}

// extendable returns why Extend refuses l, a single hold, before sending
// anything, or nil. The caller holds l.mu.
func (l *Lease) extendable() error {
	if l.released {
		return fmt.Errorf("relock: extend %q: %w", l.name, ErrNotHeld)
	}
	if err := l.Err(); err != nil {
		return fmt.Errorf("relock: extend %q: %w", l.name, err)
	}
	if err := l.fixedLease(); err != nil {
		return err
	}
	if l.entry.Stopped() {
		return fmt.Errorf("relock: extend %q: %w: its Unlock failed", l.name, ErrNotHeld)
	}
	return nil
}

// fixedLease refuses a single hold that the watchdog renews.
func (l *Lease) fixedLease() error {
	if l.hold != nil || l.entry.Lease != 0 {
		return fmt.Errorf("%w: extend %q: the watchdog renews it; Extend is for a lease taken WithLease", ErrInvalidOption, l.name)
	}
	return nil
}

// extend extends every member hold of l, a composite lease, at once (see
// Lease.Extend).
func (p *parts) extend(ctx context.Context, l *Lease, d time.Duration) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.released {
		return fmt.Errorf("relock: extend %q: %w", l.name, ErrNotHeld)
	}
	if err := l.Err(); err != nil {
		return fmt.Errorf("relock: extend %q: %w", l.name, err)
	}
	for _, m := range p.members {
		if m == nil {
			continue
		}
		if err := m.fixedLease(); err != nil {
			return fmt.Errorf("relock: extend %q: %w", l.name, err)
		}
	}
	errs := make([]error, len(p.members))
	var wg sync.WaitGroup
	for i, m := range p.members {
		if m == nil {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = m.extend(ctx, d)
		}()
	}
	wg.Wait()
	extended, all := 0, 0
	var first error
	for i, m := range p.members {
		if m == nil {
			continue
		}
		all++
		if errs[i] == nil {
			extended++
		} else if first == nil {
			first = errs[i]
		}
	}
	if extended >= p.quorum {
		return nil
	}
	p.check(l)
	return fmt.Errorf("relock: extend %q: %d of %d member holds extended, %d needed: %w", l.name, extended, all, p.quorum, first)
}
