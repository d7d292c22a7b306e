package relock

import (
	"context"
	"fmt"
)

// countName is what the handles of Semaphore, PermitSemaphore and
// CountDownLatch start with: the Client, the name of the count in Redis,
// its channel, what is wrong with the name, and the request markers that
// make the handle's writes apply once.
type countName struct {
	c       *Client
	name    string
	channel string
	err     error // an invalid name, returned by every call
	req     *requests
}

// Name returns the name, which is also the Redis key of the count: the
// permits available of a semaphore, a latch's count.
func (h *countName) Name() string { return h.name }

// check refuses a call op with n on an invalid handle, a closed Client, an
// n that is not positive, or an ended ctx.
func (h *countName) check(ctx context.Context, op string, n int) error {
	if h.err != nil {
		return h.err
	}
	if err := h.c.checkOpen(); err != nil {
		return err
	}
	return checkCall(ctx, op, h.name, n)
}

// checkCall checks a permit or count argument and ctx.
func checkCall(ctx context.Context, op, name string, n int) error {
	if n <= 0 {
		return fmt.Errorf("%w: %s %q: %d is not a positive number", ErrInvalidOption, op, name, n)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("relock: %s %q: %w", op, name, err)
	}
	return nil
}
