package relock

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/relock-go/relock/internal/scripts"
	"github.com/relock-go/relock/internal/watchdog"
)

// Permit is one permit of a PermitSemaphore, held since a successful
// Acquire or TryAcquire. Like a Lease, it tells when the hold ends (Done,
// Err) and releases it (Release). A Permit is safe for concurrent use.
type Permit struct {
	ps  *PermitSemaphore
	id  string // 48 hex digits
	raw string // the 24 bytes stored in Redis (see permitID)

	entry atomic.Pointer[watchdog.Entry] // replaced by UpdateLease

	end ending

	mu       sync.Mutex // serialises Release and UpdateLease
	released bool       // a release was confirmed by Redis
	tried    bool       // an earlier release got no answer
}

// ID returns the permit's id: 48 lowercase hex digits, the 24 bytes
// stored in Redis in the form Redisson shows permit ids (Redisson's own
// are 32), so that PermitSemaphore.Release and UpdateLease, or a Redisson
// client, can address it. Its first 32 digits are the Client's uuid.
func (p *Permit) ID() string { return p.id }

// Name returns the name of the permit's semaphore.
func (p *Permit) Name() string { return p.ps.name }

// Done returns a channel that is closed when the hold ends: released,
// lost, expired (WithLease), or cut short by Client.Close.
func (p *Permit) Done() <-chan struct{} { return p.end.done }

// Err returns nil while the permit is held, ErrReleased after Release, and
// ErrLockLost once it is lost: its lease ran out, a renewal found it gone
// (reclaimed, or released by id), or no renewal was confirmed before its
// local deadline. Like Lease.Err, it judges the deadline itself on every
// call.
func (p *Permit) Err() error { return holdErr(p) }

// Context returns a context derived from parent that is cancelled when the
// hold ends; context.Cause then returns what Err returns. Call cancel when
// done with it.
func (p *Permit) Context(parent context.Context) (ctx context.Context, cancel context.CancelFunc) {
	return holdContext(p, parent)
}

func (p *Permit) ending() *ending { return &p.end }

func (p *Permit) judge() { p.ps.c.wd.Check(p.entry.Load()) }

func (p *Permit) watchEntry() (*watchdog.Entry, *watchdog.Watchdog) { return p.entry.Load(), p.ps.c.wd }

// Release gives the permit back and wakes waiters. It returns ErrNotHeld
// if the permit is no longer held (its lease ran out, it was reclaimed or
// released by id, or this Permit was released already). The release goes
// out even when ctx has ended, bounded as Lease.Unlock's is, and stops
// renewal of the permit whatever its outcome: if it fails, the error says
// whether it was not sent, got no answer or was refused, and the permit
// expires within its lease (Done closes, Err reports ErrLockLost), unless
// Release, called again meanwhile, frees it: a retry is never applied
// twice.
//
// With replica sync (see WithReplicaSync), a release too few replicas
// acknowledged returns an error wrapping ErrReplicaSync that says the
// permit was released on the master but not confirmed by enough replicas:
// a failover may bring it back, held by this Permit's id until its lease
// runs out. The Permit is released all the same (Err returns ErrReleased);
// do not call Release again.
func (p *Permit) Release(ctx context.Context) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.released {
		return ErrNotHeld
	}
	c := p.ps.c
	if err := c.checkOpen(); err != nil {
		return opError(ctx, "release", p.ps.name, err) // the permit expires with its lease
	}
	ctx, cancel := c.releaseContext(ctx)
	defer cancel()
	// As for a Lease: a renewal crossing the release is judged by it.
	entry := p.entry.Load()
	c.wd.Changing(entry)
	keys, args := p.ps.releaseRequest(p.raw, "").Build()
	r, err := c.write(ctx, writeCall{name: p.ps.name, script: scripts.PermitRelease, keys: keys,
		args: args, changed: nonZero})
	if err != nil && !isUnconfirmed(err) {
		c.wd.Changed(entry)
		if !isServerError(err) && !errors.Is(err, ErrReplicaSync) {
			p.tried = true
		}
		c.wd.StopRenewal(entry)
		return notReleased(ctx, "release", p.ps.name, err)
	}
	p.released = true
	c.wd.Remove(entry)
	c.wd.Changed(entry)
	if released := scripts.PermitReleasedBy(r); released == scripts.PermitFreed || released == scripts.PermitUnknown && p.tried {
		// After an unanswered attempt, "not held" means that attempt
		// released it.
		p.finish(ErrReleased, "")
		c.stats.released.Add(1)
		if err != nil {
			return opError(ctx, "release", p.ps.name, err)
		}
		return nil
	}
	p.finish(ErrLockLost, "release found the permit gone or expired")
	return ErrNotHeld
}

// UpdateLease gives the permit a fixed lease of d from now, longer or
// shorter than the one it had; the watchdog no longer renews it. d must be
// at least 1ms. It returns ErrNotHeld if the permit is no longer held, and
// ErrLockLost if the permit was lost here (its local deadline passed)
// although Redis still held it: release it then.
//
// With replica sync, an update too few replicas acknowledged returns an
// error wrapping ErrReplicaSync that says it was applied on the master
// only. The permit keeps the fixed lease on the master, but its local
// deadline is the earlier of the old one and the new one, since a replica
// promoted now may have either.
func (p *Permit) UpdateLease(ctx context.Context, d time.Duration) error {
	if err := checkLease(d); err != nil {
		return err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.released {
		return ErrNotHeld
	}
	c := p.ps.c
	sent := c.wd.Now()
	ok, err := p.ps.updateLease(ctx, p.raw, d)
	short := isUnconfirmed(err)
	if err != nil && !short {
		return err
	}
	old := p.entry.Load()
	if !ok {
		c.wd.Remove(old)
		p.finish(ErrLockLost, "lease update found the permit gone")
		return ErrNotHeld
	}
	if !c.wd.Remove(old) {
		return ErrLockLost
	}
	deadline := watchdog.DeadlineFor(sent, d)
	if short {
		deadline = min(deadline, old.Deadline())
	}
	p.watchUntil(d, true, deadline)
	return err
}

// watch starts watching the permit with a new watchdog entry: renewed
// with lease, or only checked when the lease is fixed.
func (p *Permit) watch(lease time.Duration, fixed bool, sent int64) {
	p.watchUntil(lease, fixed, watchdog.DeadlineFor(sent, lease))
}

// watchUntil is watch with the entry's first local deadline given.
func (p *Permit) watchUntil(lease time.Duration, fixed bool, deadline int64) {
	renew := lease
	if fixed {
		renew = 0
	}
	e := &watchdog.Entry{Key: p.ps.timeoutKey, Owner: p.raw, Kind: kindPsem, Group: p.ps.group, Lease: renew, Data: watched(p)}
	p.entry.Store(e)
	p.ps.c.wd.Add(e, deadline)
}

// lost is called through Client.lost when the watchdog declares the
// permit lost.
func (p *Permit) lost(cause error) { holdLost(p, cause) }

// finish records how the hold ended and closes Done, once.
func (p *Permit) finish(err error, cause string) {
	if !p.end.record(err) {
		return
	}
	lost := errors.Is(err, ErrLockLost)
	if lost {
		p.ps.c.stats.lost.Add(1) // before Done closes, as for a Lease
	}
	close(p.end.done)
	if lost {
		p.ps.c.cfg.logger.Warn("relock: permit lost", "name", p.ps.name, "permit", p.id, "cause", cause)
	}
}
