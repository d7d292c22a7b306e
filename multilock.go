package relock

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"sort"
	"strings"
	"time"
)

// MultiLock holds several locks as one: all of them or none. Its members
// are any Lockers (Mutexes and the other locks of relock, even other
// MultiLocks or RedLocks), on any Clients, cluster slots or deployments. A
// MultiLock is safe for concurrent use; its zero value is not usable: call
// Multi.
//
// # No deadlock between MultiLocks
//
// A MultiLock never waits for a member while it holds another. Each round
// it takes one member with a blocking Lock while it holds nothing, then
// tries every other member once (TryLock), in a canonical order (by name).
// If one is held by someone else, it releases everything it took and
// starts a new round that waits for that member first: at once the first
// time, after a short random pause (up to 50ms) later on. Two MultiLocks
// over overlapping sets, in any order, therefore never wait for each other
// in a cycle, even when some members are also held outside them by a
// reentrant owner (where an ordering alone can deadlock). Under heavy
// contention a MultiLock may go through several rounds; the random pauses
// keep two of them from repeating the same collision.
//
// # The lease
//
// Lock and TryLock return one Lease for all members:
//
//   - Done closes, and Err reports ErrLockLost, as soon as any member hold
//     is lost; the other members are then no longer renewed and expire
//     with their leases, unless Unlock frees them at once.
//   - Unlock releases every member, even when ctx has ended (each within
//     its Client's cleanup timeout, as Lease.Unlock). It returns nil if
//     every member was released, and ErrNotHeld if any member was no
//     longer held (expired, deleted, lost): the others are released all
//     the same. If a release fails with a Redis or context error and no
//     member was gone, Unlock returns that error; the members not released
//     are no longer renewed and expire within their leases (the lease is
//     then lost), and Unlock may be called again to free them at once.
//   - Extend lengthens every member's fixed lease (see Lease.Extend).
//   - Token returns the first member's token (in the order given to Multi);
//     Lease.Tokens returns every member's token, in that order.
type MultiLock struct {
	name    string
	members []Locker // in the order given
	order   []int    // indexes into members, in canonical order
	err     error    // invalid members, returned by every call
}

// Multi returns a MultiLock over lockers. Its name is the members' names
// joined by commas. No members, a nil member, or a lock listed twice (the
// same name on the same Client, even inside a nested MultiLock) make every
// call fail with ErrInvalidOption; a member with an invalid name or option
// makes every call fail with that member's error (ErrInvalidName,
// ErrInvalidOption). Either way the calls fail before any I/O.
//
// Two Clients on one Redis deployment are two Clients to relock: the same
// name through both is the same lock, and a MultiLock over both can never
// be acquired. Give each deployment one Client.
func Multi(lockers ...Locker) *MultiLock {
	ml := &MultiLock{members: append([]Locker(nil), lockers...)}
	if ml.err = checkMembers(lockers); ml.err != nil {
		return ml
	}
	names := make([]string, len(lockers))
	for i, l := range lockers {
		names[i] = l.Name()
		ml.order = append(ml.order, i)
	}
	ml.name = strings.Join(names, ",")
	sort.SliceStable(ml.order, func(a, b int) bool { return names[ml.order[a]] < names[ml.order[b]] })
	return ml
}

func checkMembers(lockers []Locker) error {
	if len(lockers) == 0 {
		return fmt.Errorf("%w: a multi-lock needs at least one member", ErrInvalidOption)
	}
	keys := make(map[lockID]bool)
	same := make(map[Locker]bool) // lockers that cannot name their keys, by identity
	for i, l := range lockers {
		if l == nil {
			return fmt.Errorf("%w: multi-lock member %d is nil", ErrInvalidOption, i)
		}
		if v := reflect.ValueOf(l); v.Kind() == reflect.Pointer && v.IsNil() {
			return fmt.Errorf("%w: multi-lock member %d is a nil %T", ErrInvalidOption, i, l)
		}
		if v, ok := l.(validated); ok {
			if err := v.invalid(); err != nil {
				return fmt.Errorf("multi-lock member %d: %w", i, err)
			}
		}
		k, ok := l.(identified)
		if !ok {
			if reflect.TypeOf(l).Comparable() {
				if same[l] {
					return fmt.Errorf("%w: multi-lock member %q is listed twice", ErrInvalidOption, l.Name())
				}
				same[l] = true
			}
			continue
		}
		for _, key := range k.lockIDs() {
			if keys[key] {
				return fmt.Errorf("%w: multi-lock takes %q on one Client twice", ErrInvalidOption, key.name)
			}
			keys[key] = true
		}
	}
	return nil
}

// validated is implemented by relock's lockers: the error every call of an
// invalid one returns (a bad name or option), so that Multi refuses it
// before any member does I/O.
type validated interface {
	invalid() error
}

func (ml *MultiLock) invalid() error  { return ml.err }
func (r *RedLock) invalid() error     { return r.err }
func (h *lockName) invalid() error    { return h.err }
func (r *ReadLocker) invalid() error  { return r.rw.invalid() }
func (w *WriteLocker) invalid() error { return w.rw.invalid() }

func (rw *RWMutex) invalid() error {
	if rw == nil {
		return nil // a zero ReadLocker or WriteLocker: its own calls fail
	}
	return rw.err
}

// Name returns the members' names joined by commas.
func (ml *MultiLock) Name() string { return ml.name }

// Lock blocks until every member is held, ctx ends, or an error occurs.
// Options apply to every member (WithLease gives each member that fixed
// lease). With a ctx carrying an owner (WithOwner) each member is taken
// for that owner, so a MultiLock is reentrant member by member.
//
// Whatever ends the call early, no member is left held: what a round took
// is released (within each Client's cleanup timeout, even after ctx
// ended), and a member a release cannot reach is no longer renewed and
// expires with its lease. When ctx ends the error wraps ctx.Err(); other
// errors are those of the members' Lock and TryLock, and ErrInvalidOption
// for invalid members.
func (ml *MultiLock) Lock(ctx context.Context, opts ...LockOption) (*Lease, error) {
	return ml.lock(ctx, opts, true)
}

// TryLock makes one attempt on each member, in the canonical order, and
// stops at the first held by another owner: it then releases what it
// took and returns an error matching ErrNotAcquired. Other errors are as
// for Lock.
func (ml *MultiLock) TryLock(ctx context.Context, opts ...LockOption) (*Lease, error) {
	return ml.lock(ctx, opts, false)
}

func (ml *MultiLock) lock(ctx context.Context, opts []LockOption, wait bool) (*Lease, error) {
	if ml.err != nil {
		return nil, ml.err
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("relock: lock %q: %w", ml.name, err)
	}
	held := make([]*Lease, len(ml.members))
	first := ml.order[0]
	for round := 0; ; round++ {
		busy, err := ml.round(ctx, opts, wait, first, held)
		if err == nil {
			return newComposite(held[0].c, ml.name, held[0].Token(), held, len(held)), nil
		}
		rollback(ctx, held)
		if busy < 0 || !wait {
			return nil, err
		}
		first = busy
		if round > 0 {
			if err := ml.pause(ctx, round); err != nil {
				return nil, err
			}
		}
	}
}

// round takes member first (by a blocking Lock when wait is set), then
// tries every other member once in canonical order, filling held. It
// returns the index of a member held by another owner, with an error
// matching ErrNotAcquired, or -1 and any other error.
func (ml *MultiLock) round(ctx context.Context, opts []LockOption, wait bool, first int, held []*Lease) (int, error) {
	take := func(i int, block bool) (int, error) {
		var err error
		if block {
			held[i], err = ml.members[i].Lock(ctx, opts...)
		} else {
			held[i], err = ml.members[i].TryLock(ctx, opts...)
		}
		switch {
		case err == nil && held[i] == nil:
			return -1, fmt.Errorf("relock: lock %q: member %q returned no lease", ml.name, ml.members[i].Name())
		case err == nil:
			return -1, nil
		case errors.Is(err, ErrNotAcquired):
			return i, fmt.Errorf("relock: lock %q: member %q: %w", ml.name, ml.members[i].Name(), err)
		}
		return -1, err
	}
	if busy, err := take(first, wait); err != nil {
		return busy, err
	}
	for _, i := range ml.order {
		if i == first {
			continue
		}
		if busy, err := take(i, false); err != nil {
			return busy, err
		}
	}
	return -1, nil
}

// pause sleeps a random time, longer on later rounds (at most 50ms), so
// that two MultiLocks colliding on the same members fall out of step.
func (ml *MultiLock) pause(ctx context.Context, round int) error {
	bound := min(time.Millisecond<<min(round, 6), 50*time.Millisecond)
	t := time.NewTimer(rand.N(bound) + 1)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("relock: lock %q: %w", ml.name, ctx.Err())
	}
}

func (ml *MultiLock) lockIDs() []lockID {
	var keys []lockID
	for _, l := range ml.members {
		if k, ok := l.(identified); ok {
			keys = append(keys, k.lockIDs()...)
		}
	}
	return keys
}
