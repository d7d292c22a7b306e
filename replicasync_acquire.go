package relock

import (
	"context"
	"errors"
	"fmt"

	"github.com/relock-go/relock/internal/batch"
	"github.com/relock-go/relock/internal/scripts"
)

// maxRedirects bounds how often a synced call is sent again after the
// cluster answered that the key's slot has moved.
const maxRedirects = 3

// acquire runs s, the script of an acquisition of the lock name, through
// the batcher, and returns its reply and the watchdog time it was sent at.
// granted says whether a reply means the script took the lock; a lost
// reply is undone with undo, as batch.Do does.
//
// With replica sync, and replicas to wait for, the script and a WAIT go in
// one pipeline on a connection to the master of name. A grant too few
// replicas acknowledged is undone with undo (owner-checked, as a lost
// reply is) and the call fails with an error wrapping ErrReplicaSync, or,
// with ReplicaSync.Retry, is tried again after a pause until ctx ends: a
// Lease is never made of it.
func (c *Client) acquire(ctx context.Context, name string, s *scripts.Script, keys []any, args []any, undo batch.Undo, granted func(int64) bool) (int64, int64, error) {
	if c.rsync == nil {
		sent := c.wd.Now()
		r, err := c.batch.Do(ctx, s, keys, args, undo)
		return r, sent, err
	}
	return c.acquireSynced(ctx, name, s, granted, func() ([]any, []any, batch.Undo) { return keys, args, undo })
}

// acquireSynced is acquire on a Client with replica sync. next returns
// what each try sends: the same call every time, or, for a call whose undo
// leaves its request marker saying "undone" (a Semaphore's), a new marker
// for each try after the first.
func (c *Client) acquireSynced(ctx context.Context, name string, s *scripts.Script, granted func(int64) bool, next func() ([]any, []any, batch.Undo)) (int64, int64, error) {
	rs := c.rsync
	redirects := 0
	keys, args, undo := next()
	for {
		t, err := rs.target(ctx, name)
		if err != nil {
			return 0, 0, err
		}
		var bs *batch.Sync
		if t != nil {
			bs = &t.bs
		}
		sent := c.wd.Now()
		r, wait, err := c.batch.DoSync(ctx, s, keys, args, undo, bs)
		if err != nil {
			if t != nil && rs.redirected(ctx, err, &redirects) {
				continue
			}
			return r, sent, err
		}
		if t == nil || !granted(r) {
			return r, sent, nil
		}
		serr := rs.judge(ctx, t, wait)
		if serr == nil {
			return r, sent, nil
		}
		c.stats.syncShort.Add(1)
		c.undo(ctx, undo)
		if !rs.cfg.Retry {
			return 0, 0, serr
		}
		if err := rs.pause(ctx); err != nil {
			if errors.Is(err, ErrClosed) {
				return 0, 0, err
			}
			return 0, 0, fmt.Errorf("%w (last attempt: %w)", err, serr)
		}
		keys, args, undo = next()
	}
}

// positive and nonNegative are the granted tests of Client.acquire for
// scripts that return a token when they take the lock, and for the read
// lock's, whose reply may be 0.
func positive(r int64) bool    { return r > 0 }
func nonNegative(r int64) bool { return r >= 0 }

// undo releases an acquisition whose Lease will not be handed out, within
// the cleanup timeout even if ctx has ended.
func (c *Client) undo(ctx context.Context, u batch.Undo) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.cfg.cleanup)
	defer cancel()
	u.Undo(ctx)
}

// redirected reports whether a synced call that failed with err should be
// sent again: on a cluster whose map changed (MOVED, ASK, TRYAGAIN,
// CLUSTERDOWN, READONLY), at most maxRedirects times, after the map is
// reloaded. Such a reply means the call did not run.
func (s *syncer) redirected(ctx context.Context, err error, n *int) bool {
	if s.cc == nil || !isServerError(err) || !isRedirect(err) || *n >= maxRedirects {
		return false
	}
	*n++
	s.cc.ReloadState(ctx)
	return s.pause(ctx) == nil
}

// handOffSynced is a release with replica sync that may grant the lock to
// w, a waiter of this Client: unlock.lua and a WAIT go in one pipeline on
// the master's connection, and w is handed its Lease only if enough
// replicas acknowledged it. Otherwise w's hold is released again and w
// tries for itself. With replica sync no grant goes to another Client.
func (m *Mutex) handOffSynced(ctx context.Context, l *Lease, w *localWaiter, keys []any, flag any) (int64, error) {
	s := m.c.rsync
	args := m.unlockArgs(l.arg(), flag, w, "")
	t, err := s.target(ctx, m.name)
	if err == nil && t == nil {
		sent := m.c.wd.Now()
		r, err := m.c.batch.Do(ctx, scripts.Unlock, keys, args, nil)
		m.settle(w, r, err, sent)
		return r, err
	}
	unlock := func() (int64, error) {
		r, err := m.c.batch.Do(ctx, scripts.Unlock, keys, m.unlockArgs(l.arg(), flag, nil, ""), nil)
		m.c.deliver(w, nil)
		return r, err
	}
	if err != nil {
		return unlock()
	}
	sent := m.c.wd.Now()
	cmd, wait := batch.Synced(ctx, scripts.Unlock, keys, args, &t.bs)
	r, err := cmd.Int64()
	if err != nil && s.cc != nil && isServerError(err) && isRedirect(err) {
		s.cc.ReloadState(ctx)
		return unlock()
	}
	if err != nil || r >= 0 {
		m.settle(w, r, err, sent)
		return r, err
	}
	if serr := s.judge(ctx, t, wait); serr != nil {
		// Released, but the waiter may not have it: free it again.
		m.c.stats.syncShort.Add(1)
		m.c.undo(ctx, &handed{m: m, owner: w.owner})
		m.c.deliver(w, nil)
		return 2, nil
	}
	m.pass(w, uint64(-r), sent)
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
	err := scripts.Abandon.Run(ctx, m.c.rdb, []any{m.name, m.channel, m.name}, h.owner, msgUnlock, m.c.publish, argZero).Err()
	if err != nil {
		m.c.cfg.logger.Warn("relock: cannot release a handed lock too few replicas acknowledged; it expires with its lease",
			"name", m.name, "err", err)
	}
}
