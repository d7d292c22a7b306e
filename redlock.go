package relock

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/relock-go/relock/internal/watchdog"
)

// RedLock is a lock over N independent Redis masters, one Client each: a
// hold is valid while a quorum of them (N/2+1) hold it, so it survives the
// failure of fewer than half of the masters. Read docs/redlock.md before
// relying on it: its safety rests on timing assumptions, and a master that
// restarts without its data must stay out for a lease before it rejoins.
//
// Each node's hold is an ordinary Mutex hold of the RedLock's name on that
// node's Client, in Redisson's layout, renewed by that Client's watchdog
// (or given a fixed lease by WithLease). An acquisition round tries every
// node at once, each attempt bounded by the attempt timeout (see
// WithAttemptTimeout); it succeeds if a quorum granted the lock and its
// validity, lease − elapsed − (lease/100 + 2ms), is positive. Otherwise
// the round releases what it took; a node whose answer was lost is undone
// by its Mutex.
//
// The lease a RedLock returns reports ErrLockLost (Done closes) once fewer
// than a quorum of its node holds are held: each node hold has its own
// local deadline, so a quorum that can no longer be confirmed in time is
// lost too. The node holds that remain are then no longer renewed.
// Unlock releases every node hold, even when ctx has ended (each within
// its Client's cleanup timeout, as Lease.Unlock): it returns nil if at
// least a quorum were released, and ErrNotHeld if too many were gone for
// that (Err then reports ErrLockLost); node holds whose release failed
// are no longer renewed and expire within their leases. If the outcome
// depends on releases that failed with a Redis or context error, Unlock
// returns that error and may be called again. Extend lengthens the fixed
// lease of every node hold and succeeds if a quorum of them was extended
// (see Lease.Extend).
//
// A RedLock hold has no single fencing token: Token returns 0, and
// Lease.Tokens returns each node's token (0 for a node not held), which
// orders holds per node only; docs/redlock.md shows how a resource can
// fence with them.
//
// A RedLock is safe for concurrent use; its zero value is not usable: call
// NewRedLock.
type RedLock struct {
	name    string
	clients []*Client
	mutexes []*Mutex
	quorum  int
	attempt time.Duration // per-node attempt timeout; 0 picks it from the lease
	err     error         // invalid arguments or options, returned by every call
}

// Bounds of the default per-node attempt timeout.
const (
	minAttemptTimeout = 50 * time.Millisecond
	maxAttemptTimeout = time.Second
)

// redLockRetry is the random pause between the acquisition rounds of Lock.
// A RedLock does not wait through the wait contract (wait.Loop, spin): a
// round spans every node's Client, and no one Client's release channel or
// queue can tell when a quorum may be free.
var redLockRetry = backoff{min: 5 * time.Millisecond, max: 200 * time.Millisecond}

// A RedLockOption configures a RedLock, given to NewRedLock. An invalid
// RedLockOption makes every call on the RedLock fail with
// ErrInvalidOption.
type RedLockOption func(*redLockConfig) error

type redLockConfig struct {
	attempt time.Duration // per-node attempt timeout; 0 picks it from the lease
}

// WithAttemptTimeout bounds the attempt on each node by d, through the
// attempt's context. The default is a tenth of the lease, at least 50ms
// and at most 1s. d must be positive, or every call fails with
// ErrInvalidOption.
//
// go-redis applies a context deadline to a command in flight only with
// Options.ContextTimeoutEnabled; without it a node that hangs (rather than
// refusing connections) holds a round until the client's ReadTimeout.
func WithAttemptTimeout(d time.Duration) RedLockOption {
	return func(c *redLockConfig) error {
		if d <= 0 {
			return fmt.Errorf("%w: redlock attempt timeout %v", ErrInvalidOption, d)
		}
		c.attempt = d
		return nil
	}
}

// NewRedLock returns the RedLock of name over clients, each on its own
// independent master (not replicas of one another, not one cluster);
// NewRedLock keeps its own copy of the slice. No clients, a nil or
// repeated Client, or an invalid name or option make every call fail with
// ErrInvalidName or ErrInvalidOption.
func NewRedLock(name string, clients []*Client, opts ...RedLockOption) *RedLock {
	clients = slices.Clone(clients)
	r := &RedLock{name: name, clients: clients, quorum: len(clients)/2 + 1}
	if r.err = checkName(name); r.err != nil {
		return r
	}
	if len(clients) == 0 {
		r.err = fmt.Errorf("%w: a redlock needs at least one client", ErrInvalidOption)
		return r
	}
	seen := make(map[*Client]bool)
	for i, c := range clients {
		switch {
		case c == nil:
			r.err = fmt.Errorf("%w: redlock client %d is nil", ErrInvalidOption, i)
		case seen[c]:
			r.err = fmt.Errorf("%w: redlock client %d is listed twice", ErrInvalidOption, i)
		}
		if r.err != nil {
			return r
		}
		seen[c] = true
		r.mutexes = append(r.mutexes, c.Mutex(name))
	}
	var cfg redLockConfig
	if r.err = applyOptions(&cfg, opts); r.err != nil {
		return r
	}
	r.attempt = cfg.attempt
	return r
}

// Name returns the lock's name, which is its key on every node.
func (r *RedLock) Name() string { return r.name }

// Quorum returns the number of nodes a hold needs: N/2+1 of N.
func (r *RedLock) Quorum() int { return r.quorum }

// Lock makes acquisition rounds until one gets a quorum or ctx ends,
// pausing a random, growing time (5ms to 200ms) between rounds. Without
// WithLease each node hold is kept alive by its Client's watchdog, and the
// validity is judged against the shortest watchdog timeout of the Clients.
// With a ctx carrying an owner (WithOwner) the lock is reentrant: each
// node re-enters the owner's hold.
//
// When ctx ends the error wraps ctx.Err(), and no node is left held: what
// the round in progress took is released (within each Client's cleanup
// timeout), and attempts whose reply was cut off are undone. Other errors:
// ErrInvalidName, ErrInvalidOption, ErrClosed (any of the Clients closed).
// Errors of single nodes only fail their round.
func (r *RedLock) Lock(ctx context.Context, opts ...LockOption) (*Lease, error) {
	return r.lock(ctx, opts, true)
}

// TryLock makes one acquisition round. Without a quorum it returns an
// error matching ErrNotAcquired, which also wraps the errors of nodes that
// failed. Other errors are as for Lock.
func (r *RedLock) TryLock(ctx context.Context, opts ...LockOption) (*Lease, error) {
	return r.lock(ctx, opts, false)
}

func (r *RedLock) lock(ctx context.Context, opts []LockOption, wait bool) (*Lease, error) {
	if r.err != nil {
		return nil, r.err
	}
	for _, c := range r.clients {
		if err := c.checkOpen(); err != nil {
			return nil, err
		}
	}
	cfg, err := r.clients[0].lockConfig(opts)
	if err != nil {
		return nil, err
	}
	lease := cfg.lease
	if !cfg.fixed {
		for _, c := range r.clients {
			lease = min(lease, c.cfg.watchdog)
		}
	}
	attempt := r.attempt
	if attempt == 0 {
		attempt = min(max(lease/10, minAttemptTimeout), maxAttemptTimeout)
	}
	var timer *time.Timer
	for n := 0; ; n++ {
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("relock: lock %q: %w", r.name, err)
		}
		l, err := r.round(ctx, opts, lease, attempt)
		if l != nil {
			return l, nil
		}
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("relock: lock %q: %w", r.name, err)
		}
		if !wait {
			return nil, err
		}
		d := redLockRetry.delay(n, -1)
		if timer == nil {
			timer = time.NewTimer(d)
			defer timer.Stop()
		} else {
			timer.Reset(d)
		}
		select {
		case <-timer.C:
		case <-ctx.Done():
		}
	}
}

// round tries every node at once and returns the lease if a quorum granted
// the lock in time; otherwise it releases what it took and returns why.
func (r *RedLock) round(ctx context.Context, opts []LockOption, lease, attempt time.Duration) (*Lease, error) {
	held := make([]*Lease, len(r.mutexes))
	errs := make([]error, len(r.mutexes))
	start := time.Now()
	var wg sync.WaitGroup
	for i, m := range r.mutexes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			actx, cancel := context.WithTimeout(ctx, attempt)
			defer cancel()
			held[i], errs[i] = m.TryLock(actx, opts...)
		}()
	}
	wg.Wait()
	validity := lease - time.Since(start) - watchdog.Drift(lease)
	got := 0
	for _, l := range held {
		if l != nil && l.Err() == nil {
			got++
		}
	}
	if got >= r.quorum && validity > 0 {
		return newComposite(r.clients[0], r.name, 0, held, r.quorum), nil
	}
	rollback(ctx, held)
	if got >= r.quorum {
		return nil, fmt.Errorf("relock: lock %q: %w: the round took longer than the lease %v allows", r.name, ErrNotAcquired, lease)
	}
	var failed []error
	for _, err := range errs {
		if err != nil && !errors.Is(err, ErrNotAcquired) {
			failed = append(failed, err)
		}
	}
	err := fmt.Errorf("relock: lock %q: %w: %d of %d nodes, %d needed", r.name, ErrNotAcquired, got, len(r.mutexes), r.quorum)
	if len(failed) > 0 {
		err = fmt.Errorf("%w; failed nodes: %w", err, errors.Join(failed...))
	}
	return nil, err
}

func (r *RedLock) lockIDs() []lockID {
	keys := make([]lockID, len(r.clients))
	for i, c := range r.clients {
		keys[i] = lockID{c, r.name}
	}
	return keys
}
