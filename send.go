package relock

import (
	"context"

	"github.com/redis/go-redis/v9"

	"github.com/relock-go/relock/internal/batch"
	"github.com/relock-go/relock/internal/scripts"
)

// The send path. Every script call that acquires, passes or changes state
// goes out through Client.send: the batcher shares pipelines between
// concurrent calls, and where the master of the call's name has replicas
// to wait for (replicasync.go), the script and a WAIT go in one pipeline
// on that master's connection. A call a cluster redirects (MOVED, ASK,
// TRYAGAIN, CLUSTERDOWN: the script did not run) is sent again after a
// short pause, to the slot's master found again, until it runs, ctx ends,
// the Client closes, or the cluster has answered CLUSTERDOWN for
// batch.ClusterDownFor (Batcher.Resend). The callers only judge the answer: an acquisition (acquire.go), a
// write that cannot be undone (write.go), a release that passes the lock
// to a waiter (mutex_release.go). The watchdog's renewals, many calls due
// together, go through the same batcher as one round (batch.DoRound,
// renew.go), with the same replica-sync targets, and are judged the same
// way.

// call is one script call on the send path.
type call struct {
	name   string // the primitive's name: its master is where the WAIT goes
	script *scripts.Script
	keys   []any
	args   []any
	undo   batch.Undo // undoes the call when its reply is lost (acquisitions); nil for none
	direct bool       // sent on its own, not through the batcher
}

// answer is what one call got.
type answer struct {
	r    int64
	sent int64 // when the call was sent, by the watchdog's clock; 0 if it never was
	// t is how the call waited for replicas, nil where it did not; ack is
	// the WAIT that followed it, for the caller to judge (syncer.judge).
	t   *syncTarget
	ack redis.Cmder
}

// send runs k until it runs, as above, and returns its answer. An error
// while nothing ran (nothing was sent, or the call was redirected until
// ctx ended, the Client closed or the cluster stayed down) leaves
// answer.sent 0.
func (c *Client) send(ctx context.Context, k *call) (answer, error) {
	var a answer
	err := c.batch.Resend(ctx, func() error {
		a = answer{}
		t, err := c.rsync.target(ctx, k.name) // nil without replicas to wait for
		if err != nil {
			return err
		}
		a = answer{sent: c.wd.Now(), t: t}
		a.r, a.ack, err = c.sendOnce(ctx, t, k)
		return err
	})
	if batch.Redirected(err) {
		return answer{}, err // it never ran
	}
	return a, err
}

// sendOnce sends k once, followed by t's WAIT on the same connection when
// t is not nil.
func (c *Client) sendOnce(ctx context.Context, t *syncTarget, k *call) (int64, redis.Cmder, error) {
	if !k.direct {
		return c.batch.DoSync(ctx, k.script, k.keys, k.args, k.undo, t.batchSync())
	}
	if t == nil {
		v, err := k.script.Run(ctx, c.rdb, k.keys, k.args...).Int64()
		return v, nil, err
	}
	cmd, ack := batch.Synced(ctx, k.script, k.keys, k.args, &t.bs)
	v, err := cmd.Int64()
	return v, ack, err
}
