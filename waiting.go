package relock

import (
	"context"
	"time"

	"github.com/relock-go/relock/internal/wait"
)

// Waiting. Every call of every primitive that sleeps between attempts is
// a waiter in one of its Client's lists (internal/wait): Client.fair for
// FairMutex calls, Client.local for the others, under the name of their
// lock, queue or channel. A release passes what it frees to a waiter of
// its own Client it has claimed, with a *Lease (nil: attempt); another
// Client's release reaches it with a *grant. Each primitive's call is its
// own wait.Call: mutex.go, fairmutex_wait.go, rwmutex_acquire.go,
// semaphore.go, permitsemaphore.go, latch.go.

type (
	waiters = wait.List[*Lease, *grant]
	waiter  = wait.Waiter[*Lease, *grant]
	waitFor = wait.Wait[*Lease, *grant]
	tries   = wait.Tries[*grant]
	turn    = wait.Turn // an RWMutex's writers' turn (Client.turns)
)

// fallbackRecheck bounds the sleep of a waiter that has no better time to
// try again (a semaphore's, a latch's).
const fallbackRecheck = wait.Fallback

// newWaitEnv returns what the waiting core needs of c.
func (c *Client) newWaitEnv() *wait.Env[*Lease, *grant] {
	return &wait.Env[*Lease, *grant]{
		Hub:      c.hub,
		Closing:  c.closing,
		Closed:   ErrClosed,
		Stats:    &c.stats.Stats,
		Route:    c.routeGrant,
		GrantTTL: grantTTL,
		Unwanted: c.releaseUnwanted,
		Now:      c.wd.Now,
	}
}

// waitQueued runs the waiting call q as wt tells (wait.Loop); retry is how
// long it sleeps first at most. It returns the Lease a release of this
// Client passed the call, if any.
func (c *Client) waitQueued(ctx context.Context, wt waitFor, q wait.Call[*grant], retry time.Duration) (*Lease, error) {
	if wt.List == nil {
		wt.List = &c.local
	}
	return wait.Loop(ctx, c.waitEnv, wt, q, retry)
}

// newWaiter returns the waiter of a call of owner with data call, which a
// release of the Client may claim if claimable.
func newWaiter(owner string, call any, claimable bool) *waiter {
	return wait.NewWaiter[*Lease, *grant](owner, call, claimable)
}

// config returns the call's lock config.
func (lc *lockCall) config() lockConfig { return lc.cfg }

// heldFor returns the lock config of the lock call waiting in w (a
// Mutex's, a FairMutex's or an RWMutex writer's): the lease and kind of
// the hold a release that passes it the lock gives it.
func heldFor(w *waiter) lockConfig { return w.Call.(interface{ config() lockConfig }).config() }
