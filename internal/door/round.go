package door

import (
	"context"

	"github.com/relock-go/relock/internal/scripts"
)

// A round: many script calls sent at once, outside the queue of batched
// calls (DoRound), for a watchdog's renewals.

// Call is one script call of a round (DoRound).
type Call struct {
	Script *scripts.Script
	Keys   []any
	Args   []any
	Acked  *Sync // the replica acknowledgement it asks for, or nil

	Reply Reply  // its outcome, once DoRound returns
	Ack   *Reply // the reply of the WAIT that followed it, with Acked
	// Resent tells that a cluster redirected the call, which went again
	// on its own, without a WAIT.
	Resent bool
}

// DoRound sends calls at once, as a batch goes: those without Acked in
// one pipeline, those with it in one pipeline per node, each ending with
// its WAIT, at the same time. A call that a cluster redirects is sent
// again on its own (by Run, so again while the slot moves), without a
// WAIT. A watchdog's renewals go this way: they are many, due together,
// and must not wait their turn behind lock calls in the queue.
func (d *Door) DoRound(ctx context.Context, calls []*Call) {
	reqs := make([]*request, len(calls))
	for i, c := range calls {
		reqs[i] = &request{script: c.Script, keys: c.Keys, args: c.Args, acked: c.Acked}
	}
	plain, nodes := byNode(reqs)
	together(nodes, func(g *syncGroup) {
		replies, acks := runSynced(ctx, g, g.reqs)
		for i, r := range g.reqs {
			r.reply, r.ack = replies[i], acks[i]
		}
	}, func() {
		xs := d.pipe(ctx, plain, nil)
		for i, r := range plain {
			r.reply = xs[i].Reply
		}
	}, len(plain) > 0)
	cluster := d.drv.Cluster()
	reloaded := false
	for i, c := range calls {
		c.Reply, c.Ack = reqs[i].reply, reqs[i].ack
		err := c.Reply.err
		// A call sent to a node that a failover made a replica is
		// answered READONLY: on a cluster, its slot's master is found
		// again, as for a redirection.
		demoted := c.Acked != nil && cluster && ClassOf(err) == ReadOnly
		if !Redirected(err) && !demoted { // its slot is not on the move
			continue
		}
		if cluster && !reloaded {
			d.drv.Reload(ctx)
			reloaded = true
		}
		c.Reply = d.Run(ctx, c.Script, c.Keys, c.Args...)
		c.Resent = true
	}
}
