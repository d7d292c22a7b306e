package main

import (
	"context"
	"errors"
	"math"
	"sync/atomic"
	"time"

	"github.com/bsm/redislock"
	"github.com/go-redsync/redsync/v4"
	"github.com/go-redsync/redsync/v4/redis/goredis/v9"
	"github.com/redis/go-redis/v9"
)

// leaseTTL is the fixed lease of the libraries without a watchdog-only
// mode; relock runs in its default watchdog mode instead.
const leaseTTL = 10 * time.Second

// tryNextAfter bounds one rueidislock attempt. Its default, 20ms, is
// short enough for a loaded machine to miss; WithContext then waits for a
// key invalidation that never comes (no key was written) until its context
// ends. One second keeps that stall out of the figures and changes nothing
// else with a single key.
const tryNextAfter = time.Second

// pollDelay is how long the polling libraries (redsync, redislock) sleep
// between attempts on a held lock.
const pollDelay = time.Millisecond

// locker is one worker's handle on one lock name. A locker is used by one
// goroutine at a time, so an adapter may keep the current hold in itself.
type locker interface {
	// Lock blocks until the lock is held or ctx ends, and returns the
	// function that releases this hold.
	Lock(ctx context.Context) (unlock func(context.Context) error, err error)
}

// rlocker is a locker that also has a shared read lock. The read-heavy
// workload takes it for reads; a locker without it takes Lock instead.
type rlocker interface {
	locker
	// RLock blocks until the read lock is held or ctx ends, and returns
	// the function that releases this hold.
	RLock(ctx context.Context) (unlock func(context.Context) error, err error)
}

// semaphores is implemented by the libraries that have a counting
// semaphore; the semaphore workload reports the others as n/a.
type semaphores interface {
	// semaphore returns one worker's handle on the semaphore key, giving
	// the semaphore permits first if it has none yet. The handle's Lock
	// acquires one permit, and the function it returns releases it.
	semaphore(ctx context.Context, key string, permits int) (locker, error)
}

// library is one lock library connected to the server through a client
// pool of its own.
type library interface {
	// locker returns a new handle on key for one worker.
	locker(key string) locker
	// calls returns how many commands the library's client has sent.
	calls() int64
	// close releases the library's client and pool.
	close() error
}

// opener connects a library to the server s for workload w.
type opener func(ctx context.Context, s *server, w workload) (library, error)

// Client libraries the contenders run on.
const (
	clientGoRedis = "go-redis"
	clientRueidis = "rueidis"
	clientValkey  = "valkey-go"
)

// libraries lists the contenders in report order. The own ones are
// relock: not peers, and a failure of theirs fails the run. relock-fair
// and relock-rw are relock's other locks on go-redis; relock-rueidis and
// relock-valkey are relock's Mutex and Semaphore, as relock takes them, on
// the other client libraries through their adapter modules.
var libraries = []struct {
	name   string
	open   opener
	own    bool   // relock, not a peer
	client string // the Redis client library it runs on
	// sem: it takes a turn on the semaphore workload. relock-fair and
	// relock-rw do not: the Semaphore is relock's whichever lock is used,
	// and is measured once per client library. Every peer does, to show
	// n/a if it has no semaphore.
	sem bool
}{
	{name: "relock", open: openRelockOn(onGoRedis), own: true, client: clientGoRedis, sem: true},
	{name: "relock-fair", open: openRelockFair, own: true, client: clientGoRedis},
	{name: "relock-rw", open: openRelockRW, own: true, client: clientGoRedis},
	{name: "relock-rueidis", open: openRelockOn(onRueidis), own: true, client: clientRueidis, sem: true},
	{name: "relock-valkey", open: openRelockOn(onValkey), own: true, client: clientValkey, sem: true},
	{name: "redsync", open: openRedsync, client: clientGoRedis, sem: true},
	{name: "redislock", open: openRedislock, client: clientGoRedis, sem: true},
	{name: "rueidislock", open: openRueidislock, client: clientRueidis, sem: true},
	{name: "valkeylock", open: openValkeylock, client: clientValkey, sem: true},
}

// libraryNamed returns the opener of the library called name.
func libraryNamed(name string) (opener, bool) {
	for _, l := range libraries {
		if l.name == name {
			return l.open, true
		}
	}
	return nil, false
}

// isPeer reports whether name is another library than relock.
func isPeer(name string) bool {
	for _, l := range libraries {
		if l.name == name {
			return !l.own
		}
	}
	return false
}

// takesTurn reports whether the library called name runs workload w.
func takesTurn(name string, w workload) bool {
	for _, l := range libraries {
		if l.name == name {
			return w.permits == 0 || l.sem
		}
	}
	return false
}

// clientOf returns the Redis client library that the library called name
// runs on.
func clientOf(name string) string {
	for _, l := range libraries {
		if l.name == name {
			return l.client
		}
	}
	return ""
}

// poolSize is the connection pool size of every client of the run: the
// go-redis pools, and the rueidis and valkey-go pools for blocking and
// dedicated commands (-pool).
var poolSize = 128

// newGoRedis returns a go-redis client with default options but a pool of
// poolSize connections, whose commands are counted by n if it is not nil,
// and recorded while the server cost experiment records (server.go).
func newGoRedis(addr string, n *callCounter) *redis.Client {
	rdb := redis.NewClient(&redis.Options{Addr: addr, PoolSize: poolSize})
	rdb.AddHook(&recording)
	if n != nil {
		rdb.AddHook(n)
	}
	return rdb
}

// redsync: one pool, a 10s expiry, and, so that Lock waits instead of
// giving up after its default 32 tries 50-250ms apart, unlimited tries
// pollDelay apart, bounded by ctx.

type redsyncLib struct {
	rdb *redis.Client
	rs  *redsync.Redsync
	n   callCounter
}

func openRedsync(_ context.Context, s *server, _ workload) (library, error) {
	l := &redsyncLib{}
	l.rdb = newGoRedis(s.addr, &l.n)
	l.rs = redsync.New(goredis.NewPool(l.rdb))
	return l, nil
}

func (l *redsyncLib) locker(key string) locker {
	w := &redsyncLocker{m: l.rs.NewMutex(key,
		redsync.WithExpiry(leaseTTL),
		redsync.WithTries(math.MaxInt32),
		redsync.WithRetryDelay(pollDelay))}
	w.unlock = w.release
	return w
}

func (l *redsyncLib) calls() int64 { return l.n.load() }

func (l *redsyncLib) close() error { return l.rdb.Close() }

// redsyncLocker keeps one redsync Mutex per worker: a redsync Mutex holds
// the value of its current hold, so it cannot be shared by workers.
type redsyncLocker struct {
	m      *redsync.Mutex
	unlock func(context.Context) error
}

// Lock takes the lock, polling until ctx ends.
func (w *redsyncLocker) Lock(ctx context.Context) (func(context.Context) error, error) {
	if err := w.m.LockContext(ctx); err != nil {
		return nil, err
	}
	return w.unlock, nil
}

func (w *redsyncLocker) release(ctx context.Context) error {
	ok, err := w.m.UnlockContext(ctx)
	if err == nil && !ok {
		err = errors.New("redsync: unlock found the lock not held")
	}
	return err
}

// bsm/redislock: a 10s TTL, linear 1ms backoff bounded by ctx.

type redislockLib struct {
	rdb  *redis.Client
	c    *redislock.Client
	opts *redislock.Options
	n    callCounter
}

func openRedislock(_ context.Context, s *server, _ workload) (library, error) {
	l := &redislockLib{opts: &redislock.Options{RetryStrategy: redislock.LinearBackoff(pollDelay)}}
	l.rdb = newGoRedis(s.addr, &l.n)
	l.c = redislock.New(l.rdb)
	return l, nil
}

func (l *redislockLib) locker(key string) locker {
	w := &redislockLocker{lib: l, key: key}
	w.unlock = w.release
	return w
}

func (l *redislockLib) calls() int64 { return l.n.load() }

func (l *redislockLib) close() error { return l.rdb.Close() }

type redislockLocker struct {
	lib    *redislockLib
	key    string
	lock   *redislock.Lock
	unlock func(context.Context) error
}

// Lock obtains the lock, polling until ctx ends.
func (w *redislockLocker) Lock(ctx context.Context) (func(context.Context) error, error) {
	lock, err := w.lib.c.Obtain(ctx, w.key, leaseTTL, w.lib.opts)
	if err != nil {
		return nil, err
	}
	w.lock = lock
	return w.unlock, nil
}

func (w *redislockLocker) release(ctx context.Context) error { return w.lock.Release(ctx) }

// rueidislock and valkeylock (the same locker in rueidis and in its fork
// valkey-go; rueidis.go and valkey.go open them): one key per lock
// (KeyMajority 1), a 10s validity, and a per-attempt timeout of 1s instead
// of 20ms (see tryNextAfter). Without waiters they run with NOLOOP
// tracking where the server supports it (7.0.5 and later), which their
// documentation recommends for speed. With waiters in the same process
// they keep the default tracking: their waiters can sleep on a free lock
// until their context ends (a lost wake-up in WithContext), which under
// NOLOOP, where the client gets no invalidation for its own unlocks,
// happened far more often.

// noLoop reports whether rueidislock and valkeylock use NOLOOP tracking
// for workload w on the server s.
func noLoop(ctx context.Context, s *server, w workload) (bool, error) {
	version, err := s.version(ctx)
	if err != nil {
		return false, err
	}
	return !w.shared && versionAtLeast(version, 7, 0, 5), nil
}

// contextLocker is what the bench uses of a rueidislock.Locker or a
// valkeylock.Locker.
type contextLocker interface {
	WithContext(ctx context.Context, name string) (context.Context, context.CancelFunc, error)
	Close()
}

type contextLockLib struct {
	lk contextLocker
	n  callCounter
}

func (l *contextLockLib) locker(key string) locker {
	w := &contextLockHandle{lk: l.lk, key: key}
	w.unlock = w.release
	return w
}

func (l *contextLockLib) calls() int64 { return l.n.load() }

func (l *contextLockLib) close() error { l.lk.Close(); return nil }

type contextLockHandle struct {
	lk     contextLocker
	key    string
	cancel context.CancelFunc // releases the current hold
	unlock func(context.Context) error
}

// Lock takes the lock, waiting for invalidations until ctx ends.
func (w *contextLockHandle) Lock(ctx context.Context) (func(context.Context) error, error) {
	_, cancel, err := w.lk.WithContext(ctx, w.key)
	if err != nil {
		return nil, err
	}
	w.cancel = cancel
	return w.unlock, nil
}

// release cancels the lock's context, which deletes the key and returns
// once it is deleted.
func (w *contextLockHandle) release(context.Context) error { w.cancel(); return nil }

// callCounter counts the commands a go-redis client sends; it is a
// go-redis hook. Connection set-up (HELLO, CLIENT SETINFO) and pub/sub
// subscriptions bypass hooks and are not counted.
type callCounter struct{ n atomic.Int64 }

func (h *callCounter) load() int64 { return h.n.Load() }

// DialHook implements redis.Hook; dials are not counted.
func (h *callCounter) DialHook(next redis.DialHook) redis.DialHook { return next }

// ProcessHook implements redis.Hook, counting one command.
func (h *callCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.n.Add(1)
		return next(ctx, cmd)
	}
}

// ProcessPipelineHook implements redis.Hook, counting every command of
// the pipeline.
func (h *callCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		h.n.Add(int64(len(cmds)))
		return next(ctx, cmds)
	}
}
