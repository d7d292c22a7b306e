package relock

import (
	"fmt"
	"log/slog"
	"time"

	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"
)

// DefaultWatchdogTimeout is the lease a watchdog-kept hold gets, renewed
// every third of it, when New is given no WithWatchdogTimeout.
const DefaultWatchdogTimeout = 30 * time.Second

// An Option configures a Client in New. Invalid options make New fail with
// ErrInvalidOption.
//
// relock has one option type per scope, each a function that checks its
// value when applied and returns an error wrapping ErrInvalidOption:
// Option for the Client (New), LockOption for one lock call, and a type
// per primitive for settings fixed when its handle is made (FairOption
// for Client.FairMutex, RedLockOption for NewRedLock). A handle is made
// without an error return, so an invalid handle option is returned by
// every call on the handle, as an invalid name is.
type Option func(*config) error

type config struct {
	watchdog time.Duration
	logger   *slog.Logger
	cleanup  time.Duration
	sync     ReplicaSync // replica-synced acquisition (see WithReplicaSync)
	syncMode syncMode    // default: on where the client sees replicas
	meter    metric.MeterProvider
	tracer   trace.Tracer // nil without WithTracerProvider

	perNameTokens bool   // WithPerNameTokens
	name          string // WithClientName
}

// WithWatchdogTimeout sets the lease of holds taken without WithLease. The
// watchdog renews every held lock every d/3, so a holder that dies frees
// its locks within d. The default is 30s; d must be at least 100ms.
func WithWatchdogTimeout(d time.Duration) Option {
	return func(c *config) error {
		if d < 100*time.Millisecond {
			return fmt.Errorf("%w: watchdog timeout %v is below 100ms", ErrInvalidOption, d)
		}
		c.watchdog = d
		return nil
	}
}

// WithLogger sets the logger for lost locks, failed renewals and server
// warnings. The default discards everything.
func WithLogger(l *slog.Logger) Option {
	return func(c *config) error {
		if l == nil {
			return fmt.Errorf("%w: nil logger", ErrInvalidOption)
		}
		c.logger = l
		return nil
	}
}

// WithCleanupTimeout bounds the calls relock makes after a caller has
// given up (undoing an acquisition whose reply was lost), New's one round
// trip and Close: each returns within it, whatever the server does and
// whether or not the Redis client has ContextTimeoutEnabled. The default
// is 2s.
func WithCleanupTimeout(d time.Duration) Option {
	return func(c *config) error {
		if d <= 0 {
			return fmt.Errorf("%w: cleanup timeout %v", ErrInvalidOption, d)
		}
		c.cleanup = d
		return nil
	}
}

// WithPerNameTokens keeps each lock's fencing tokens in a key of its own,
// "redisson_lock_token:{name}", the layout of Redisson's RFencedLock, so
// that Java services locking the same names with RFencedLock and this
// Client draw tokens from one growing sequence per name, and
// RFencedLock.getToken reads relock's.
//
// The cost is one key without TTL for every name ever locked, kept
// forever, and that key among the KEYS of every lock script call. Without
// this option a Client keeps a bounded number of counters (one on a
// standalone server, one per hash slot in use on a cluster), neither reads
// nor writes those keys, and tokens still grow per name; see
// docs/design.md, "Fencing tokens". Clients with and without the option
// may lock the same names: tokens grow per name either way. A Client
// without it does not see RFencedLock's tokens: give the option to every
// Client of names that RFencedLock locks too.
func WithPerNameTokens() Option {
	return func(c *config) error {
		c.perNameTokens = true
		return nil
	}
}

// A LockOption configures one lock call: Lock, TryLock, RLock, TryRLock,
// Campaign, and a PermitSemaphore's Acquire and TryAcquire. An invalid
// LockOption makes that call fail with ErrInvalidOption before it sends
// anything to Redis.
type LockOption func(*lockConfig) error

type lockConfig struct {
	lease time.Duration // 0: kept alive by the watchdog
	fixed bool
	spin  *backoff // wait by backoff instead of pub/sub
}

// WithLease gives the hold a fixed lease: no watchdog renews it and it
// expires after d unless unlocked first, or lengthened by Lease.Extend;
// the Lease then reports ErrLockLost. A re-entry of the same owner never
// shortens the lock's life in Redis, and each Lease keeps its own
// deadline. d must be at least 1ms, or the call fails with
// ErrInvalidOption.
func WithLease(d time.Duration) LockOption {
	return func(c *lockConfig) error {
		if err := checkLease(d); err != nil {
			return err
		}
		c.lease, c.fixed = d, true
		return nil
	}
}

// checkLease refuses a fixed lease below 1ms: WithLease's, and the
// UpdateLease of a permit.
func checkLease(d time.Duration) error {
	if d < time.Millisecond {
		return fmt.Errorf("%w: lease %v is below 1ms", ErrInvalidOption, d)
	}
	return nil
}

// lockConfig returns the settings of a lock call given opts: a hold
// without WithLease gets the watchdog timeout as its lease.
func (c *Client) lockConfig(opts []LockOption) (lockConfig, error) {
	var lc lockConfig
	if err := applyOptions(&lc, opts); err != nil {
		return lockConfig{}, err
	}
	if !lc.fixed {
		lc.lease = c.cfg.watchdog
	}
	return lc, nil
}

// applyOptions applies opts to cfg in order, skipping nil ones, and
// returns the first error. Every scope's options are applied here: a
// Client's in New, a handle's where it is made, a call's as it starts.
func applyOptions[C any, O ~func(*C) error](cfg *C, opts []O) error {
	for _, o := range opts {
		if o == nil {
			continue
		}
		if err := o(cfg); err != nil {
			return err
		}
	}
	return nil
}
