package relock

import (
	"context"
	"time"

	"github.com/relock-go/relock/internal/door"
	"github.com/relock-go/relock/internal/layout"
)

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

// ownLocker is what every locker of relock's provides: a Locker that names
// the locks it takes, so that Multi refuses a lock listed twice. The
// compiler checks each one here.
type ownLocker interface {
	Locker
	identified
}

var (
	_ ownLocker = (*Mutex)(nil)
	_ ownLocker = (*FairMutex)(nil)
	_ ownLocker = (*ReadLocker)(nil)
	_ ownLocker = (*WriteLocker)(nil)
	_ ownLocker = (*MultiLock)(nil)
	_ ownLocker = (*RedLock)(nil)
)

// lockName is what the handles of Mutex, FairMutex and RWMutex start with:
// the Client, the name and its companion keys, what is wrong with them,
// and the calls that only read the lock's hash.
type lockName struct {
	c       *Client
	name    string
	channel string // the release channel
	group   int    // the name's slot
	err     error  // an invalid name or option, returned by every call

	argChannel any // channel, boxed once: the scripts take it as an argument

	// fencing keys: the slot's counter and the lock's own token key ("":
	// the Client keeps none, see Client.tokenKeys)
	counter, named string
}

// setChannel sets the lock's release channel (see lockName.channel).
func (h *lockName) setChannel(channel string) {
	h.channel, h.argChannel = channel, channel
}

// Name returns the lock's name, which is also its Redis key.
func (h *lockName) Name() string { return h.name }

// IsLocked reports whether anyone holds the lock (in either mode, for an
// RWMutex): whether its key exists, whatever it holds (see ErrWrongType).
func (h *lockName) IsLocked(ctx context.Context) (bool, error) {
	if err := h.check(); err != nil {
		return false, err
	}
	return h.c.isLocked(ctx, h.name)
}

// TTL returns the time the lock has left, like Redis PTTL of its hash: -2ns
// when the lock is not held, -1ns when it has no expiry. For an RWMutex
// that is the longest of its holds' (a reader's own hold may end sooner).
func (h *lockName) TTL(ctx context.Context) (time.Duration, error) {
	if err := h.check(); err != nil {
		return 0, err
	}
	return h.c.ttl(ctx, h.name)
}

func (h *lockName) check() error {
	if h.err != nil {
		return h.err
	}
	return h.c.checkOpen()
}

// isLocked reports whether the lock hash name exists.
func (c *Client) isLocked(ctx context.Context, name string) (bool, error) {
	n, err := c.door.Command(ctx, door.Cmd{Args: []any{"exists", name}, Key: 1}).Int64()
	if err != nil {
		return false, opError(ctx, "is locked", name, err)
	}
	return n == 1, nil
}

// ttl returns the lock hash's PTTL.
func (c *Client) ttl(ctx context.Context, name string) (time.Duration, error) {
	ms, err := c.door.Command(ctx, door.Cmd{Args: []any{"pttl", name}, Key: 1}).Int64()
	if err != nil {
		return 0, opError(ctx, "ttl", name, err)
	}
	if ms < 0 {
		return time.Duration(ms), nil // -1 no expiry, -2 no key, as Redis says
	}
	return time.Duration(ms) * time.Millisecond, nil
}

// tokenKeys returns the fencing keys of the lock name: the counter of its
// slot and, for a Client with WithPerNameTokens, its own token key; named
// is "" for any other Client, whose scripts neither read nor write that
// key, and so do not have it among their KEYS (see fence.lua and
// scripts.LockKeys).
func (c *Client) tokenKeys(name string) (counter, named string) {
	counter = layout.Fencing(name, c.cluster)
	if c.cfg.perNameTokens {
		named = layout.Companion(layout.Token, name)
	}
	return counter, named
}
