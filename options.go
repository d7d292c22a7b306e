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

// A LockOption configures one Lock or TryLock call.
type LockOption func(*lockConfig)

type lockConfig struct {
	lease time.Duration // 0: kept alive by the watchdog
	fixed bool
	spin  *backoff // wait by backoff instead of pub/sub
}

// WithLease gives the hold a fixed lease: no watchdog renews it and it
// expires after d unless unlocked first; the Lease then reports
// ErrLockLost. d must be at least 1ms, or the call fails with
// ErrInvalidOption.
func WithLease(d time.Duration) LockOption {
	return func(c *lockConfig) {
		c.lease, c.fixed = d, true
	}
}

func (c *Client) lockConfig(opts []LockOption) (lockConfig, error) {
	if len(opts) == 0 {
		return lockConfig{lease: c.cfg.watchdog}, nil
	}
	var lc lockConfig
	for _, o := range opts {
		if o != nil {
			o(&lc)
		}
	}
	if !lc.fixed {
		lc.lease = c.cfg.watchdog
		return lc, lc.spin.check()
	}
	if lc.lease < time.Millisecond {
		return lc, fmt.Errorf("%w: lease %v is below 1ms", ErrInvalidOption, lc.lease)
	}
	return lc, lc.spin.check()
}
