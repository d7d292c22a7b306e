package relock

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"

	"github.com/relock-go/relock/internal/scripts"
	"github.com/relock-go/relock/internal/wait"
	"github.com/relock-go/relock/internal/watchdog"
)

// Lease is one successful acquisition: one hold of a lock. It tells when
// the hold ends (Done, Err) and releases it (Unlock). A Lease is safe for
// concurrent use.
type Lease struct {
	c         *Client
	rel       releaser
	name      string
	field     string // the hold's field in Redis: the owner id, or "<owner>:write" for an RWMutex writer
	fieldArg  any    // field boxed once, for a release's arguments; nil when not yet
	reentrant bool
	renewal   uint8 // how the watchdog renews it: kindMutex, or kindRead for a reader
	token     uint64

	entry *watchdog.Entry // whose deadline and loss this lease follows
	own   watchdog.Entry  // the entry of a lease not sharing a hold
	hold  *hold           // the shared hold of a reentrant watchdog lease

	end ending

	mu       sync.Mutex // serialises Unlock
	released bool       // a release was confirmed by Redis
	tried    bool       // an earlier release got no answer
	request  string     // id of the release request, for idempotent retries

	parts *parts // the member holds of a composite lease (MultiLock, RedLock)

	// A Mutex or FairMutex hold passed on in process (pass.go): the
	// Client's run of holds it belongs to, nil for any other hold; and a
	// channel closed once Redis has answered the switch that made it the
	// holder there (nil for a hold Redis had before the lease was made).
	run       *wait.Run
	confirmed chan struct{}
	unwanted  bool // passed to a call that had gone: never passed on again

	endMu sync.Mutex
	ended bool     // finish has run
	onEnd []func() // called once when the lease ends (see whenDone)
}

// arg returns the hold's field as a command argument.
func (l *Lease) arg() any {
	if l.fieldArg != nil {
		return l.fieldArg
	}
	return l.field
}

// releaser is the primitive behind a Lease.
type releaser interface {
	// release removes one hold of l's owner and says what it did.
	release(ctx context.Context, l *Lease) (releaseResult, error)
	// kind names the primitive in traces: "mutex", "fair", "rw".
	kind() string
}

// releaseResult is what a release did with a hold.
type releaseResult uint8

// What a release did.
const (
	// notHeld: the owner held nothing (expired, deleted or never held).
	notHeld releaseResult = iota
	// stillHeld: one hold released; the lock is still held, by the
	// owner's other holds or, for a read-write lock, by the other side.
	stillHeld
	// freed: the last hold released, and the lock is free.
	freed
	// passed: the last hold released, and the lock gone on to a waiter:
	// granted in Redis, or passed on in process.
	passed
)

// releasedBy is what a release script's reply says it did.
func releasedBy(r scripts.UnlockReply) releaseResult {
	switch r.Released {
	case scripts.StillHeld:
		return stillHeld
	case scripts.Freed:
		return freed
	case scripts.GrantedOther, scripts.Granted:
		return passed
	}
	return notHeld
}

// Name returns the name of the lock.
func (l *Lease) Name() string { return l.name }

// Token returns the fencing token of this hold: a number that grows with
// every fresh acquisition of the lock's name. A re-entry by the same owner
// carries the token of the hold it re-entered. Hand it to the resource
// you protect so it can refuse a holder older than the last it saw.
// A MultiLock lease carries its first member's token, a RedLock lease 0;
// see Tokens.
func (l *Lease) Token() uint64 { return l.token }

// Done returns a channel that is closed when the hold ends: unlocked, lost,
// expired (WithLease, or after a release that failed), or cut short by
// Client.Close.
func (l *Lease) Done() <-chan struct{} { return l.end.done }

// Err returns nil while the lease is held, ErrReleased after Unlock, and
// ErrLockLost once the hold is lost. Err judges the hold's local deadline
// itself on every call, so a process that resumes after a long pause sees
// ErrLockLost at once, before any timer has had a chance to run.
func (l *Lease) Err() error { return holdErr(l) }

// Context returns a context derived from parent that is cancelled when the
// hold ends; context.Cause then returns what Err returns. Call cancel when
// done with it.
func (l *Lease) Context(parent context.Context) (ctx context.Context, cancel context.CancelFunc) {
	return holdContext(l, parent)
}

func (l *Lease) ending() *ending { return &l.end }

func (l *Lease) judge() {
	if l.parts != nil {
		l.parts.check(l)
	} else {
		l.c.wd.Check(l.entry)
	}
}

func (l *Lease) watchEntry() (*watchdog.Entry, *watchdog.Watchdog) { return l.entry, l.c.wd }

// Unlock releases this hold. It returns ErrNotHeld if the hold is no longer
// in Redis (it expired, was deleted, or this lease was unlocked already);
// a reentrant owner's other holds are never touched.
//
// The release goes out even when ctx has ended: it runs with ctx's values
// but not its cancellation, bounded by the Client's cleanup timeout (see
// WithCleanupTimeout), or by ctx's deadline if that is later, so that
// `defer lease.Unlock(r.Context())` frees the lock after the request was
// cancelled. (A ctx that can never end, such as context.Background, is
// bounded by the Redis client's own timeouts; so is a release the server
// does not answer at all, where the go-redis client does not apply
// context deadlines: see its Options.ContextTimeoutEnabled.) Unlock stops renewal of
// the hold whatever its outcome. If the release fails, the error says
// whether it was not sent, got no answer, or was refused by the server,
// and the hold is no longer renewed: it expires within its lease, when
// Done closes and Err reports ErrLockLost (a reentrant owner's lock is
// renewed for as long as another lease of the owner holds it). Until then
// Unlock may be called again to free it at once: a retry is never applied
// twice. MultiLock and RedLock describe how the lease of several holds is
// unlocked.
//
// The Unlock of a Mutex, FairMutex or RWMutex write hold may pass the lock
// straight to another waiting Lock call of the same Client, before Redis
// has answered (docs/design.md, "Passing on in process"): it then returns
// once that call holds it, and if Redis finds the hold gone after all,
// that call's lease reports ErrLockLost, not this Unlock.
func (l *Lease) Unlock(ctx context.Context) error {
	if l.parts != nil {
		return l.parts.unlock(ctx, l)
	}
	if l.c.cfg.tracer != nil {
		return l.c.traceUnlock(ctx, l, l.rel.kind(), l.unlock)
	}
	return l.unlock(ctx)
}

// unlock is Unlock of a single hold.
func (l *Lease) unlock(ctx context.Context) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.released {
		return ErrNotHeld
	}
	if err := l.c.checkOpen(); err != nil {
		return opError(ctx, "unlock", l.name, err) // the hold expires with its lease
	}
	ctx, cancel := l.c.releaseContext(ctx)
	defer cancel()
	if l.reentrant && l.request == "" {
		l.request = l.c.id + ":" + strconv.FormatUint(ownerSeq.Add(1), 10)
	}
	// A renewal that crosses the release on the wire finds the hold gone:
	// the release's answer tells instead (see watchdog.Changing).
	entry := l.entry
	l.c.wd.Changing(entry)
	res, err := l.rel.release(ctx, l)
	if err != nil {
		l.c.wd.Changed(entry)
		if !isServerError(err) && !errors.As(err, new(unsent)) {
			l.tried = true
		}
		l.abandon()
		return notReleased(ctx, "unlock", l.name, err)
	}
	l.released = true
	l.unwatch()
	l.c.wd.Changed(entry)
	if res == notHeld && !l.tried {
		l.finish(ErrLockLost, "unlock found the hold gone")
		return ErrNotHeld
	}
	// After an unanswered attempt, "not held" means that attempt released it.
	l.finish(ErrReleased, "")
	l.c.stats.released.Add(1)
	return nil
}

// notReleased is the error of a release of op on name that failed with
// err: what became of it, and of the hold, which is no longer renewed.
func notReleased(ctx context.Context, op, name string, err error) error {
	if errors.Is(err, ErrClosed) {
		return opError(ctx, op, name, err) // Close has ended the hold
	}
	what := "no answer, so it may have been applied"
	switch {
	case isServerError(err):
		what = "refused by the server"
	case errors.As(err, new(unsent)) || errors.Is(err, ErrReplicaSync):
		what = "not sent" // replica sync refuses before it sends
	}
	return fmt.Errorf("%w; %s: the hold is no longer renewed and expires within its lease", opError(ctx, op, name, err), what)
}

// unsent is the error of a release that ended before sending anything,
// waiting for the answers to the switches of its run (awaitConfirmed): a
// later try's "not held" then means what it says.
type unsent struct{ err error }

func (e unsent) Error() string { return e.err.Error() }
func (e unsent) Unwrap() error { return e.err }

// awaitConfirmed waits until Redis has answered the switch that made the
// hold its holder there, if it was passed on in process, and every other
// switch of its run (pass.go), so that no other write about the lock
// overtakes them.
func (l *Lease) awaitConfirmed(ctx context.Context) error {
	if l.run == nil {
		return nil
	}
	if l.confirmed != nil {
		select {
		case <-l.confirmed:
		case <-ctx.Done():
			return unsent{ctx.Err()}
		}
	}
	if err := l.run.Settled(ctx); err != nil {
		return unsent{err}
	}
	return nil
}

// lost is called by the watchdog when the hold is lost.
func (l *Lease) lost(cause error) { holdLost(l, cause) }

// finish records how the lease ended and closes Done, once.
func (l *Lease) finish(err error, cause string) {
	if !l.end.record(err) {
		return
	}
	if l.parts != nil && errors.Is(err, ErrLockLost) {
		// A lost composite's surviving members are no longer renewed
		// (they expire with their leases unless Unlock frees them first),
		// before Done wakes anyone.
		for _, m := range l.parts.members {
			drop(m)
		}
	}
	lost := errors.Is(err, ErrLockLost)
	if lost && l.parts == nil { // a composite's members count for it
		// Counted before Done closes, so that whoever wakes on Done sees it.
		l.c.stats.lost.Add(1)
	}
	close(l.end.done)
	if lost {
		l.c.cfg.logger.Warn("relock: lock lost", "name", l.name, "owner", l.field, "token", l.token, "cause", cause)
	}
	l.endMu.Lock()
	l.ended = true
	fns := l.onEnd
	l.onEnd = nil
	l.endMu.Unlock()
	for _, f := range fns {
		f()
	}
}

// whenDone arranges for f to be called once the lease has ended, from
// whichever goroutine ends it; at once if it has ended already. Composite
// leases follow their members this way, without a goroutine each.
func (l *Lease) whenDone(f func()) {
	l.endMu.Lock()
	if !l.ended {
		l.onEnd = append(l.onEnd, f)
		l.endMu.Unlock()
		return
	}
	l.endMu.Unlock()
	f()
}

// abandon stops renewing this hold after its release failed: it stays
// watched until its local deadline, when it is lost, unless a retry of
// Unlock frees it first. A reentrant owner's shared hold is renewed as
// long as one of its leases has not failed a release (see abandonHold).
func (l *Lease) abandon() {
	if l.hold != nil {
		l.c.abandonHold(l)
		return
	}
	l.c.wd.StopRenewal(l.entry)
}

// unwatch stops renewing and checking this hold.
func (l *Lease) unwatch() {
	if l.hold != nil {
		l.c.leaveHold(l)
		return
	}
	l.c.wd.Remove(l.entry)
}
