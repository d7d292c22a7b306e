package relock

import (
	"context"
	"time"

	"github.com/relock-go/relock/internal/wait"
)

// A waiting call that only attempts: a Semaphore's or a latch's. It is
// never granted or passed anything, always listens on its channel, and
// sleeps fallbackRecheck at most between attempts, since its channel's
// messages tell it of nothing it could time.

// fallbackRecheck bounds the sleep of a waiter that has no better time to
// try again (a semaphore's, a latch's): a missed message costs it at most
// this long.
const fallbackRecheck = 2 * time.Second

// tries is a waiting call that only attempts (wait.Call), and reports
// whether it took what it waits for.
type tries func(ctx context.Context) (took bool, retry time.Duration, err error)

func (f tries) Attempt(ctx context.Context, _ bool) (wait.Result[bool], error) {
	took, retry, err := f(ctx)
	return wait.Result[bool]{Got: took, Retry: retry, Listen: true}, err
}

func (tries) Accept(*wait.Grant) bool { return false }
func (tries) Join()                   {}
func (tries) End(bool)                {}

// waitTries runs the wait of try, whose first attempt failed, on wt: it
// sleeps fallbackRecheck at most before the next.
func (c *Client) waitTries(ctx context.Context, wt wait.Wait, try tries) error {
	_, err := wait.Loop(ctx, c.localEnv, wt, try, wait.Result[bool]{Retry: fallbackRecheck, Listen: true})
	return err
}
