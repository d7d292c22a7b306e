package relock

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/relock-go/relock/internal/layout"
	"github.com/relock-go/relock/internal/scripts"
	"github.com/relock-go/relock/internal/wait"
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
//   - to a waiting call of the releasing Client, the release passes the
//     Lease over in process (a local waiter it has claimed takes the place
//     of the first one when that is the Client's own too);
//   - to another Client's waiter, the release publishes the grant on that
//     Client's grant channel ("relock_grant:<uuid>", one per slot on a
//     cluster), and the lock holds for at most grantTTL until the waiter
//     has confirmed it, so that a waiter that died costs the next one at
//     most that long: every waiting call attempts at least every grantTTL
//     (the next Client in the queue is woken to attempt only when the
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
	if layout.IsGrants(channel) {
		return time.Second
	}
	return 0
}

// waiterKind returns the kind of a waiting call's member in the queue of
// waiters (scripts.Member): a reentrant owner's, a one-shot owner's of a
// Client with replica sync (granted by its own Client's releases only),
// or another one-shot owner's.
func (c *Client) waiterKind(reentrant bool) scripts.Kind {
	switch {
	case reentrant:
		return scripts.Reentrant
	case c.rsync.mayWait():
		return scripts.Synced
	}
	return scripts.OneShot
}

// grantChannel returns the channel on which grants to the Client's waiters
// for locks of name's slot arrive.
func (c *Client) grantChannel(name string) string {
	return layout.Grants(c.id, name, c.cluster)
}

// routeGrant is the hub's policy for a grant channel: it passes a grant
// ("g:<token>:<ttl ms>:<age ms>:<owner>") or a call to check again
// ("n:<ttl ms>:<owner>", 0 for now) to the waiting Mutex, RWMutex or
// PermitSemaphore call of that owner, and a grant ("fg:", the same) or a
// call to check now ("fn:<owner>") to the waiting FairMutex call of that
// owner, if it is still here, and wakes no other. A force unlock of a
// lock the Client holds ("h:<lock key>") has the watchdog renew its holds
// of that lock at once, which finds them gone.
func (c *Client) routeGrant(payload string) int {
	kind, rest, _ := strings.Cut(payload, ":")
	var g *wait.Grant
	var recheck time.Duration // 0: now
	var owner string
	list := &c.local
	switch kind {
	case "h":
		c.wd.RenewKey(rest)
		return 0
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

// forced follows a force unlock of the lock key by this Client: when the
// lock was held (held), the Client's own holds of it are renewed at once,
// which finds them gone. Other Clients' holders are told by the script
// (routeGrant's "h:").
func (c *Client) forced(key string, held bool) {
	if held {
		c.wd.RenewKey(key)
	}
}

// parseGrant reads "<token>:<ttl ms>:<ms>" and what follows it after a
// colon, if anything; the third number is stored as the grant's age, for
// the caller to interpret.
func parseGrant(s string) (g *wait.Grant, rest string, ok bool) {
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
	return &wait.Grant{Token: token, TTL: time.Duration(ttl) * time.Millisecond, Age: time.Duration(age) * time.Millisecond}, rest, true
}

// granted watches l, a lock granted by another Client's release with g,
// whose lock call's first attempt that may have queued it was sent at
// from, unless the grant may have run out already (the call then attempts,
// and takes the lock if it is still its own): the lock lives at least ttl
// after the grant, which came age after that attempt reached the server,
// so l's deadline counts from there. A grant shorter than the call's lease
// is confirmed if still held after a quarter of it.
func (c *Client) granted(l *Lease, group int, cfg lockConfig, g *wait.Grant, from int64) bool {
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
func (c *Client) grantDeadline(g *wait.Grant, from int64) (int64, bool) {
	life := g.Age + g.TTL
	deadline := from + int64(life-watchdog.Drift(life))
	return deadline, deadline-c.wd.Now() >= int64(g.TTL/4)
}

// confirmGrant has the watchdog renew e, a hold granted with g, to the
// call's lease a quarter of the grant after it came, if the grant is
// shorter; and counts the grant.
func (c *Client) confirmGrant(e *watchdog.Entry, cfg lockConfig, g *wait.Grant) {
	if g.TTL < cfg.lease {
		// A hold shorter than a quarter of the grant never needs it.
		c.wd.Confirm(e, cfg.lease, g.TTL/4)
	}
	c.stats.acquired.Add(1)
	c.stats.handoffs.Add(1)
}

// passGranted passes next, the hold a release sent at sent had Redis grant
// to w, a waiter of this Client it claimed, to w's call, with the
// watchdog's group group: a release that also reserved the tokens after
// next's (scripts.UnlockReply.Reserved) starts the Client's run of the
// waiters under name. A call that had gone meanwhile has next released.
func (c *Client) passGranted(next *Lease, w *wait.Waiter, reserved bool, group int, name string, sent int64) {
	if reserved {
		next.run = wait.NewRun(next.token+1, runBlock)
	}
	c.watch(next, group, w.Lease, w.Fixed, sent)
	if next.run != nil {
		c.local.SetRun(name, next)
	}
	c.stats.acquired.Add(1)
	c.stats.handoffs.Add(1)
	if !c.local.Settle([]*wait.Waiter{w}, 0, next, false) {
		c.releaseUnwanted(next)
	}
}

// releaseUnwanted releases a lock passed to a call that has gone, within
// the cleanup timeout.
func (c *Client) releaseUnwanted(l *Lease) {
	ctx, cancel := context.WithTimeout(c.ctx, c.cfg.cleanup)
	defer cancel()
	// The call leaving the queue may free the hold at the same time, so
	// it is not passed on in process: the next holder's would rest on it.
	l.unwanted = true
	if err := l.Unlock(ctx); err != nil && !errors.Is(err, ErrNotHeld) {
		c.cfg.logger.Warn("relock: cannot release a lock passed to a waiter that left; it expires with its lease",
			"name", l.name, "err", err)
	}
}
