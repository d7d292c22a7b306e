package relock

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/relock-go/relock/internal/door"
	"github.com/relock-go/relock/internal/scripts"
)

// countName is what the handles of Semaphore, PermitSemaphore and
// CountDownLatch start with: the Client, the name of the count in Redis,
// its channel, what is wrong with the name, and the request markers that
// make the handle's writes apply once. It holds what the three do alike:
// check a call, read the count, set it once, and write it once.
type countName struct {
	c       *Client
	name    string
	channel string
	err     error // an invalid name, returned by every call
	req     *requests
	// held is a PermitSemaphore's zset of held permits, whose type its
	// writes of the count check too (request.lua); nil for the others.
	held any
}

// newCountName returns the handle of the count name, told on channel, whose
// request markers start with requestPrefix; an invalid name is kept as the
// error of every call.
func newCountName(c *Client, name, channel, requestPrefix string) countName {
	h := countName{c: c, name: name}
	if h.err = checkName(name); h.err == nil {
		h.channel = channel
		h.req = newRequests(c, requestPrefix, name)
	}
	return h
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

// read returns the count as stored: 0 when the key does not exist. op
// names the call in errors.
func (h *countName) read(ctx context.Context, op string) (int, error) {
	v, err := h.c.door.Command(ctx, door.Cmd{Args: []any{"get", h.name}, Key: 1}).Text()
	if errors.Is(err, door.Nil) {
		return 0, nil
	}
	if err != nil {
		return 0, opError(ctx, op, h.name, err)
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		return 0, fmt.Errorf("relock: %s %q: %w: the key holds %q, not a number", op, h.name, ErrWrongType, clip(v))
	}
	return n, nil
}

// clip returns s, cut to its first 32 bytes when longer, for an error.
func clip(s string) string {
	if len(s) > 32 {
		return s[:32] + "..."
	}
	return s
}

// trySet runs s, a script that sets the count to n unless it is set
// (sem_trysetpermits.lua, latch_trysetcount.lua), and reports whether it
// did. A count set on the master that too few replicas acknowledged is
// reported as set, with an error wrapping ErrReplicaSync.
func (h *countName) trySet(ctx context.Context, op string, s *scripts.Script, n int) (bool, error) {
	if err := h.check(ctx, op, n); err != nil {
		return false, err
	}
	v, err := h.writeOnce(ctx, op, s, isOne, func(k scripts.Marked) ([]any, []any) {
		return scripts.TrySetRequest{Keys: k, N: n, Publish: h.c.argPublish, MarkerTTL: h.c.argMarkerTTL, Channel: h.channel}.Build()
	})
	return scripts.Set(v), err
}

// writeOnce runs s on the count, built by build from its KEYS with a
// fresh request marker (and a PermitSemaphore's held permits, which its
// scripts check too), so that it applies once (requests.run), and returns
// its reply; an error is wrapped with op and the name, the reply kept
// beside it.
func (h *countName) writeOnce(ctx context.Context, op string, s *scripts.Script, changed func(int64) bool,
	build func(scripts.Marked) (keys, args []any)) (int64, error) {
	k := h.req.marked(h.held)
	keys, args := build(k)
	v, err := h.req.run(ctx, s, keys, args, k.Marker, changed)
	if err != nil {
		return v, opError(ctx, op, h.name, err)
	}
	return v, nil
}
