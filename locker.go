package relock

import "context"

// Locker is what every lock of relock offers: the Mutex, and the locks
// that follow its contract. Multi and helpers take any Locker.
type Locker interface {
	// Name returns the lock's name.
	Name() string
	// Lock blocks until the lock is held or ctx ends.
	Lock(ctx context.Context, opts ...LockOption) (*Lease, error)
	// TryLock makes one attempt; a lock held by another gives
	// ErrNotAcquired.
	TryLock(ctx context.Context, opts ...LockOption) (*Lease, error)
}

var _ Locker = (*Mutex)(nil)
var _ Locker = (*ReadLocker)(nil)
var _ Locker = (*WriteLocker)(nil)
var _ Locker = (*FairMutex)(nil)

var (
	_ Locker = (*MultiLock)(nil)
	_ Locker = (*RedLock)(nil)
)
