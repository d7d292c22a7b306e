package relock

import (
	"context"
	"sort"
	"strconv"
	"sync"

	"github.com/redis/go-redis/v9"

	"github.com/relock-go/relock/internal/batch"
	"github.com/relock-go/relock/internal/layout"
	"github.com/relock-go/relock/internal/scripts"
	"github.com/relock-go/relock/internal/watchdog"
)

// maxRenewKeys caps the holds renewed by one script call, so that a call
// never blocks the server for long.
const maxRenewKeys = 256

// Renewal kinds: watchdog.Entry.Kind indexes renewScripts. Every renewal
// script takes one key per hold (KEYS[i]) and two arguments (ARGV[2i-1]
// the owner, ARGV[2i] the lease in ms, 0 to check only), and returns a
// table of 1 (held) or 0 (gone). A reader's renewal takes, after those,
// the rule of each hold's reader hold keys (layout.ReaderHolds).
const (
	kindMutex uint8 = iota // a lock hash: field <owner>
	kindRead               // a read-write lock's reader: field <owner> and its hold keys
	kindPsem               // a permit semaphore's held permits zset: member <permit id>
	kinds                  // the number of kinds
)

// renewScripts has a script for every kind (a test checks that none is
// missing).
var renewScripts = [kinds]*scripts.Script{
	kindMutex: scripts.Renew,
	kindRead:  scripts.RWRenew,
	kindPsem:  scripts.PermitRenew,
}

// renew is the watchdog's Renewer: one renewal script call per kind and
// cluster slot (per maxRenewKeys holds), all sent in one pipeline.
func (c *Client) renew(ctx context.Context, batch []*watchdog.Entry) []watchdog.Result {
	results := make([]watchdog.Result, len(batch))
	sort.Slice(batch, func(i, j int) bool {
		a, b := batch[i], batch[j]
		return a.Kind < b.Kind || a.Kind == b.Kind && c.cluster && a.Group < b.Group
	})
	sameCall := func(a, b *watchdog.Entry) bool {
		return a.Kind == b.Kind && (!c.cluster || a.Group == b.Group)
	}
	var calls []*renewCall
	for first := 0; first < len(batch); {
		n := 1
		for first+n < len(batch) && n < maxRenewKeys && sameCall(batch[first+n], batch[first]) {
			n++
		}
		keys := make([]any, n)
		args := make([]any, 0, 2*n)
		for i, e := range batch[first : first+n] {
			keys[i] = e.Key
			args = append(args, e.Owner, strconv.FormatInt(e.Lease.Milliseconds(), 10))
		}
		if batch[first].Kind == kindRead {
			for _, e := range batch[first : first+n] {
				args = append(args, layout.ReaderHolds(e.Key))
			}
		}
		calls = append(calls, &renewCall{first: first, n: n, script: renewScripts[batch[first].Kind], keys: keys, args: args})
		first += n
	}
	c.sendRenewals(ctx, calls)
	for _, cl := range calls {
		cmd := renewScripts[batch[cl.first].Kind].Retry(ctx, c.rdb, cl.cmd)
		held, err := cmd.Int64Slice()
		if err != nil || len(held) != cl.n {
			c.cfg.logger.Warn("relock: renewal failed", "locks", cl.n, "err", err)
			continue
		}
		for i, h := range held {
			switch {
			case h != 1:
				results[cl.first+i] = watchdog.Gone
			case !cl.short:
				results[cl.first+i] = watchdog.Held
			}
			// Held on the master, but not by enough replicas: the local
			// deadline stands (Unknown), see sendRenewals.
		}
	}
	return results
}

// renewCall is one renewal script call of a round.
type renewCall struct {
	first, n int // the entries of the batch it renews
	script   *scripts.Script
	keys     []any
	args     []any
	cmd      *redis.Cmd // its outcome, once sent
	short    bool       // too few replicas acknowledged it (replica sync)
}

// sendRenewals sends a round's calls: in one pipeline for the masters
// with no replicas to wait for, and in one pipeline per master that has
// (replicasync.go), on a connection to it, followed by one WAIT. A WAIT too
// few replicas answer is logged and counted (Stats.RenewSyncShort), and
// its calls are marked short: their holds are not declared lost, since the
// master has them and the next round asks again, but their local
// deadlines do not move either. A replica promoted after such a renewal
// has the hold with the TTL of the last renewal it acknowledged, so the
// holder must count from that one to hear of the loss before another
// client can be granted the lock there. Calls a cluster redirected (its
// map changed) are sent again through the cluster client, without a WAIT,
// and are short too.
func (c *Client) sendRenewals(ctx context.Context, calls []*renewCall) {
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
			g.ack = g.t.node.ack(ctx, g.t.need)
			_ = pipe.Process(ctx, g.ack)
			_, _ = pipe.Exec(ctx)
		}()
	}
	if len(plain) > 0 {
		pipe := c.rdb.Pipeline()
		for _, cl := range plain {
			cl.cmd = cl.script.Queue(ctx, pipe, cl.keys, cl.args...)
		}
		_, _ = pipe.Exec(ctx)
		for _, cl := range plain {
			if batch.Redirected(cl.cmd.Err()) { // its slot is on the move
				cl.cmd = cl.script.Run(ctx, c.batch.Direct(), cl.keys, cl.args...)
			}
		}
	}
	wg.Wait()
	for _, g := range groups {
		for _, cl := range g.calls {
			if err := cl.cmd.Err(); err != nil && s.cc != nil && isServerError(err) && isRedirect(err) {
				s.cc.ReloadState(ctx)
				cl.cmd = cl.script.Run(ctx, c.batch.Direct(), cl.keys, cl.args...)
				cl.short = true
			}
		}
		if err := s.judge(ctx, &g.t, g.ack); err != nil {
			c.stats.renewSyncShort.Add(1)
			for _, cl := range g.calls {
				cl.short = true
			}
			c.cfg.logger.Warn("relock: too few replicas acknowledged a renewal; the locks stay held on the master, their local deadlines stand",
				"node", g.t.node.addr, "calls", len(g.calls), "err", err)
		}
	}
}

// renewGroup is a renewal round's calls for one master with replicas to
// wait for.
type renewGroup struct {
	t     syncTarget
	calls []*renewCall
	ack   redis.Cmder
}
