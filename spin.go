package relock

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/relock-go/relock/internal/wait"
)

// WithSpin makes a lock call, or a PermitSemaphore's Acquire, wait by
// polling instead of sleeping on the lock's release channel: after a failed
// attempt it sleeps a random time between min and a bound that doubles with
// every attempt up to max (never past the holder's remaining TTL), then
// tries again. It subscribes to nothing, so it suits deployments with very
// many locks or without pub/sub, at the price of slower handoffs and more
// attempts under contention. The backoff keeps no state between calls. min
// must be positive and max at least min, or the call fails with
// ErrInvalidOption.
func WithSpin(min, max time.Duration) LockOption {
	return func(c *lockConfig) error {
		if min <= 0 || max < min {
			return fmt.Errorf("%w: spin backoff from %v to %v", ErrInvalidOption, min, max)
		}
		c.spin = &backoff{min: min, max: max}
		return nil
	}
}

// backoff is exponential backoff with full jitter.
type backoff struct {
	min, max time.Duration
}

// delay returns the sleep before attempt n (0 for the first retry), given
// the holder's remaining ttl (negative when unknown).
func (b *backoff) delay(n int, ttl time.Duration) time.Duration {
	bound := b.max
	if n < 32 && b.min<<n < b.max && b.min<<n > 0 {
		bound = b.min << n
	}
	d := b.min + rand.N(bound-b.min+1)
	if ttl >= 0 && d > ttl+time.Millisecond {
		d = ttl + time.Millisecond
	}
	return d
}

// spin is the wait of a call with WithSpin: it makes q's attempts by the
// backoff b, never sleeping past the time an attempt's Result gives, until
// one takes what the call waits for or fails, ctx ends or the Client is
// closed; first is the result of the call's first attempt, made before.
// It runs q as wait.Loop does, but for the grants and passes it never
// listens for: q ends as the call returns, leaving the queue in Redis if
// it did not get what it waits for. op names the call in errors.
func spin[R comparable](ctx context.Context, c *Client, op, name string, b *backoff, first wait.Result[R], q wait.Call[R]) (got R, err error) {
	c.stats.Waits.Add(1)
	defer func() { q.End(got == *new(R)) }()
	next := func(n int, r wait.Result[R]) time.Duration {
		if d := b.delay(n, -1); r.Retry <= 0 || d < r.Retry {
			return d
		}
		return r.Retry
	}
	timer := time.NewTimer(next(0, first))
	defer timer.Stop()
	for n := 1; ; n++ {
		select {
		case <-timer.C:
		case <-ctx.Done():
			return got, fmt.Errorf("relock: %s %q: %w", op, name, ctx.Err())
		case <-c.closing:
			return got, ErrClosed
		}
		r, err := q.Attempt(ctx, false)
		if got = r.Got; got != *new(R) || err != nil {
			return got, err
		}
		timer.Reset(next(n, r))
	}
}
