package relock

import (
	"context"
	"fmt"
	"log/slog"
	"reflect"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/metric"

	"github.com/relock-go/relock/internal/door"
	"github.com/relock-go/relock/internal/door/goredis"
	"github.com/relock-go/relock/internal/notify"
	"github.com/relock-go/relock/internal/slots"
	"github.com/relock-go/relock/internal/wait"
	"github.com/relock-go/relock/internal/watchdog"
)

// Client is relock's handle on one Redis deployment: it owns the owner ids,
// the watchdog that renews held locks, and the shared pub/sub connections
// waiters sleep on. Make one per process per deployment and share it; the
// primitives it makes are cheap handles. A Client is safe for concurrent
// use. Its zero value is not usable: call New.
type Client struct {
	door    *door.Door // every call to Redis, pub/sub included
	cluster bool
	publish string // "publish", or "spublish" on a cluster with sharded pub/sub
	numsub  string // "numsub" or "shardnumsub", to match publish

	// script arguments boxed once
	argPublish, argLease, argMarkerTTL any
	argFencing                         any       // fencing mode of fence.lua: "0" with the lock's own token key among the KEYS, "1" without
	argID, argNumsub                   any       // id and numsub, boxed
	id                                 string    // the "<uuid>" of owner ids "<uuid>:<n>"
	started                            time.Time // when New made the Client
	info                               []any     // the fields of its identity hash (identity.go)
	cfg                                config

	hub   *notify.Hub
	wd    *watchdog.Watchdog
	rsync *syncer // replica-synced acquisition; nil when off

	holdsMu sync.Mutex
	holds   map[holdKey]*hold // reentrant watchdog holds, shared by their leases
	listen  holderListen      // the grant channel held for the holds (holders.go)

	leftovers leftovers // queue leaves that failed (leftover.go)

	local             wait.List   // waiting calls of every primitive but the FairMutex (internal/wait)
	fair              wait.List   // FairMutex calls waiting
	turns             writerTurns // RWMutex writers' turns per name
	localEnv, fairEnv *wait.Env   // what the waiting core needs of the Client, per list (newWaitEnv)

	closing   chan struct{}
	clock     atomic.Pointer[clockArg] // see nowArg
	closed    atomic.Bool
	ctx       context.Context // cancelled by Close, for the client's own goroutines
	cancel    context.CancelFunc
	wg        sync.WaitGroup
	spawnMu   sync.Mutex // orders spawn before Close's wait
	stopSpawn bool       // guarded by spawnMu: Close has begun

	stats   stats
	metrics metric.Registration // nil without WithMeterProvider
}

// New returns a Client over rdb, a go-redis v9 *redis.Client (standalone
// or a Sentinel failover client) or *redis.ClusterClient. A *redis.Ring is
// refused with ErrUnsupportedClient: client-side sharding without failover
// is no home for locks. relock never closes rdb. New asks the server, in
// one round trip bounded by the cleanup timeout, whether the Redis user
// may run scripts and publish on relock's channels, and fails with
// ErrNoPermission, naming what the user lacks, if its ACL says no; with
// ErrUnsupportedServer, naming the command, if the server lacks EVAL,
// EVALSHA or PUBLISH (SPUBLISH on a cluster); and with the server's
// reply if it refuses rdb's credentials (NOAUTH, WRONGPASS). A server
// that does not answer is left to the calls that need it. The same
// round trip makes the Client known to operators (see WithClientName). A
// nil rdb, or a nil pointer of any client type, fails with an error
// matching ErrInvalidOption (and ErrUnsupportedClient).
func New(rdb redis.UniversalClient, opts ...Option) (*Client, error) {
	if isNil(rdb) {
		// Nil matches both: no client is an invalid argument and no client
		// relock can lock on.
		return nil, fmt.Errorf("%w: %w: nil redis client %T", ErrInvalidOption, ErrUnsupportedClient, rdb)
	}
	if _, ok := rdb.(*redis.Ring); ok {
		return nil, fmt.Errorf("%w: *redis.Ring shards keys without failover; use a *redis.Client or *redis.ClusterClient", ErrUnsupportedClient)
	}
	return NewWithDriver(goredis.New(rdb), opts...)
}

// NewWithDriver is New for a Redis client library other than go-redis,
// behind the driver that one of relock's adapter modules makes of it
// (relockvalkey for valkey-go, relockrueidis for rueidis): their New
// calls it. Everything New says of the server holds. A nil d fails with
// an error matching ErrInvalidOption and ErrUnsupportedClient.
func NewWithDriver(d door.Driver, opts ...Option) (*Client, error) {
	if d == nil {
		return nil, fmt.Errorf("%w: %w: nil driver", ErrInvalidOption, ErrUnsupportedClient)
	}
	cfg, err := newConfig(opts)
	if err != nil {
		return nil, err
	}
	c := &Client{
		publish: "publish",
		id:      newUUID(),
		started: time.Now(),
		cfg:     cfg,
		holds:   make(map[holdKey]*hold),
		closing: make(chan struct{}),
	}
	c.ctx, c.cancel = context.WithCancel(context.Background())
	c.info = c.identity()
	c.door = door.New(door.Config{Driver: d, Cleanup: cfg.cleanup, Stopped: ErrClosed})
	c.cluster = c.door.Driver().Cluster()
	// Replica sync's settings are checked against the client's before New writes
	// anything: an invalid option leaves no trace on the server.
	if c.rsync, err = newSyncer(c); err != nil {
		c.cancel()
		return nil, err
	}
	probed := c.probe()
	c.setArgs(probed.publish)
	if probed.err != nil {
		c.cancel()
		return nil, probed.err
	}
	c.start()
	if err := c.registerMetrics(); err != nil {
		_ = c.Close()
		return nil, err
	}
	return c, nil
}

// newConfig applies opts over the defaults.
func newConfig(opts []Option) (config, error) {
	cfg := config{watchdog: DefaultWatchdogTimeout, cleanup: 2 * time.Second}
	if err := applyOptions(&cfg, opts); err != nil {
		return config{}, err
	}
	if cfg.logger == nil {
		cfg.logger = slog.New(slog.DiscardHandler)
	}
	return cfg, nil
}

// setArgs sets the script arguments every call of the Client shares,
// boxed once: publish is the command the server takes for releases
// (PUBLISH, or SPUBLISH on a Redis 7 cluster).
func (c *Client) setArgs(publish string) {
	c.publish = publish
	c.numsub = "numsub"
	if c.publish == "spublish" {
		c.numsub = "shardnumsub"
	}
	c.argPublish, c.argLease, c.argMarkerTTL = c.publish, c.cfg.watchdog.Milliseconds(), c.markerTTL().Milliseconds()
	c.argID, c.argNumsub = c.id, c.numsub
	c.argFencing = argOne
	if c.cfg.perNameTokens {
		c.argFencing = argZero
	}
}

// start starts what the Client runs: the pub/sub hub, the waiting core's
// view of it, the watchdog, the server inspection and replica
// sync's background reads.
func (c *Client) start() {
	cfg := c.cfg
	c.hub = notify.New(notify.Config{
		Client:  c.door.Driver(),
		Sharded: c.publish == "spublish",
		Slot:    slots.Of,
		Linger:  grantLinger,
		// A connection made again may follow a restart or failover that
		// lost holds: they are renewed at once, as waiters re-check.
		Reconnected: func() { c.wd.RenewAll() },
		Now:         func() int64 { return c.wd.Now() },
		Logger:      cfg.logger,
	})
	var busy func()
	if !c.cluster {
		busy = c.holding // holders listen (holders.go)
	}
	c.wd = watchdog.New(watchdog.Config{
		Interval: cfg.watchdog / 3,
		Renew:    c.renew,
		Lost:     c.lost,
		Every:    c.announce,
		Busy:     busy,
		Logger:   cfg.logger,
	})
	c.localEnv, c.fairEnv = c.newWaitEnv(&c.local), c.newWaitEnv(&c.fair)
	c.wg.Add(1)
	go c.inspect()
	c.rsync.start()
}

// newWaitEnv returns what the waiting core needs of c for the calls of
// list. What a release passes a call in process is a *Lease (wait.Hold).
func (c *Client) newWaitEnv(list *wait.List) *wait.Env {
	return &wait.Env{
		List:     list,
		Hub:      c.hub,
		Closing:  c.closing,
		Closed:   ErrClosed,
		Stats:    &c.stats.Stats,
		Route:    c.routeGrant,
		GrantTTL: grantTTL,
		Unwanted: func(h wait.Hold) { c.releaseUnwanted(h.(*Lease)) },
		Now:      c.wd.Now,
	}
}

// isNil reports whether rdb is nil or a nil pointer in the interface, such
// as a (*redis.Client)(nil), which would panic at the first call.
func isNil(rdb redis.UniversalClient) bool {
	if rdb == nil {
		return true
	}
	v := reflect.ValueOf(rdb)
	return v.Kind() == reflect.Pointer && v.IsNil()
}

// Close stops the watchdog and the pub/sub connections, and makes every
// blocked call return ErrClosed. Held locks and permits are not released:
// they expire after their lease, and their Leases and Permits report an
// error matching both ErrLockLost and ErrClosed. Every call made after
// Close, or cut short by it, returns an error matching ErrClosed and
// changes nothing in Redis: Lease.Unlock and Permit.Release too, so
// release what should not wait for its lease before Close. Close waits for
// relock's goroutines for at most the cleanup timeout (WithCleanupTimeout),
// whatever the server does; those still waiting then on a server that does
// not answer end with the Redis client's read timeout. The calls it cuts
// short return within the cleanup timeout too, waiting calls and calls
// sent again after a redirection included, but one: a call sent on its own
// (the only one in flight) whose reply a server that does not answer
// holds, which ends with the Redis client's read timeout. It is
// idempotent.
func (c *Client) Close() error {
	if !c.closed.CompareAndSwap(false, true) {
		return nil
	}
	close(c.closing)
	c.spawnMu.Lock() // no goroutine is spawned from now on (see spawn)
	c.stopSpawn = true
	c.spawnMu.Unlock()
	c.unregisterMetrics()
	c.cancel()
	c.door.Stop() // calls end now, whatever the rest of Close waits for
	if !within(c.cfg.cleanup, func() {
		c.wd.Close(errClosedLost)
		c.hub.Close()
		c.door.Close()
		c.wg.Wait()
		c.retire()
	}) {
		// The holds have ended (Watchdog.Close ends them first); what is
		// left waits on a server that does not answer, and ends when
		// go-redis gives up on it.
		c.cfg.logger.Warn("relock: Close did not hear from the server within the cleanup timeout; its last calls end with the client's read timeout",
			"cleanup timeout", c.cfg.cleanup)
	}
	return nil
}

// spawn runs f in a goroutine that Close waits for, unless the Client is
// closing: it then reports false, and f is the caller's to run.
func (c *Client) spawn(f func()) bool {
	c.spawnMu.Lock()
	defer c.spawnMu.Unlock()
	if c.stopSpawn {
		return false
	}
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		f()
	}()
	return true
}

// releaseContext returns the context of a release the caller asked for
// (an Unlock, a Release, a Resign): it keeps ctx's values, a trace's span
// say, but not its cancellation, and ends after the cleanup timeout, or at
// ctx's deadline if that is later. A release thus goes out even when the
// caller has given up, as Close's cleanup does. A ctx that can never end
// (context.Background, say) is used as it is, bounded as any call by the
// Redis client's timeouts, which costs an uncontended Unlock nothing.
func (c *Client) releaseContext(ctx context.Context) (context.Context, context.CancelFunc) {
	if ctx.Done() == nil {
		return ctx, noCancel
	}
	deadline := time.Now().Add(c.cfg.cleanup)
	if d, ok := ctx.Deadline(); ok && d.After(deadline) {
		deadline = d
	}
	return context.WithDeadline(context.WithoutCancel(ctx), deadline)
}

func noCancel() {}

func (c *Client) checkOpen() error {
	if c.closed.Load() {
		return ErrClosed
	}
	return nil
}
