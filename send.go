package relock

import (
	"context"
	"errors"
	"fmt"

	"github.com/relock-go/relock/internal/door"
	"github.com/relock-go/relock/internal/scripts"
)

// The send path. Every acquisition of every primitive (Client.acquire)
// and every write of the synchronizers that cannot be undone
// (Client.write) goes out through Client.send, as does a release that
// may pass the lock to a claimed waiter (mutex_release.go): what send adds
// to the door is replica sync, the WAIT that follows the call on its
// master's connection where the call's name has replicas to wait for
// (replicasync.go), and the judgement of that WAIT. The door
// (internal/door/batch.go) shares pipelines between concurrent calls and
// sends again a call that a cluster redirected, until it runs, ctx ends,
// the Client closes or the cluster has answered CLUSTERDOWN for
// door.ClusterDownFor. Other calls go to the door directly: other
// releases (Door.Do), undo and leave calls, force unlocks and reads
// (Door.Run), without replica sync; and the watchdog's renewals, as one
// round that judges its own WAITs (Door.DoRound, renew.go).

// call is one script call on the send path.
type call struct {
	name   string // the primitive's name: its master is where the WAIT goes
	script *scripts.Script
	keys   []any
	args   []any
	undo   door.Undo // undoes the call when its reply is lost (acquisitions); nil for none
	direct bool      // sent on its own, not through the door's batches
}

// answer is what one call got.
type answer struct {
	r    int64
	sent int64 // when the call was sent, by the watchdog's clock; 0 if it never was
	// t is how the call waited for replicas, nil where it did not; ack is
	// the reply of the WAIT that followed it, for the caller to judge
	// (syncer.judge).
	t   *syncTarget
	ack *door.Reply
}

// send runs k until it runs, as above, and returns its answer. An error
// while nothing ran (nothing was sent, or the call was redirected until
// ctx ended, the Client closed or the cluster stayed down) leaves
// answer.sent 0.
func (c *Client) send(ctx context.Context, k *call) (answer, error) {
	var a answer
	err := c.door.Resend(ctx, func() error {
		a = answer{}
		t, err := c.rsync.target(ctx, k.name) // nil without replicas to wait for
		if err != nil {
			return err
		}
		a = answer{sent: c.wd.Now(), t: t}
		a.r, a.ack, err = c.sendOnce(ctx, t, k)
		return err
	})
	if door.Redirected(err) {
		return answer{}, err // it never ran
	}
	return a, err
}

// sendOnce sends k once, followed by t's WAIT on the same connection when
// t is not nil.
func (c *Client) sendOnce(ctx context.Context, t *syncTarget, k *call) (int64, *door.Reply, error) {
	if !k.direct {
		return c.door.DoSync(ctx, k.script, k.keys, k.args, k.undo, t.doorSync())
	}
	if t == nil {
		v, err := c.door.Once(ctx, k.script, k.keys, k.args...).Int64()
		return v, nil, err
	}
	r, ack := c.door.Synced(ctx, k.script, k.keys, k.args, &t.ds)
	v, err := r.Int64()
	return v, ack, err
}

// acquire runs s, the script of an acquisition of name, on the send path,
// and returns its reply and the watchdog time it was sent at.
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

// Writes. The synchronizers' calls that change state other than by an
// acquisition (a release, a count, permits set, added or drained, a lease
// updated) cannot be undone: another process may have acted on the change
// already. With replicas to wait for, such a call's script and a WAIT go
// in one pipeline on the master's connection, as an acquisition's do; a
// change too few replicas acknowledged stays applied on the master, and
// the call fails with an error that wraps ErrReplicaSync and says so.
// ReplicaSync.Retry does not apply to them: a change repeated would be
// applied twice.

// writeCall is one state-changing script call that cannot be undone.
type writeCall struct {
	name    string // the primitive's name: its master is where the WAIT goes
	script  *scripts.Script
	keys    []any
	args    []any
	marker  string           // the call's request marker, or "" if it has none
	direct  bool             // sent on its own, not through the door's batches
	changed func(int64) bool // whether a reply means the call changed something
}

// write runs w and returns its reply. A call with a request marker whose
// reply is lost (a transport error, or ctx ending while it is under way)
// is run again with the same marker within the cleanup timeout, so that it
// is applied exactly once when write returns nil; if that fails too, the
// first error is returned and the outcome is unknown.
//
// Replica sync is a property of the call, as for Client.acquire: where the
// master of w.name has replicas to wait for, the script (and a call run
// again) is followed by a WAIT in one pipeline on its connection. A change
// too few replicas acknowledged is counted in Stats.SyncShort and returned
// with an error for which isUnconfirmed holds: it wraps ErrReplicaSync and
// says the change was applied on the master. Without replicas to wait for,
// write sends the script alone.
func (c *Client) write(ctx context.Context, w writeCall) (int64, error) {
	if err := c.checkOpen(); err != nil {
		return 0, err // nothing was sent
	}
	k := &call{name: w.name, script: w.script, keys: w.keys, args: w.args, direct: w.direct}
	a, err := c.send(ctx, k)
	if a.sent == 0 {
		return 0, err // nothing ran
	}
	if lostReply(&w, err) {
		var err2 error
		if a.r, a.ack, err2 = c.resend(ctx, a.t, &w); err2 != nil {
			return 0, err
		}
		err = nil
	}
	if err != nil || a.t == nil || !w.changed(a.r) {
		return a.r, err
	}
	if serr := c.rsync.judge(ctx, a.t, a.ack); serr != nil {
		c.stats.syncShort.Add(1)
		return a.r, &unconfirmedError{err: serr}
	}
	return a.r, nil
}

// resend runs w again, with the same request marker, after its reply was
// lost, within the cleanup timeout. With t, that is EVAL, then PEXPIRE of
// the marker, then the WAIT, in one pipeline on the master. If the first
// send applied the call, this one finds the marker and writes nothing of
// its own; refreshing the marker's expiry is a write that makes this
// connection's last write as recent as the first send's, so that the WAIT
// covers the call whichever send applied it. (Where neither applied
// anything, there is no marker and nothing to cover.)
func (c *Client) resend(ctx context.Context, t *syncTarget, w *writeCall) (int64, *door.Reply, error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.cfg.cleanup)
	defer cancel()
	if t == nil {
		v, err := c.door.Run(ctx, w.script, w.keys, w.args...).Int64()
		return v, nil, err
	}
	xs := []door.Exchange{
		{Cmd: door.Eval(w.script, w.keys, w.args)},
		{Cmd: door.Cmd{Args: []any{"pexpire", w.marker, c.markerTTL().Milliseconds()}, Key: 1}},
		{Cmd: t.node.ack(t.need)},
	}
	t.ds.Node.Pipe(ctx, xs)
	v, err := xs[0].Reply.Int64()
	return v, &xs[2].Reply, err
}

// lostReply reports whether err leaves the outcome of w unknown and w can
// be run again to settle it: w has a request marker, and err is neither a
// reply from the server nor the door's refusal of a call it never sent.
func lostReply(w *writeCall, err error) bool {
	return err != nil && w.marker != "" && !isServerError(err) && !errors.Is(err, ErrClosed)
}

// unconfirmedError is the error of a write that was applied on the master
// but that too few replicas acknowledged. It wraps the error of the WAIT's
// judgement, and so ErrReplicaSync, and matches ErrUnconfirmed.
type unconfirmedError struct{ err error }

func (e *unconfirmedError) Error() string {
	return e.err.Error() + "; the change was applied on the master but not confirmed by enough replicas, so a failover may lose it: do not repeat it"
}

func (e *unconfirmedError) Unwrap() error { return e.err }

// Is makes the error match ErrUnconfirmed (and, through Unwrap,
// ErrReplicaSync).
func (e *unconfirmedError) Is(target error) bool { return target == ErrUnconfirmed }

// isUnconfirmed reports whether err says a write was applied on the
// master but too few replicas acknowledged it.
func isUnconfirmed(err error) bool {
	if err == nil {
		return false // before u, which escapes: no allocation on success
	}
	var u *unconfirmedError
	return errors.As(err, &u)
}

// always, isOne, isZero and nonZero are, with positive and nonNegative,
// the changed tests of writeCall and the granted tests of Client.acquire
// for the synchronizers' scripts.
func always(int64) bool    { return true }
func isOne(r int64) bool   { return r == 1 }
func isZero(r int64) bool  { return r == 0 }
func nonZero(r int64) bool { return r != 0 }
