package relock

import (
	"context"
	"errors"
	"fmt"

	"github.com/relock-go/relock/internal/door"
	"github.com/relock-go/relock/internal/scripts"
)

// acquire runs s, the script of an acquisition of name, on the send path
// (send.go), and returns its reply and the watchdog time it was sent at.
// granted says whether a reply means the script took what it asked for; a
// lost reply is undone with undo, as Door.Do does. Every acquisition of
// every primitive takes this path.
//
// Replica sync is a property of the call: where the master of name has
// replicas to wait for (replicasync.go), the script and a WAIT go in one
// pipeline on a connection to it. A grant too few replicas acknowledged is
// undone with undo and the call fails with an error wrapping
// ErrReplicaSync, or, with ReplicaSync.Retry, is tried again after a pause
// until ctx ends: a hold is never made of it. again, when not nil, gives
// the keys and undo of each try after the first, for a call whose undo
// leaves its request marker saying "undone" (a Semaphore's).
func (c *Client) acquire(ctx context.Context, name string, s *scripts.Script, keys, args []any, undo door.Undo,
	granted func(int64) bool, again func() ([]any, door.Undo)) (int64, int64, error) {
	if err := c.checkOpen(); err != nil {
		return 0, 0, err
	}
	rs := c.rsync
	for {
		a, err := c.send(ctx, &call{name: name, script: s, keys: keys, args: args, undo: undo})
		if err != nil || a.t == nil || !granted(a.r) {
			return a.r, a.sent, err
		}
		serr := rs.judge(ctx, a.t, a.ack)
		if serr == nil {
			return a.r, a.sent, nil
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
		if again != nil {
			keys, undo = again()
		}
	}
}

// positive and nonNegative are the granted tests of Client.acquire for
// scripts that return a token when they take the lock, and for the read
// lock's, whose reply may be 0.
func positive(r int64) bool    { return r > 0 }
func nonNegative(r int64) bool { return r >= 0 }

// undo releases an acquisition whose hold will not be returned to its caller, within
// the cleanup timeout even if ctx has ended.
func (c *Client) undo(ctx context.Context, u door.Undo) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.cfg.cleanup)
	defer cancel()
	u.Undo(ctx)
}
