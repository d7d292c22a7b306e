package relock

import (
	"context"

	"github.com/relock-go/relock/internal/door"
	"github.com/relock-go/relock/internal/scripts"
)

// The send path. Every call to Redis goes through the Client's door
// (internal/door). The script calls that acquire or change state and may
// wait for replicas go through Client.send: the door shares pipelines
// between concurrent calls, and where the master of the call's name has
// replicas to wait for (replicasync.go), the script and a WAIT go in one
// pipeline on that master's connection. A call a cluster redirects (MOVED,
// ASK, TRYAGAIN, CLUSTERDOWN: the script did not run) is sent again after
// a short pause, to the slot's master found again, until it runs, ctx
// ends, the Client closes, or the cluster has answered CLUSTERDOWN for
// door.ClusterDownFor (Door.Resend). The callers only judge the answer:
// an acquisition (acquire.go), a write that cannot be undone (write.go),
// a release that passes the lock to a waiter (mutex_release.go).
// The watchdog's renewals, many calls due together, go through the door
// as one round (Door.DoRound, renew.go), with the same replica-sync
// targets, and are judged the same way. Releases and cleanup calls go
// through the door directly (Door.Do batched, Door.Run on their own).

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
