package relock

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"
)

// WithSpin makes a lock call, or a PermitSemaphore's Acquire, wait by
// polling instead of sleeping on the lock's release channel: after a failed attempt it sleeps a random time
// between min and a bound that doubles with every attempt up to max (never
// past the holder's remaining TTL), then tries again. It subscribes to
// nothing, so it suits deployments with very many locks or without pub/sub,
// at the price of slower handoffs and more attempts under contention. The
// backoff keeps no state between calls. min must be positive and max at
// least min, or the call fails with ErrInvalidOption.
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

// spin retries attempt by the backoff b until it succeeds or fails, ctx
// ends or the Client is closed; the first attempt, already made, found the
// lock held for ttl more (negative: unknown). No sleep is longer than most,
// when most is positive. Every lock and permit call with WithSpin waits
// here; op names the call in errors.
func (c *Client) spin(ctx context.Context, op, name string, b *backoff, ttl, most time.Duration, attempt func() (bool, time.Duration, error)) error {
	next := func(n int, ttl time.Duration) time.Duration {
		d := b.delay(n, ttl)
		if most > 0 {
			d = min(d, most)
		}
		return d
	}
	timer := time.NewTimer(next(0, ttl))
	defer timer.Stop()
	for n := 1; ; n++ {
		select {
		case <-timer.C:
		case <-ctx.Done():
			return fmt.Errorf("relock: %s %q: %w", op, name, ctx.Err())
		case <-c.closing:
			return ErrClosed
		}
		ok, ttl, err := attempt()
		if ok || err != nil {
			return err
		}
		timer.Reset(next(n, ttl))
	}
}

// spinLock is spin for a lock call, whose attempts return its Lease or
// the holder's TTL.
func (c *Client) spinLock(ctx context.Context, op, name string, b *backoff, ttl, most time.Duration, attempt func(context.Context) (*Lease, time.Duration, error)) (l *Lease, err error) {
	c.stats.Waits.Add(1)
	err = c.spin(ctx, op, name, b, ttl, most, func() (bool, time.Duration, error) {
		var err error
		l, ttl, err = attempt(ctx)
		return l != nil, ttl, err
	})
	return l, err
}
