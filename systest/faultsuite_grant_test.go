package systest

import (
	"context"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/history"
)

// acquirer is what a workload's worker takes a hold of: a lock, one side
// of a read-write lock, or a permit of a semaphore.
type acquirer interface {
	Name() string
	// acquire blocks until it holds, or ctx ends.
	acquire(ctx context.Context, opts ...relock.LockOption) (grant, error)
	// record records in rec that who began the hold g, as the kind of hold
	// it is: exclusive, shared, or one of a semaphore's permits.
	record(rec *history.Recorder, who string, g grant) *history.Hold
}

// grant is one hold as a workload sees it: a Lease, or a permit.
type grant interface {
	Name() string
	Done() <-chan struct{}
	Err() error
	Unlock(ctx context.Context) error
}

// locking takes a lock exclusively.
type locking struct{ relock.Locker }

func (m locking) acquire(ctx context.Context, opts ...relock.LockOption) (grant, error) {
	l, err := m.Lock(ctx, opts...)
	if err != nil {
		return nil, err
	}
	return l, nil
}

func (locking) record(rec *history.Recorder, who string, g grant) *history.Hold {
	return rec.Begin(who, g.Name(), g.(*relock.Lease).Token())
}

// reading takes the shared side of a read-write lock.
type reading struct{ locking }

func (reading) record(rec *history.Recorder, who string, g grant) *history.Hold {
	return rec.BeginShared(who, g.Name(), g.(*relock.Lease).Token())
}

// permitting takes one permit of a PermitSemaphore of n permits.
type permitting struct {
	*relock.PermitSemaphore
	n int
}

func (ps permitting) acquire(ctx context.Context, opts ...relock.LockOption) (grant, error) {
	p, err := ps.Acquire(ctx, opts...)
	if err != nil {
		return nil, err
	}
	return permitGrant{p}, nil
}

func (ps permitting) record(rec *history.Recorder, who string, g grant) *history.Hold {
	return rec.BeginCounted(who, g.Name(), ps.n)
}

// permitGrant is a Permit as a grant: Unlock releases it.
type permitGrant struct{ *relock.Permit }

func (p permitGrant) Unlock(ctx context.Context) error { return p.Release(ctx) }

// semaphoring takes one permit of a Semaphore of n permits. Its permits
// have no holder, so they are never lost, and a Release whose outcome is
// unknown may return a permit twice if repeated: it is for scenarios
// whose commands do not fail.
type semaphoring struct {
	*relock.Semaphore
	n int
}

func (s semaphoring) acquire(ctx context.Context, opts ...relock.LockOption) (grant, error) {
	if len(opts) > 0 {
		panic("a Semaphore takes no LockOption")
	}
	if err := s.Acquire(ctx, 1); err != nil {
		return nil, err
	}
	return semGrant{s.Semaphore}, nil
}

func (s semaphoring) record(rec *history.Recorder, who string, g grant) *history.Hold {
	return rec.BeginCounted(who, g.Name(), s.n)
}

// semGrant is one permit taken from a Semaphore: never lost (Done never
// closes, Err is nil); Unlock releases one permit.
type semGrant struct{ s *relock.Semaphore }

func (g semGrant) Name() string                     { return g.s.Name() }
func (semGrant) Done() <-chan struct{}              { return nil }
func (semGrant) Err() error                         { return nil }
func (g semGrant) Unlock(ctx context.Context) error { return g.s.Release(ctx, 1) }
