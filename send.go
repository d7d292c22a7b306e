package relock

import (
	"context"
	"time"

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
// short pause, to the slot's master found again, until it runs or ctx
// ends. The callers only judge the answer: an acquisition (acquire.go), a
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

// send runs k until it runs or ctx ends, as above, and returns its answer.
// An error while nothing ran (nothing was sent, or ctx ended while a
// cluster redirected the call) leaves answer.sent 0.
func (c *Client) send(ctx context.Context, k *call) (answer, error) {
	var pause time.Duration // between redirected tries
	for {
		t, err := c.rsync.target(ctx, k.name) // nil without replicas to wait for
		if redirected(err) {
			if err = c.batch.AwaitRedirect(ctx, err, &pause); err == nil {
				continue
			}
		}
		if err != nil {
			return answer{}, err
		}
		a := answer{sent: c.wd.Now(), t: t}
		a.r, a.ack, err = c.sendOnce(ctx, t, k)
		if t != nil && redirected(err) {
			// The slot moved: find its master again. (Without t the
			// batcher sends it again itself.)
			if err = c.batch.AwaitRedirect(ctx, err, &pause); err == nil {
				continue
			}
			return answer{}, err // it never ran
		}
		return a, err
	}
}

// sendOnce runs k once, followed by t's WAIT on the same connection when t
// is not nil.
func (c *Client) sendOnce(ctx context.Context, t *syncTarget, k *call) (int64, redis.Cmder, error) {
	if !k.direct {
		return c.batch.DoSync(ctx, k.script, k.keys, k.args, k.undo, t.batchSync())
	}
	if t == nil {
		v, err := k.script.Run(ctx, c.batch.Direct(), k.keys, k.args...).Int64()
		return v, nil, err
	}
	cmd, ack := batch.Synced(ctx, k.script, k.keys, k.args, &t.bs)
	v, err := cmd.Int64()
	return v, ack, err
}
