package relock

import (
	"context"
	"sort"
	"time"

	"github.com/relock-go/relock/internal/door"
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
func (c *Client) renew(ctx context.Context, entries []*watchdog.Entry) []watchdog.Result {
	results := make([]watchdog.Result, len(entries))
	sort.Slice(entries, func(i, j int) bool {
		a, b := entries[i], entries[j]
		return a.Kind < b.Kind || a.Kind == b.Kind && c.cluster && a.Group < b.Group
	})
	sameCall := func(a, b *watchdog.Entry) bool {
		return a.Kind == b.Kind && (!c.cluster || a.Group == b.Group)
	}
	var calls []*renewCall
	for first := 0; first < len(entries); {
		n := 1
		for first+n < len(entries) && n < maxRenewKeys && sameCall(entries[first+n], entries[first]) {
			n++
		}
		calls = append(calls, newRenewCall(entries[first:first+n], first, (*watchdog.Entry).Renewal))
		first += n
	}
	c.sendRenewals(ctx, calls)
	for _, cl := range calls {
		v, err := cl.Reply.Int64Slice() // DoRound ran it by EVAL if the server lacked the script
		var held []bool
		if err == nil {
			held, err = scripts.RenewReplyOf(v, cl.n)
		}
		if err != nil {
			c.cfg.logger.Warn("relock: renewal failed", "locks", cl.n, "err", err)
			continue
		}
		for i, h := range held {
			switch {
			case !h:
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

// newRenewCall returns the call that renews entries, all of one kind and
// cluster slot, the first of them at index first of its round, each to
// lease(e) ("0" checks it only).
func newRenewCall(entries []*watchdog.Entry, first int, lease func(*watchdog.Entry) time.Duration) *renewCall {
	req := scripts.RenewRequest{Holds: make([]scripts.RenewHold, len(entries)), Readers: entries[0].Kind == kindRead}
	for i, e := range entries {
		req.Holds[i] = scripts.RenewHold{Key: e.Key, Owner: e.Owner, Lease: lease(e)}
		if req.Readers {
			req.Holds[i].ReaderHolds = layout.ReaderHolds(e.Key)
		}
	}
	keys, args := req.Build()
	return &renewCall{Call: door.Call{Script: renewScripts[entries[0].Kind], Keys: keys, Args: args}, first: first, n: len(entries)}
}

// renewCall is one renewal script call of a round.
type renewCall struct {
	door.Call
	first, n int         // the entries of the batch it renews
	t        *syncTarget // how it waits for replicas; nil if it does not
	short    bool        // too few replicas acknowledged it (replica sync)
}

// sendRenewals sends a round's calls through the door at once
// (Door.DoRound): in one pipeline for the masters with no replicas to
// wait for, and in one pipeline per master that has (replicasync.go), on
// a connection to it, followed by one WAIT. A WAIT too few replicas
// answer is logged and counted (Stats.RenewSyncShort), and its calls are
// marked short: their holds are not declared lost, since the master has
// them and the next round asks again, but their local deadlines do not
// move either. A replica promoted after such a renewal has the hold with
// the TTL of the last renewal it acknowledged, so the holder must count
// from that one to hear of the loss before another client can be granted
// the lock there. Calls a cluster redirected (its map changed) are sent
// again without a WAIT, and are short too.
func (c *Client) sendRenewals(ctx context.Context, calls []*renewCall) {
	round := make([]*door.Call, len(calls))
	for i, cl := range calls {
		t, err := c.rsync.target(ctx, cl.Keys[0].(string))
		if err != nil {
			c.cfg.logger.Debug("relock: renewing without replica sync", "err", err)
		}
		cl.t, cl.Acked = t, t.doorSync()
		round[i] = &cl.Call
	}
	c.door.DoRound(ctx, round)
	c.judgeRenewals(ctx, calls)
}

// judgeRenewals judges the WAIT that followed each master's renewals:
// when too few replicas acknowledged it, every call it covers is short,
// and so is a call that went again without a WAIT.
func (c *Client) judgeRenewals(ctx context.Context, calls []*renewCall) {
	judged := make(map[*door.Reply]error)
	for _, cl := range calls {
		if cl.t == nil {
			continue
		}
		if cl.Resent {
			cl.short = true
			continue
		}
		err, ok := judged[cl.Ack]
		if !ok {
			// The calls a WAIT covers are one master's: judged against the
			// most replicas any of them needs.
			t, covered := *cl.t, 0
			for _, x := range calls {
				if x.Ack == cl.Ack && x.t != nil {
					t.need = max(t.need, x.t.need)
					covered++
				}
			}
			err = c.rsync.judge(ctx, &t, cl.Ack)
			judged[cl.Ack] = err
			if err != nil {
				c.stats.renewSyncShort.Add(1)
				c.cfg.logger.Warn("relock: too few replicas acknowledged a renewal; the locks stay held on the master, their local deadlines stand",
					"node", t.node.addr, "calls", covered, "err", err)
			}
		}
		cl.short = err != nil
	}
}
