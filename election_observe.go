package relock

import (
	"context"
	"time"
)

// Observe returns a channel that receives the election's leader and then
// every change of leader or value, in order and without repeats, from
// any process: a new leader, a new value, and, as a Leader with an empty
// Holder, the end of a term with no successor yet. Changes come from the
// election's log as they are announced; a term that ends by its lock
// expiring (its leader died) is seen when the lock would have expired. An
// observer that is disconnected from Redis reads the log again on
// reconnecting and sends what it missed, in order (changes more than the
// log's length ago are skipped).
//
// The channel is closed when ctx ends or the Client is closed, or at once
// when the election's name is invalid (Leader reports why). A receiver
// that does not keep up holds the observer back, never the election.
func (e *Election) Observe(ctx context.Context) <-chan Leader {
	out := make(chan Leader)
	if e.check() != nil || ctx.Err() != nil {
		close(out)
		return out
	}
	hw, err := e.c.hub.Subscribe(e.channel, wakeAll)
	if err != nil {
		close(out)
		return out
	}
	o := &observer{e: e, out: out}
	go func() {
		defer close(out)
		defer hw.Close()
		o.run(ctx, hw.Ready(), hw.Wake())
	}()
	return out
}

// wakeAll wakes every local observer of an election's channel.
func wakeAll(string) int { return -1 }

// observer is one Observe call's state.
type observer struct {
	e    *Election
	out  chan<- Leader
	last Leader // the last value sent
	sent bool
	seen string // the id of the last log entry read; "" before the first read
}

// observeBatch is the most log entries an observer reads at once.
const observeBatch = 64

// run reads and sends until ctx ends or the Client closes. It reads once
// subscribed (ready), then whenever woken (a change announced, or a
// reconnect) or when the leader's lock would expire.
func (o *observer) run(ctx context.Context, ready, wake <-chan struct{}) {
	c := o.e.c
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		select {
		case <-ready:
			ready = nil
		case <-wake:
		case <-timer.C:
		case <-ctx.Done():
			return
		case <-c.closing:
			return
		}
		if ready != nil {
			continue // nothing is read before the subscription is in place
		}
		next, ok := o.catchUp(ctx)
		if !ok {
			return
		}
		timer.Reset(next)
	}
}

// catchUp reads the log since the last entry seen and the current leader,
// sends every change, and returns when to look again. It returns false
// when ctx ended or the Client closed.
func (o *observer) catchUp(ctx context.Context) (time.Duration, bool) {
	c := o.e.c
	for {
		n := observeBatch
		if o.seen == "" {
			n = 0 // the first read starts from the current leader
		}
		r, err := o.e.read(ctx, o.seen, n)
		if err != nil {
			if ctx.Err() != nil {
				return 0, false
			}
			c.cfg.logger.Debug("relock: cannot read the election; trying again", "name", o.e.name, "err", err)
			return fallbackRecheck, true
		}
		for i, l := range r.entries {
			if !o.send(ctx, l) {
				return 0, false
			}
			o.seen = r.ids[i]
		}
		if o.seen == "" {
			o.seen = r.last
			if o.seen == "" {
				o.seen = "0-0" // no log yet: every entry to come is new
			}
		}
		if len(r.entries) == n && n > 0 {
			continue // more to read
		}
		if !o.send(ctx, r.leader) {
			return 0, false
		}
		return r.recheck(c.cfg.watchdog), true
	}
}

// send sends l unless it repeats the last value sent or is older than it.
// A value without a leader carries the term of the last leader sent. It
// returns false when ctx ended or the Client closed.
func (o *observer) send(ctx context.Context, l Leader) bool {
	if l.Holder == "" {
		if !o.sent || o.last.Holder == "" {
			return true // nothing ended that an observer was told of
		}
		if l.Term == 0 || l.Term < o.last.Term {
			l.Term = o.last.Term
		}
	}
	if o.sent && (l.Term < o.last.Term || sameLeader(l, o.last)) {
		return true
	}
	select {
	case o.out <- l:
		o.last, o.sent = l, true
		return true
	case <-ctx.Done():
	case <-o.e.c.closing:
	}
	return false
}

// sameLeader reports whether a and b tell the same: the same term, holder
// and value.
func sameLeader(a, b Leader) bool {
	return a.Term == b.Term && a.Holder == b.Holder && a.Value == b.Value
}
