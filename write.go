package relock

import (
	"context"
	"errors"

	"github.com/relock-go/relock/internal/door"
	"github.com/relock-go/relock/internal/scripts"
)

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
