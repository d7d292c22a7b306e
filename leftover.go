package relock

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
)

// Queue leaves that failed. A call that returns without the lock takes
// itself out of the lock's queue in Redis (leave); when that fails (the
// server does not answer within the cleanup timeout), its entry would hold
// the queue up until it expires, or until a grant to it runs out. The
// Client keeps the leave instead, and sends it first in its next call on
// the same name.

// leftovers is a Client's failed queue leaves, by lock name.
type leftovers struct {
	n      atomic.Int64 // how many, read without mu
	mu     sync.Mutex
	byName map[string][]func(context.Context) error
}

// leave runs f, which takes a call out of the queue of the lock name,
// within the cleanup timeout and ctx, and reports f's error. If f fails
// other than by a server's reply, or has not returned within the cleanup
// timeout (go-redis without ContextTimeoutEnabled waits for a server that
// does not answer until its read timeout, and the caller does not), f is
// kept for the next call on name (see retryLeaves).
func (c *Client) leave(ctx context.Context, name string, f func(context.Context) error) error {
	got := make(chan error, 1)
	if !within(c.cfg.cleanup, func() {
		lctx, cancel := context.WithTimeout(context.Background(), c.cfg.cleanup)
		defer cancel()
		// A call that gives up does not wait for a server that does not
		// answer.
		defer context.AfterFunc(ctx, cancel)()
		got <- f(lctx)
	}) {
		c.leftovers.keep(name, f)
		return fmt.Errorf("no answer within the cleanup timeout (%v)", c.cfg.cleanup)
	}
	err := <-got
	if err != nil && !isServerError(err) {
		c.leftovers.keep(name, f)
	}
	return err
}

// keep keeps f, a leave of name that failed, for the next call on name.
func (l *leftovers) keep(name string, f func(context.Context) error) {
	l.mu.Lock()
	if l.byName == nil {
		l.byName = make(map[string][]func(context.Context) error)
	}
	l.byName[name] = append(l.byName[name], f)
	l.mu.Unlock()
	l.n.Add(1)
}

// retryLeaves sends the leaves of name kept since they failed, before a
// call on name goes on; those that fail again are kept. It costs nothing
// when no leave failed.
func (c *Client) retryLeaves(ctx context.Context, name string) {
	l := &c.leftovers
	if l.n.Load() == 0 {
		return
	}
	l.mu.Lock()
	fs := l.byName[name]
	delete(l.byName, name)
	l.mu.Unlock()
	l.n.Add(-int64(len(fs)))
	for _, f := range fs {
		_ = c.leave(ctx, name, f)
	}
}
