package gocronlock

import (
	"context"
	"fmt"
	"time"

	"github.com/go-co-op/gocron/v2"

	"github.com/relock-go/relock"
)

// DefaultKeyPrefix is the prefix of the lock names of a Locker made
// without WithKeyPrefix: a job named "report" is locked as "gocron:report".
const DefaultKeyPrefix = "gocron:"

// DefaultSkew is the skew of a Locker made without WithSkew.
const DefaultSkew = 500 * time.Millisecond

// Locker is a gocron.Locker: give it to every scheduler, each with a
// relock Client of its own or one shared, with gocron.WithDistributedLocker
// (or a job with gocron.WithDistributedJobLocker).
//
// What it guarantees:
//
//   - Runs of one job never overlap across schedulers while their lock
//     holds. A run holds the job's lock, a relock Mutex named by the key
//     prefix and the job's name, which the Client's watchdog keeps alive
//     for as long as the run lasts. A scheduler whose Lock finds it held
//     skips that run: gocron counts a skip and calls the job's
//     AfterLockError listener with an error matching relock.ErrNotAcquired.
//   - A tick runs once, on the scheduler that comes first, although the
//     schedulers' clocks and timers do not fire at the same instant. A run
//     keeps its lock at least the skew (WithSkew) after taking it, however
//     short the job, so a scheduler that comes to the same tick up to that
//     much later finds it taken. A lock released as soon as a short job
//     ends, as redsync-based lockers do, lets a scheduler whose clock is a
//     few milliseconds late run the tick again.
//
// What it does not:
//
//   - Runs further apart than the skew are different runs: duration jobs
//     started at different times on each scheduler fire at different
//     offsets (start them at a boundary of their interval with
//     gocron.WithStartAt, or use a cron job), and clocks set further apart
//     than the skew run a tick twice. The skew must stay below the
//     shortest interval of a job, or its ticks are skipped.
//   - A tick is run at most once, not at least once: a tick whose
//     scheduler dies before or during the run is not run elsewhere (the
//     lock of a run cut short stays until it expires, within the
//     watchdog timeout), and while Redis cannot be reached every
//     scheduler skips its runs.
//   - A lock can be lost: a failover of Redis without replica sync, or a
//     scheduler cut off from Redis longer than its lease. relock logs
//     the loss, but gocron gives a Locker no way to stop a job, so the
//     run goes on while another scheduler may start the next. A job that
//     must stop when its scheduler loses the right to run it wants the
//     Elector, whose Leadership carries a context cancelled at the loss.
//
// The key gocron locks is the job's name. Give every job a name of its own
// with gocron.WithName, the same on every scheduler: the default name is
// the function's, shared by all the closures one function returns.
//
// A Locker is safe for concurrent use.
type Locker struct {
	c      *relock.Client
	prefix string
	skew   time.Duration
}

// Option configures a Locker.
type Option func(*Locker) error

// WithKeyPrefix sets the prefix of the Locker's lock names, DefaultKeyPrefix
// by default: schedulers that run the same jobs share it, and schedulers
// of different services that may name jobs alike each have their own.
func WithKeyPrefix(prefix string) Option {
	return func(l *Locker) error {
		l.prefix = prefix
		return nil
	}
}

// WithSkew sets how much later than the first a scheduler may come to the
// same tick and still find it taken: the spread of the schedulers' clocks
// plus the delay of their timers. A run keeps its job's lock at least d
// after taking it, so Unlock waits out what is left of d when the job
// ends sooner. It must be below the shortest interval of a job (a job
// every second needs less than a second). The default is DefaultSkew;
// d must be at least 1ms.
func WithSkew(d time.Duration) Option {
	return func(l *Locker) error {
		if d < time.Millisecond {
			return fmt.Errorf("%w: skew %v is below 1ms", relock.ErrInvalidOption, d)
		}
		l.skew = d
		return nil
	}
}

// NewLocker returns a Locker that takes its locks with c. It returns an
// error wrapping relock.ErrInvalidOption for a nil c or an invalid option.
func NewLocker(c *relock.Client, opts ...Option) (*Locker, error) {
	if c == nil {
		return nil, fmt.Errorf("%w: nil relock Client", relock.ErrInvalidOption)
	}
	l := &Locker{c: c, prefix: DefaultKeyPrefix, skew: DefaultSkew}
	for _, opt := range opts {
		if err := opt(l); err != nil {
			return nil, err
		}
	}
	return l, nil
}

// Lock takes the lock of the job named key for one run, trying once.
// It returns an error matching relock.ErrNotAcquired when another run
// holds it, on this scheduler or another: gocron then skips the run. Other
// errors are those of the Mutex's TryLock: relock.ErrInvalidName for a
// prefix and key that make no valid lock name, relock.ErrClosed, Redis
// errors, and ctx's, wrapped.
//
// The Unlock of the returned Lock, which gocron calls when the run ends,
// first waits until the skew has passed since Lock (the watchdog keeps
// the lock meanwhile), whether or not its ctx has ended, and then
// releases the lock as Lease.Unlock does. It returns an error matching
// relock.ErrNotHeld when the lock was lost during the run.
func (l *Locker) Lock(ctx context.Context, key string) (gocron.Lock, error) {
	m := l.c.Mutex(l.prefix + key)
	taken := time.Now()
	lease, err := m.TryLock(ctx)
	if err != nil {
		return nil, err
	}
	return &runLock{lease: lease, until: taken.Add(l.skew)}, nil
}

// runLock is one run's hold of its job's lock.
type runLock struct {
	lease *relock.Lease
	until time.Time // the end of the skew: the lock is not released before
}

// Unlock releases the run's lock once the skew has passed (see
// Locker.Lock): a scheduler that comes late to the same tick finds it
// taken until then.
func (r *runLock) Unlock(ctx context.Context) error {
	if r.lease.Err() == nil {
		if wait := time.Until(r.until); wait > 0 {
			time.Sleep(wait)
		}
	}
	return r.lease.Unlock(ctx)
}
