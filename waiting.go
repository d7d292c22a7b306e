package relock

import (
	"context"
	"time"

	"github.com/relock-go/relock/internal/wait"
)

// Waiting. Every call of every primitive that sleeps between attempts is
// a waiter in one of its Client's lists (internal/wait): Client.fair for
// FairMutex calls, Client.local for the others, under the name of their
// lock, queue or channel. Each primitive's call is its own wait.Call,
// whose attempts return what they got: mutex.go, fairmutex_wait.go,
// rwmutex_acquire.go, semaphore.go, permitsemaphore.go, latch.go. A
// release passes what it frees to a waiter of its own Client it has
// claimed, with a *Lease (nil: attempt); another Client's release reaches
// it with a *grant.

type (
	waiters = wait.List[*Lease]
	waiter  = wait.Waiter[*Lease]
	waitFor = wait.Wait[*Lease]
	grant   = wait.Grant
	result  = wait.Result[*Lease] // a lock call's attempt's
)

// fallbackRecheck bounds the sleep of a waiter that has no better time to
// try again (a semaphore's, a latch's): a missed message costs it at most
// this long.
const fallbackRecheck = 2 * time.Second

// newWaitEnv returns what the waiting core needs of c for the calls of
// list.
func (c *Client) newWaitEnv(list *waiters) *wait.Env[*Lease] {
	return &wait.Env[*Lease]{
		List:     list,
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

// waitLock runs the wait of q, a lock call whose first attempt returned
// first, in env's list (wait.Loop), and returns the Lease it took or that
// a release of this Client passed it.
func waitLock(ctx context.Context, env *wait.Env[*Lease], wt waitFor, q wait.Call[*Lease], first result) (*Lease, error) {
	got, passed, err := wait.Loop(ctx, env, wt, q, first)
	if passed != nil {
		return passed, err
	}
	return got, err
}

// tries is a waiting call that is never granted anything and always
// listens: it only attempts, and reports whether it took what it waits
// for (a Semaphore's, a latch's).
type tries func(ctx context.Context) (took bool, retry time.Duration, err error)

func (f tries) Attempt(ctx context.Context, _ bool) (wait.Result[bool], error) {
	took, retry, err := f(ctx)
	return wait.Result[bool]{Got: took, Retry: retry, Listen: true}, err
}

func (tries) Accept(*grant) bool { return false }
func (tries) Join()              {}
func (tries) End(bool)           {}

// waitTries runs the wait of try, whose first attempt failed, on wt: it
// sleeps fallbackRecheck at most before the next.
func (c *Client) waitTries(ctx context.Context, wt waitFor, try tries) error {
	_, _, err := wait.Loop(ctx, c.localEnv, wt, try, wait.Result[bool]{Retry: fallbackRecheck, Listen: true})
	return err
}

// newWaiter returns the waiter of a lock call of owner with cfg, which a
// release of the Client may claim if claimable.
func newWaiter(owner string, cfg lockConfig, claimable bool) *waiter {
	w := wait.NewWaiter[*Lease](owner, claimable)
	w.Lease, w.Fixed = cfg.lease, cfg.fixed
	return w
}
