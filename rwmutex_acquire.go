package relock

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/relock-go/relock/internal/scripts"
)

// argUndo selects the undo mode of the read-write unlock scripts.
var argUndo any = "2"

// rwAcquire is one RWMutex lock call's fixed arguments, shared by its
// attempts.
type rwAcquire struct {
	lockCall
	rw    *RWMutex
	write bool
	field string // the hold's hash field: owner, or owner + ":write"
	keys  []any  // KEYS[3] is the request marker of a reentrant owner
	args  []any
}

// Undo undoes an attempt whose reply was lost, if Redis applied it
// (batch.Undo). A one-shot owner's field can only come from that attempt;
// a reentrant owner's is undone only if the attempt's request marker shows
// it was applied.
func (a *rwAcquire) Undo(ctx context.Context) {
	rw := a.rw
	mode := argZero
	if a.reentrant {
		mode = argUndo
	}
	script, msg := rwUnlockScript(a.write)
	keys := []any{rw.name, rw.channel, a.keys[3]}
	if err := script.Run(ctx, rw.c.rdb, keys, a.field, msg, rw.c.publish, mode, rw.c.argMarkerTTL, rw.prefix).Err(); err != nil {
		rw.c.cfg.logger.Warn("relock: cannot undo an unanswered lock attempt; it expires with its lease",
			"name", rw.name, "write", a.write, "lease", a.cfg.lease, "err", err)
	}
}

// rwUnlockScript returns the release script of one side and the message it
// publishes: a lock freed by its readers can only be wanted by writers, so
// "0" wakes one waiter; the end of a write lock may let every waiting
// reader in, so "1" wakes them all. These are Redisson's messages.
func rwUnlockScript(write bool) (*scripts.Script, any) {
	if write {
		return scripts.RWWriteUnlock, msgReadUnlock
	}
	return scripts.RWReadUnlock, argMsgUnlock
}

func (rw *RWMutex) lock(ctx context.Context, opts []LockOption, write, wait bool) (*Lease, error) {
	lc, err := rw.c.startLock(ctx, rw.check(), rwOp(write, "lock"), rw.name, opts)
	if err != nil {
		return nil, err
	}
	a := &rwAcquire{lockCall: lc, rw: rw, write: write}
	a.field = a.owner
	if write {
		a.field += ":write"
	}
	flag, marker := argZero, rw.name // one-shot owners need no request marker
	if a.reentrant {
		flag = argOne
		marker = requestMarker(rw.name, a.owner)
	}
	a.keys = []any{rw.name, rw.counter, rw.named, marker}
	a.args = []any{a.lease, a.owner, flag, rw.c.argMarkerTTL, rw.prefix}
	if write {
		a.args[4] = rw.c.argFencing
	}

	l, ttl, err := rw.attempt(ctx, a)
	if l != nil || err != nil {
		return l, err
	}
	if !wait {
		return nil, ErrNotAcquired
	}
	return rw.wait(ctx, a, ttl)
}

// wait sleeps on the release channel (or by backoff, with WithSpin)
// between attempts.
func (rw *RWMutex) wait(ctx context.Context, a *rwAcquire, ttl time.Duration) (*Lease, error) {
	c := rw.c
	c.stats.waits.Add(1)
	var ready, wake <-chan struct{}
	delay := retryAfter(ttl)
	if a.cfg.spin != nil {
		delay = a.cfg.spin.delay(0, ttl)
	} else {
		leave := func() {}
		if a.write {
			var err error
			if leave, err = rw.writerTurn(ctx); err != nil {
				return nil, err
			}
		}
		w, err := c.hub.Subscribe(rw.channel, lockPolicy)
		if err != nil {
			leave()
			return nil, ErrClosed
		}
		defer func() {
			leave() // first: the next writer finds the channel still subscribed
			w.Close()
		}()
		ready, wake = w.Ready(), w.Wake()
	}
	timer := time.NewTimer(delay)
	defer timer.Stop()
	for n := 1; ; n++ {
		// Once subscribed, and a later attempt failed, only a release
		// message, the holder's TTL or the end of ctx wake this call.
		asleep := wake != nil && ready == nil
		if asleep {
			c.stats.asleep.Add(1)
		}
		var err error
		select {
		case <-ready:
			ready = nil // subscribed: a release from now on wakes us
		case <-wake:
			c.stats.wakeups.Add(1)
		case <-timer.C:
		case <-ctx.Done():
			err = fmt.Errorf("relock: %s %q: %w", rwOp(a.write, "lock"), rw.name, ctx.Err())
		case <-c.closing:
			err = ErrClosed
		}
		if asleep {
			c.stats.asleep.Add(-1)
		}
		if err != nil {
			return nil, err
		}
		l, ttl, err := rw.attempt(ctx, a)
		if l != nil || err != nil {
			return l, err
		}
		if a.cfg.spin != nil {
			delay = a.cfg.spin.delay(n, ttl)
		} else {
			delay = retryAfter(ttl)
		}
		timer.Reset(delay)
	}
}

// attempt runs the lock script of one side once. It returns a Lease, or
// the lock's TTL, or an error. An attempt whose outcome is unknown is
// undone before returning.
func (rw *RWMutex) attempt(ctx context.Context, a *rwAcquire) (*Lease, time.Duration, error) {
	script := scripts.RWReadLock
	var rel releaser = &rw.r
	if a.write {
		script, rel = scripts.RWWriteLock, &rw.w
	}
	granted := positive
	if !a.write {
		granted = nonNegative // a reader's reply is the token counter, 0 before any writer
	}
	r, sent, err := rw.c.acquire(ctx, rw.name, script, a.keys, a.args, a, granted, nil)
	if err != nil {
		return nil, 0, opError(rwOp(a.write, "lock"), rw.name, err)
	}
	if r < 0 {
		return nil, time.Duration(-r-2) * time.Millisecond, nil
	}
	if a.write && r == 0 {
		return nil, 0, fmt.Errorf("relock: lock %q: %w", rw.name, ErrUpgrade)
	}
	l := &Lease{
		c:         rw.c,
		rel:       rel,
		name:      rw.name,
		field:     a.field,
		reentrant: a.reentrant,
		token:     uint64(r),
		end:       newEnding(),
	}
	// A writer's hold is the hash field <owner>:write: the Mutex's
	// renewal keeps it. A reader's is its field and hold keys.
	if !a.write {
		l.renewal = kindRead
	}
	rw.c.watch(l, rw.group, a.cfg.lease, a.cfg.fixed, sent)
	rw.c.stats.acquired.Add(1)
	return l, 0, nil
}

// release implements releaser for the read side.
func (r *ReadLocker) release(ctx context.Context, l *Lease) (int64, error) {
	return r.rw.release(ctx, l, false)
}

// release implements releaser for the write side.
func (w *WriteLocker) release(ctx context.Context, l *Lease) (int64, error) {
	return w.rw.release(ctx, l, true)
}

func (rw *RWMutex) release(ctx context.Context, l *Lease, write bool) (int64, error) {
	marker, mode := rw.name, argZero
	if l.reentrant {
		marker, mode = suffixed(unlockLatchPrefix, rw.name, l.request), argOne
	}
	script, msg := rwUnlockScript(write)
	return rw.c.batch.Do(ctx, script, []any{rw.name, rw.channel, marker},
		[]any{l.field, msg, rw.c.argPublish, mode, rw.c.argMarkerTTL, rw.prefix}, nil)
}

// readHold tells a reentrant owner's shared read hold apart from its write
// hold ("<owner>:write") and from a Mutex hold ("<owner>") in Client.holds.
const readHold = ":read"

// Waiting writers of one Client take turns: only one of them at a time
// sleeps on the release channel, the others wait for their turn here.
// The end of a write lock wakes every local waiter of the channel, since
// every waiting reader may enter; without turns it would also wake every
// local writer, all but one of them to fail again. A writer's first
// attempt comes before its turn, so a re-entry never waits behind
// another writer of the Client.
type turnRegistry struct {
	mu sync.Mutex
	m  map[string]*turn // by lock name
}

// turn is the writers' turn of one Client on one name.
type turn struct {
	slot chan struct{} // holds a value while a writer has the turn
	refs int           // writers having or awaiting the turn; guarded by turnRegistry.mu
}

// writerTurn waits until the calling writer has the turn, ctx ends or the
// Client is closed. leave gives the turn up.
func (rw *RWMutex) writerTurn(ctx context.Context) (leave func(), err error) {
	k := rw.name
	turns := &rw.c.turns
	turns.mu.Lock()
	if turns.m == nil {
		turns.m = make(map[string]*turn)
	}
	t := turns.m[k]
	if t == nil {
		t = &turn{slot: make(chan struct{}, 1)}
		turns.m[k] = t
	}
	t.refs++
	turns.mu.Unlock()
	drop := func() {
		turns.mu.Lock()
		if t.refs--; t.refs == 0 {
			delete(turns.m, k)
		}
		turns.mu.Unlock()
	}
	leave = func() {
		<-t.slot
		drop()
	}
	select {
	case t.slot <- struct{}{}:
		return leave, nil
	default:
	}
	rw.c.stats.asleep.Add(1)
	defer rw.c.stats.asleep.Add(-1)
	select {
	case t.slot <- struct{}{}:
		return leave, nil
	case <-ctx.Done():
		err = fmt.Errorf("relock: lock %q: %w", rw.name, ctx.Err())
	case <-rw.c.closing:
		err = ErrClosed
	}
	drop()
	return nil, err
}
