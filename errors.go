package relock

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/relock-go/relock/internal/door"
)

// Sentinel errors. Match them with errors.Is: relock wraps them with
// context (the lock name, the Redis error) but never replaces them.
var (
	// ErrNotAcquired is returned by every Try call when what it asks for is
	// taken: by TryLock and TryRLock when another owner holds the lock, by
	// the TryAcquire of a Semaphore or PermitSemaphore when too few
	// permits are free. Only a refusal is reported this way; a call that
	// could not ask (Redis unreachable, ctx ended) returns another error.
	ErrNotAcquired = errors.New("relock: not acquired")

	// ErrNotHeld is returned by Lease.Unlock when the hold is no longer in
	// Redis (it expired, was force-unlocked, or this lease was already
	// unlocked), and by Lease.Extend when the lease was unlocked (or its
	// Unlock failed) or Redis no longer holds it.
	ErrNotHeld = errors.New("relock: lock not held")

	// ErrLockLost is returned by Lease.Err once the hold has been lost: a
	// renewal found the key gone or owned by another, no renewal was
	// confirmed before the hold's local deadline, a fixed lease ran out, or
	// the hold expired after its release failed (it is no longer renewed
	// then). Lease.Extend returns it for a lease lost before it could
	// extend it.
	ErrLockLost = errors.New("relock: lock lost")

	// ErrReleased is returned by Lease.Err after a successful Unlock.
	ErrReleased = errors.New("relock: lock released")

	// ErrInvalidName is returned when a lock name is empty, longer than
	// MaxNameLen bytes, or has braces that would put the lock and its
	// companion keys in different cluster hash slots.
	ErrInvalidName = errors.New("relock: invalid name")

	// ErrInvalidOption is returned for an invalid option or argument, such
	// as a zero or negative duration: by New for a Client's Option, by a
	// lock call for its LockOption, by every call on a handle made
	// with an invalid handle option (FairOption, RedLockOption) or
	// argument (NewRedLock's clients), and by Lease.Extend for a duration
	// below 1ms or a lease the watchdog renews.
	ErrInvalidOption = errors.New("relock: invalid option")

	// ErrUnsupportedClient is returned by New for a Redis client relock
	// refuses to lock on, such as a *redis.Ring.
	ErrUnsupportedClient = errors.New("relock: unsupported redis client")

	// ErrUnsupportedServer is returned by New when the server lacks a
	// command relock needs: EVAL or EVALSHA, which every lock call sends,
	// or PUBLISH (SPUBLISH on a Redis 7 cluster), which every release
	// calls from its script, renamed or disabled by rename-command. The
	// error names the command.
	ErrUnsupportedServer = errors.New("relock: unsupported redis server")

	// ErrWrongType is returned when a key a call reads or writes holds
	// another type of value than relock writes there, and nothing is
	// written then: a lock's key that is no hash; a lock's queue of
	// another type, found by an acquisition of the free lock (whose
	// release would fail on it); a fencing counter that holds no number;
	// a Semaphore's, PermitSemaphore's or CountDownLatch's count that is
	// no string of an integer, or a PermitSemaphore's held permits that
	// are no zset, by every call of theirs; an election's log that is no
	// stream, by Campaign before it takes the lock.
	//
	// A lock's key that holds a hash with no TTL and a field no lock
	// writes (an application's record, such as name and email; a lock's
	// fields are owner ids "<uuid>:<n>" with hold counts, relock's own
	// fields and an RWMutex's mode) is no lock either: the lock calls
	// return ErrWrongType at once instead of waiting. Every lock has a
	// TTL, so a hash with one is taken for a lock held by others and
	// waited for until it expires; IsLocked reports true for any key there.
	// ForceUnlock deletes only a lock's hash (owner fields with hold
	// counts, relock's own fields, an RWMutex's mode) and returns
	// ErrWrongType for any other key, deleting nothing.
	ErrWrongType = errors.New("relock: key holds another type of value")

	// ErrOutOfMemory is returned when the server refuses a write because it
	// reached maxmemory (with the noeviction policy).
	ErrOutOfMemory = errors.New("relock: redis out of memory")

	// ErrUpgrade is returned by RWMutex.Lock and TryLock when the calling
	// owner holds the read lock but not the write lock: waiting for the
	// write lock would wait for itself. Nothing is changed; release the
	// read holds first. (A writer may take the read lock: that is a
	// downgrade, and allowed.)
	ErrUpgrade = errors.New("relock: read lock held by the same owner; upgrade would deadlock")

	// ErrUnknownPermit is returned by PermitSemaphore.Release and
	// PermitSemaphore.UpdateLease when no permit of the given id is held:
	// it was released, its lease ran out, or it never existed.
	ErrUnknownPermit = errors.New("relock: unknown permit")

	// ErrLatchNotSet is returned by CountDownLatch.CountDown when the latch
	// has no count to count down: it was never set, or it reached zero
	// already. Nothing is changed.
	ErrLatchNotSet = errors.New("relock: latch not set")

	// ErrReplicaSync is returned by lock calls and the synchronizers'
	// acquisitions on a Client with replica sync (see WithReplicaSync)
	// when fewer replicas than configured acknowledged the acquisition
	// within the timeout, or when the server refuses WAIT (or WAITAOF) and
	// ReplicaSync.Fallback is off; the server's error is wrapped then. The
	// acquisition was released first: no Lease, Permit or permits were
	// passed or granted. It is also returned by the synchronizers' other writes
	// (a Release, a CountDown, ...) when too few replicas acknowledged
	// them: those stay applied on the master, the error also matches
	// ErrUnconfirmed, and they must not be repeated. Refused before
	// anything was sent, they change nothing.
	ErrReplicaSync = errors.New("relock: too few replicas acknowledged")

	// ErrUnconfirmed is matched, with ErrReplicaSync, by the error of a
	// synchronizer write (a Release, a CountDown, ...) that was applied on
	// the master but that too few replicas acknowledged: it stays applied,
	// a failover may lose it, and it must not be repeated. An ErrReplicaSync
	// that does not match ErrUnconfirmed changed nothing: an acquisition
	// released again, or a write refused before it was sent.
	ErrUnconfirmed = errors.New("relock: applied on the master only")

	// ErrNoPermission is returned by New when the Redis user may not run
	// scripts (EVAL, EVALSHA), which every relock primitive needs, or may
	// not publish on relock's channels, as every release does (the error
	// names the command and the channel patterns it lacks), and by any
	// call the server refuses with NOPERM: its ACL denies a command, key
	// or channel relock uses. The server's error is wrapped. The README
	// lists what relock needs as an ACL SETUSER line.
	ErrNoPermission = errors.New("relock: no permission")

	// ErrClosed is returned by every operation of a closed Client, made
	// after Close or cut short by it, Lease.Unlock and Permit.Release
	// included: they send nothing, and the holds they would release stay
	// in Redis until their leases run out. It is also wrapped with
	// ErrLockLost by the leases and permits a Close ended.
	ErrClosed = errors.New("relock: client closed")

	// ErrNoLeader is returned by Election.Leader when the election has no
	// leader.
	ErrNoLeader = errors.New("relock: no leader")

	// ErrInvalidValue is returned for a leader's value longer than
	// MaxValueLen.
	ErrInvalidValue = errors.New("relock: invalid value")
)

// errClosedLost ends the leases and permits a Close cut short: it matches
// both ErrLockLost and ErrClosed.
var errClosedLost = fmt.Errorf("%w: %w", ErrLockLost, ErrClosed)

// isServerError reports whether err is a reply from the server, after
// which the command's effect is known, as opposed to a transport or
// context error after which it is not.
func isServerError(err error) bool { return door.IsServer(err) }

// opError wraps err from a Redis call of operation op on lock name, adding
// ErrWrongType, ErrOutOfMemory or ErrNoPermission where the server's
// reply means that, and ctx's error where the call failed otherwise after
// ctx ended: the call ended because ctx did, whatever the client reported
// (go-redis with ContextTimeoutEnabled reports an I/O timeout).
func opError(ctx context.Context, op, name string, err error) error {
	if !isServerError(err) {
		if cerr := ctx.Err(); cerr != nil && !errors.Is(err, cerr) {
			return fmt.Errorf("relock: %s %q: %w (%w)", op, name, cerr, err)
		}
		return fmt.Errorf("relock: %s %q: %w", op, name, err)
	}
	msg := err.Error()
	switch {
	case strings.Contains(msg, "WRONGTYPE"):
		return fmt.Errorf("relock: %s %q: %w (%w)", op, name, ErrWrongType, err)
	case strings.HasPrefix(msg, "OOM"):
		return fmt.Errorf("relock: %s %q: %w (%w)", op, name, ErrOutOfMemory, err)
	case isNoPerm(err):
		return fmt.Errorf("relock: %s %q: %w (%w)", op, name, ErrNoPermission, err)
	}
	return fmt.Errorf("relock: %s %q: %w", op, name, err)
}
