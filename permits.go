package relock

import (
	"context"

	"github.com/relock-go/relock/internal/layout"
	"github.com/relock-go/relock/internal/scripts"
)

// permits is the half that a Semaphore and a PermitSemaphore share: the
// number of free permits, a string under the name in Redisson's layout,
// its channel "redisson_sc:{name}", told the number free by every change,
// and the writes that set and resize it.
type permits struct {
	countName
}

// newPermits returns the shared half of the semaphore name.
func newPermits(c *Client, name string) permits {
	return permits{newCountName(c, name, layout.Companion(layout.SemaphoreChannel, name), layout.SemaphoreRequest)}
}

// TrySetPermits sets the number of free permits to n if the semaphore has
// none set (its key does not exist), and reports whether it did: false
// with a nil error is an answer (permits were set already), not a
// refusal, so it returns a bool where TryAcquire returns ErrNotAcquired;
// the name is Redisson's trySetPermits. n must be positive. With replica
// sync, a count set that too few replicas acknowledged is reported as set,
// with an error wrapping ErrReplicaSync (see AddPermits).
func (p *permits) TrySetPermits(ctx context.Context, n int) (bool, error) {
	return p.trySet(ctx, "set permits", scripts.SemTrySetPermits, n)
}

// AddPermits resizes the semaphore by n free permits, which may be
// negative, as Redisson's addPermits does: a positive n wakes the waiters
// the permits can satisfy; a negative n takes free permits away, and the
// number free may drop below zero, so that acquisitions wait until enough
// permits are released (or, in a PermitSemaphore, expire). n must not be
// 0. A Semaphore's Release, not AddPermits, returns permits that were
// acquired.
//
// It is applied exactly once when it returns nil. With replica sync (see
// WithReplicaSync), it returns once enough replicas acknowledged it; when
// too few did, it returns an error wrapping ErrReplicaSync that says the
// permits were added on the master but not confirmed by enough replicas (a
// failover may lose them). Do not repeat such a call; ReplicaSync.Retry
// does not apply to it.
func (p *permits) AddPermits(ctx context.Context, n int) error {
	if err := p.check(ctx, "add permits", max(n, -n)); err != nil {
		return err
	}
	return p.add(ctx, "add permits", n)
}

// add adds n (possibly negative) to the free permits with sem_release.lua,
// which wakes the waiters on the channel: a Semaphore's Release, and the
// AddPermits of both semaphores; op names the call in errors.
func (p *permits) add(ctx context.Context, op string, n int) error {
	_, err := p.writeOnce(ctx, op, scripts.SemRelease, always, func(k scripts.Marked) ([]any, []any) {
		return scripts.SemReleaseRequest{Keys: k, N: n, Publish: p.c.argPublish, MarkerTTL: p.c.argMarkerTTL, Channel: p.channel}.Build()
	})
	return err
}
