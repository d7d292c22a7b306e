package relock

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/relock-go/relock/internal/batch"
	"github.com/relock-go/relock/internal/scripts"
	"github.com/relock-go/relock/internal/slots"
	"github.com/relock-go/relock/internal/watchdog"
)

// Grants. A Mutex's lock calls that wait join the lock's queue in Redis
// ("relock_lock_queue:{name}", a zset scored by the server time each
// joined) in the attempt that finds the lock held. A release that frees
// the lock grants it, in the same script, to the first of the queue
// (unlock.lua): the lock passes from one owner to the next without ever
// being free, and the waiter's Lock returns on the grant without a round
// trip of its own:
//
//   - to a waiting call of the releasing Client, the release hands the
//     Lease over in process (a local waiter it has claimed takes the place
//     of the first one when that is the Client's own too);
//   - to another Client's waiter, the release publishes the grant on that
//     Client's grant channel ("relock_grant:<uuid>", one per slot on a
//     cluster), and the lock holds for at most grantTTL until the waiter
//     has confirmed it, so that a waiter that died costs the next one at
//     most that long: every waiting call attempts at least every grantTTL
//     (the next Client in the queue is told to check again only when the
//     grant is the waiter's own shorter lease).
//
// A release does not grant when someone else listens on the lock's
// release channel (a Redisson client, an older relock): it frees the lock
// and announces it as it always did, so no client that does not queue is
// starved. Reentrant owners queue but are never granted (a retried request
// could count a hold twice): when one is first, the lock is freed and
// announced. A grant whose message is lost (a pub/sub reconnect) is taken
// by the waiter's next attempt, which finds its owner holding the lock.
// docs/design.md, "Grants", has the argument.

// grantTTL is the longest a grant to another Client's waiter holds the
// lock before the waiter has confirmed it.
const grantTTL = 2 * time.Second

var argGrantTTL any = grantTTL.Milliseconds()

// grantLinger is how long a Client stays subscribed to a grant channel
// after its last waiting call on it has returned: a Client that waits
// again soon, as under contention, neither subscribes again nor makes the
// attempt that follows a new subscription.
func grantLinger(channel string) time.Duration {
	if strings.HasPrefix(channel, grantChannelPrefix+":") {
		return time.Second
	}
	return 0
}

// queueMember is a waiting call's member in the queue of waiters:
// "<lease ms>|<kind>|<owner>", kind "r" for a reentrant owner, "w" for a
// one-shot owner of a Client with replica sync (granted by its own
// Client's releases only), "o" for other one-shot owners.
func queueMember(lease time.Duration, kind, owner string) string {
	return strconv.FormatInt(lease.Milliseconds(), 10) + "|" + kind + "|" + owner
}

// The kinds of queue members, boxed once as script arguments.
var argKindOneShot, argKindReentrant, argKindSynced any = "o", "r", "w"

// waiterKind returns the kind of a queue member (see queueMember) as a
// script argument.
func (c *Client) waiterKind(reentrant bool) any {
	switch {
	case reentrant:
		return argKindReentrant
	case c.rsync.mayWait():
		return argKindSynced
	}
	return argKindOneShot
}

// grantChannel returns the channel on which grants to the Client's waiters
// for locks of name's slot arrive.
func (c *Client) grantChannel(name string) string {
	if c.cluster {
		return grantChannelPrefix + ":{" + slots.Tag(slot(name)) + "}:" + c.id
	}
	return grantChannelPrefix + ":" + c.id
}

// grant is a grant made to a waiter by another Client's release.
type grant struct {
	token    uint64
	ttl, age time.Duration // the lock's life from the grant; time since the waiter joined
}

// routeGrant is the hub's policy for a grant channel: it passes a grant
// ("g:<token>:<ttl ms>:<age ms>:<owner>") or a call to check again
// ("n:<ttl ms>:<owner>", 0 for now) to the waiting Mutex, RWMutex or
// PermitSemaphore call of that owner, and a grant ("fg:", the same) or a
// call to check now ("fn:<owner>") to the waiting FairMutex call of that
// owner, if it is still here, and wakes no other.
func (c *Client) routeGrant(payload string) int {
	kind, rest, _ := strings.Cut(payload, ":")
	var g *grant
	var recheck time.Duration // 0: now
	var owner string
	list := &c.local
	switch kind {
	case "g", "fg":
		var ok bool
		if g, owner, ok = parseGrant(rest); !ok || owner == "" {
			return 0
		}
	case "n":
		ms, o, _ := strings.Cut(rest, ":")
		n, err := strconv.ParseInt(ms, 10, 64)
		if err != nil {
			return 0
		}
		if owner = o; n > 0 {
			recheck = time.Duration(n)*time.Millisecond + time.Millisecond
		}
	case "fn":
		owner = rest
	default:
		return 0
	}
	if kind[0] == 'f' {
		list = &c.fair
	}
	// A call gone has taken the grant with its attempt, or leaving the
	// queue releases it.
	if g != nil {
		list.Grant(owner, g)
	} else {
		list.Wake(owner, recheck)
	}
	return 0
}

// parseGrant reads "<token>:<ttl ms>:<ms>" and what follows it after a
// colon, if anything; the third number is stored as the grant's age, for
// the caller to interpret.
func parseGrant(s string) (g *grant, rest string, ok bool) {
	f := strings.SplitN(s, ":", 4)
	if len(f) < 3 {
		return nil, "", false
	}
	token, err1 := strconv.ParseUint(f[0], 10, 64)
	ttl, err2 := strconv.ParseInt(f[1], 10, 64)
	age, err3 := strconv.ParseInt(f[2], 10, 64)
	if err1 != nil || err2 != nil || err3 != nil {
		return nil, "", false
	}
	if len(f) == 4 {
		rest = f[3]
	}
	return &grant{token: token, ttl: time.Duration(ttl) * time.Millisecond, age: time.Duration(age) * time.Millisecond}, rest, true
}

// granted watches l, a lock granted by another Client's release with g,
// whose lock call's first attempt that may have queued it was sent at
// from, unless the grant may have run out already (the call then attempts,
// and takes the lock if it is still its own): the lock lives at least ttl
// after the grant, which came age after that attempt reached the server,
// so l's deadline counts from there. A grant shorter than the call's lease
// is confirmed if still held after a quarter of it.
func (c *Client) granted(l *Lease, group int, cfg lockConfig, g *grant, from int64) bool {
	deadline, ok := c.grantDeadline(g, from)
	if !ok {
		return false
	}
	c.watchUntil(l, group, cfg.lease, cfg.fixed, deadline)
	c.confirmGrant(l.entry, cfg, g)
	return true
}

// grantDeadline returns the local deadline of a hold granted with g to a
// call whose first attempt that may have queued it was sent at from, or
// false when the grant may have run out already (see Client.granted).
func (c *Client) grantDeadline(g *grant, from int64) (int64, bool) {
	life := g.age + g.ttl
	deadline := from + int64(life-watchdog.Drift(life))
	return deadline, deadline-c.wd.Now() >= int64(g.ttl/4)
}

// confirmGrant has the watchdog renew e, a hold granted with g, to the
// call's lease a quarter of the grant after it came, if the grant is
// shorter; and counts the grant.
func (c *Client) confirmGrant(e *watchdog.Entry, cfg lockConfig, g *grant) {
	if g.ttl < cfg.lease {
		// A hold shorter than a quarter of the grant never needs it.
		c.wd.Confirm(e, cfg.lease, g.ttl/4)
	}
	c.stats.acquired.Add(1)
	c.stats.handoffs.Add(1)
}

// accept makes the Lease of a grant to call a, or returns nil when the
// grant may have run out already (see Client.granted).
func (m *Mutex) accept(a *acquire, g *grant) *Lease {
	l := &Lease{c: m.c, rel: m, name: m.name, field: a.owner, token: g.token, end: newEnding()}
	if !m.c.granted(l, m.group, a.cfg, g, a.joined) {
		return nil
	}
	return l
}

// leaveQueue takes call a out of the lock's queue as it returns without
// the lock, and releases the lock if it was granted to a meanwhile (the
// next waiter then gets it), within the cleanup timeout.
func (m *Mutex) leaveQueue(a *acquire) {
	if !a.waits {
		return
	}
	owner := any(a.owner)
	if a.reentrant {
		owner = argEmpty // never granted; its holds, if any, are not this call's
	}
	args := m.unlockArgs(owner, false, nil, a.queueMember())
	if err := m.c.leave(context.Background(), m.name, func(ctx context.Context) error {
		return scripts.Unlock.Run(ctx, m.c.batch.Direct(), m.keys, args...).Err()
	}); err != nil {
		m.c.cfg.logger.Warn("relock: cannot leave the queue of a lock; the Client's next call on it tries again",
			"name", m.name, "err", err)
	}
}

// unlockArgs returns the ARGV of unlock.lua releasing a hold of owner:
// marked when its keys hold a release marker (a reentrant hold), w the
// waiter of this Client to grant the lock to (nil for none), leaving the
// queue member of a call leaving the queue ("" for none), and passed, for
// a hold passed on in process, its token and whether to reserve more (the
// Client's clock goes with them, as the hold's start).
// The arguments past the fifth that are "" or "0" at the end are left out,
// as a plain release needs none of them and each costs the server.
func (m *Mutex) unlockArgs(owner any, marked bool, w *waiter, leaving string, passed ...any) []any {
	listen, remote, preferred, left := argZero, argOne, argEmpty, argEmpty
	// Only the Mutex calls of a Client listen on a Mutex's release channel.
	if m.c.local.Len() > 0 && m.c.hub.Listening(m.channel) {
		listen = argOne
	}
	if m.c.rsync.mayWait() {
		remote = argZero // a grant to another Client would return before replicas acknowledge it
	}
	if w != nil {
		preferred = w.Call.(*acquire).member
	}
	if leaving != "" {
		left = leaving
	}
	args := []any{owner, m.c.argPublish, m.c.argFencing, m.argGrants, remote, m.argChannel, listen, preferred, left, argEmpty, argZero, argEmpty, argEmpty}
	if len(passed) > 0 {
		copy(args[unlockArgPassed:], passed)
		args[unlockArgSince] = m.c.nowArg()
	}
	if marked {
		args[unlockArgMarkerTTL] = m.c.argMarkerTTL
	}
	n := len(args)
	for n > unlockArgsFixed && (args[n-1] == argEmpty || args[n-1] == argZero) {
		n--
	}
	return args[:n]
}

// settle ends the claim on w of the release that claimed it, sent at
// sent: w is handed the lock if it was granted to w, goes back to sleep if
// it was granted to another waiter, or attempts.
func (m *Mutex) settle(w *waiter, r int64, err error, sent int64) {
	ws := []*waiter{w}
	switch {
	case err == nil && r < 0:
		next := &Lease{c: m.c, rel: m, name: m.name, field: w.Owner, token: uint64(-r) >> 1, end: newEnding()}
		if r&1 == 1 { // -(2t + 1): tokens reserved for passing it on in process
			next.chain = newChain(next.token+1, chainBlock)
		}
		cfg := heldFor(w)
		m.c.watch(next, m.group, cfg.lease, cfg.fixed, sent)
		if next.chain != nil {
			m.c.local.SetRun(m.name, next)
		}
		m.c.stats.acquired.Add(1)
		m.c.stats.handoffs.Add(1)
		if !m.c.local.Settle(ws, 0, next, false) {
			m.c.releaseUnwanted(next)
		}
	case err == nil && r == 3:
		m.c.local.Settle(ws, -1, nil, false)
	default:
		// Not passed on (or unknown): the waiter tries itself. A one-shot
		// owner that finds itself holding the lock takes it as its own.
		m.c.local.Settle(ws, -1, nil, true)
	}
}

// releaseUnwanted releases a lock handed to a call that has gone, within
// the cleanup timeout.
func (c *Client) releaseUnwanted(l *Lease) {
	ctx, cancel := context.WithTimeout(c.ctx, c.cfg.cleanup)
	defer cancel()
	// The call leaving the queue may free the hold at the same time, so
	// it is not passed on in process: the next holder's would rest on it.
	l.unwanted = true
	if err := l.Unlock(ctx); err != nil && !errors.Is(err, ErrNotHeld) {
		c.cfg.logger.Warn("relock: cannot release a lock handed to a waiter that left; it expires with its lease",
			"name", l.name, "err", err)
	}
}

// handOff is a release that may grant the lock to w, a waiter of this
// Client. Where the master has replicas to wait for (replicasync.go),
// unlock.lua and a WAIT go in one pipeline on its connection, and w is
// handed its Lease only if enough replicas acknowledged it; otherwise w's
// hold is released again and w tries for itself. With replica sync no
// grant goes to another Client.
func (m *Mutex) handOff(ctx context.Context, l *Lease, w *waiter, keys []any) (int64, error) {
	s := m.c.rsync
	args := m.unlockArgs(l.arg(), l.reentrant, w, "")
	t, err := s.target(ctx, m.name)
	if err == nil && t == nil {
		sent := m.c.wd.Now()
		r, err := m.c.batch.Do(ctx, scripts.Unlock, keys, args, nil)
		m.settle(w, r, err, sent)
		return r, err
	}
	unlock := func() (int64, error) {
		r, err := m.c.batch.Do(ctx, scripts.Unlock, keys, m.unlockArgs(l.arg(), l.reentrant, nil, ""), nil)
		m.c.local.Settle([]*waiter{w}, -1, nil, true) // it tries itself
		return r, err
	}
	if err != nil {
		return unlock()
	}
	sent := m.c.wd.Now()
	cmd, ack := batch.Synced(ctx, scripts.Unlock, keys, args, &t.bs)
	r, err := cmd.Int64()
	if err != nil && s.cc != nil && isServerError(err) && isRedirect(err) {
		s.cc.ReloadState(ctx)
		return unlock()
	}
	if err != nil || r >= 0 {
		m.settle(w, r, err, sent)
		return r, err
	}
	if serr := s.judge(ctx, t, ack); serr != nil {
		// Released, but the waiter may not have it: free it again.
		m.c.stats.syncShort.Add(1)
		m.c.undo(ctx, &handed{m: m, owner: w.Owner})
		m.c.local.Settle([]*waiter{w}, -1, nil, true) // it tries itself
		return 2, nil
	}
	m.settle(w, r, nil, sent)
	return r, nil
}

// handed is a one-shot waiter's hold given by a handoff, to be undone.
type handed struct {
	m     *Mutex
	owner string
}

// Undo removes the hold, as abandon.lua does for a one-shot owner.
func (h *handed) Undo(ctx context.Context) {
	m := h.m
	err := scripts.Abandon.Run(ctx, m.c.batch.Direct(), []any{m.name}, h.owner, m.argChannel, m.c.publish, argZero).Err()
	if err != nil {
		m.c.cfg.logger.Warn("relock: cannot release a handed lock too few replicas acknowledged; it expires with its lease",
			"name", m.name, "err", err)
	}
}
