package relock

import (
	"context"
	"sync"

	"github.com/redis/go-redis/v9"
)

// renewGroup is a renewal round's calls for one master.
type renewGroup struct {
	t     syncTarget
	calls []*renewCall
	wait  redis.Cmder
}

// sendRenewalsSynced sends a round's renewal calls with replica sync: the
// calls for each master go in one pipeline on a connection to it, followed
// by one WAIT. A WAIT too few replicas answer is logged and counted
// (Stats.RenewSyncShort), and its calls are marked short: their holds are
// not declared lost, since the master has them and the next round asks
// again, but their local deadlines do not move either. A replica promoted
// after such a renewal has the hold with the TTL of the last renewal it
// acknowledged, so the holder must count from that one to hear of the
// loss before another client can be granted the lock there. Calls a
// cluster redirected (its map changed) are sent again through the cluster
// client, without a WAIT, and are short too.
func (c *Client) sendRenewalsSynced(ctx context.Context, calls []*renewCall) {
	s := c.rsync
	var plain []*renewCall
	var groups []*renewGroup
	for _, cl := range calls {
		t, err := s.target(ctx, cl.keys[0].(string))
		if err != nil {
			c.cfg.logger.Debug("relock: renewing without replica sync", "err", err)
		}
		if t == nil {
			plain = append(plain, cl)
			continue
		}
		var g *renewGroup
		for _, x := range groups {
			if x.t.node == t.node {
				g = x
				break
			}
		}
		if g == nil {
			g = &renewGroup{t: *t}
			groups = append(groups, g)
		}
		g.t.need = max(g.t.need, t.need)
		g.calls = append(g.calls, cl)
	}
	var wg sync.WaitGroup
	for _, g := range groups {
		wg.Add(1)
		go func() {
			defer wg.Done()
			pipe := g.t.bs.Node.Pipeline()
			for _, cl := range g.calls {
				cl.cmd = cl.script.Queue(ctx, pipe, cl.keys, cl.args...)
			}
			g.wait = g.t.node.wait(ctx, g.t.need)
			_ = pipe.Process(ctx, g.wait)
			_, _ = pipe.Exec(ctx)
		}()
	}
	if len(plain) > 0 {
		pipe := c.rdb.Pipeline()
		for _, cl := range plain {
			cl.cmd = cl.script.Queue(ctx, pipe, cl.keys, cl.args...)
		}
		_, _ = pipe.Exec(ctx)
	}
	wg.Wait()
	for _, g := range groups {
		for _, cl := range g.calls {
			if err := cl.cmd.Err(); err != nil && s.cc != nil && isServerError(err) && isRedirect(err) {
				s.cc.ReloadState(ctx)
				cl.cmd = cl.script.Run(ctx, c.rdb, cl.keys, cl.args...)
				cl.short = true
			}
		}
		if err := s.judge(ctx, &g.t, g.wait); err != nil {
			c.stats.renewSyncShort.Add(1)
			for _, cl := range g.calls {
				cl.short = true
			}
			c.cfg.logger.Warn("relock: too few replicas acknowledged a renewal; the locks stay held on the master, their local deadlines stand",
				"node", g.t.node.addr, "calls", len(g.calls), "err", err)
		}
	}
}
