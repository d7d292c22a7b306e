package door

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/relock-go/relock/internal/scripts"
)

// A script call's way to Redis (Do, DoSync). A call made while no other
// is in flight goes straight to Redis; calls made while others are in
// flight queue up and leave together in one pipeline as soon as a flusher
// is free, so concurrent lock calls cost the server one round trip per
// batch instead of one each, and a lone call pays nothing extra. A call that asks for a replica acknowledgement
// (Sync) goes with a WAIT after it on its master's connection. In every
// shape, alone (Once), shared (pipe) or synced (runSynced), a script goes
// by EVALSHA, and once more by EVAL where the server answers NOSCRIPT
// (after a restart or failover). A call a cluster redirected did not run:
// its caller sends it again by Resend.

// maxBatch is the most calls in one pipeline: small batches keep several
// pipelines busy at once, so the server works on one while the client
// reads or writes another.
const maxBatch = 16

// flushers is the most pipelines in flight at once.
const flushers = 4

// Do runs s with keys and args and returns its integer reply, sending it
// again while a cluster redirects it (see Resend). If the reply is lost (a
// transport error, or ctx ending first), undo, when not nil, is called so
// that the call leaves nothing behind; Do has returned by then or returns
// after it.
func (d *Door) Do(ctx context.Context, s *scripts.Script, keys []any, args []any, undo Undo) (int64, error) {
	var v int64
	err := d.Resend(ctx, func() (err error) {
		v, _, err = d.DoSync(ctx, s, keys, args, undo, nil)
		return err
	})
	return v, err
}

// Sync asks for a replica acknowledgement of a script call: the call and a
// WAIT (or WAITAOF) go in one pipeline on one connection of Node, since
// WAIT waits for the writes of its own connection. In a shared pipeline one
// WAIT, after all the calls for that node, covers them all.
type Sync struct {
	Node Node // the master that holds the call's keys
	// Replicas is how many replicas the WAIT asks for; a shared WAIT asks
	// for the most any of its calls asks for.
	Replicas int
	// Ack returns the WAIT (or WAITAOF) to send after the calls, asking
	// for n replicas: their acknowledgement.
	Ack func(n int) Cmd
}

// DoSync sends one try of Do, with a replica acknowledgement when acked is
// not nil: it returns the reply of the WAIT that followed the call on its
// connection too (nil when acked is nil or the call was never sent), for
// the caller to judge. The undo rules are those of Do; a WAIT that fails
// or falls short is left to the caller, and so is a redirection: the
// caller sends the call again by Resend (to the slot's new master, with
// acked).
func (d *Door) DoSync(ctx context.Context, s *scripts.Script, keys []any, args []any, undo Undo, acked *Sync) (int64, *Reply, error) {
	if d.stopped.Load() {
		return 0, nil, d.cfg.Stopped
	}
	if d.inflight.Add(1) == 1 {
		defer d.inflight.Add(-1)
		var r Reply
		var ack *Reply
		if acked != nil {
			r, ack = d.Synced(ctx, s, keys, args, acked)
		} else {
			r = d.Once(ctx, s, keys, args...)
		}
		v, err := r.Int64()
		if err != nil && undo != nil && !IsServer(err) {
			d.undo(ctx, undo)
		}
		return v, ack, err
	}
	defer d.inflight.Add(-1)
	r := &request{script: s, keys: keys, args: args, undo: undo, acked: acked, done: make(chan struct{})}
	if err := d.enqueue(r); err != nil {
		return 0, nil, err
	}
	select {
	case <-r.done:
		return r.val, r.ack, r.err
	case <-ctx.Done():
	case <-d.ctx.Done():
		// Closing: the caller hears so now, whatever the server does; the
		// flusher undoes a call already sent when its reply comes.
		if r.state.CompareAndSwap(queued, abandoned) || r.state.CompareAndSwap(sent, abandoned) {
			return 0, nil, d.cfg.Stopped
		}
		<-r.done
		return r.val, r.ack, r.err
	}
	if r.state.CompareAndSwap(queued, abandoned) {
		return 0, nil, ctx.Err() // never sent: the flusher drops it
	}
	// Sent already: wait a bounded time for its outcome, so that a call
	// that took effect is undone before Do returns.
	bound := time.NewTimer(d.cfg.Cleanup)
	defer bound.Stop()
	select {
	case <-r.done:
		if r.err == nil && undo != nil {
			d.undo(ctx, undo)
		}
		if r.err != nil {
			return r.val, nil, r.err
		}
		return 0, nil, ctx.Err()
	case <-bound.C:
		if r.state.CompareAndSwap(sent, abandoned) {
			return 0, nil, ctx.Err() // the flusher undoes it when its reply comes
		}
		<-r.done
		if r.err == nil && undo != nil {
			d.undo(ctx, undo)
		}
		return 0, nil, ctx.Err()
	}
}

// Once runs s once, by EVALSHA and by EVAL if the server answers
// NOSCRIPT, outside the batches, and returns its reply.
func (d *Door) Once(ctx context.Context, s *scripts.Script, keys []any, args ...any) Reply {
	r := d.drv.Do(ctx, EvalSHA(s, keys, args))
	if ClassOf(r.err) == NoScript {
		r = d.drv.Do(ctx, Eval(s, keys, args))
	}
	return r
}

// Resend runs try, which sends a call, and again while its error is a
// redirection (see Redirected): the script did not run. A slot on the
// move holds a call up, it does not fail it. Before each new try the
// slot map is reloaded (but after TRYAGAIN: the map is right, the keys
// are moving), and a pause, that doubles up to redirectPause, is waited
// out. Resend returns try's last error, which is a redirection only where
// a cluster kept answering CLUSTERDOWN for ClusterDownFor; or an error
// wrapping ctx's (or Config.Stopped, when the Door closes) and the last
// answer, if ctx ends or the Door closes first.
func (d *Door) Resend(ctx context.Context, try func() error) error {
	var pause time.Duration
	var down time.Time // when the cluster began answering CLUSTERDOWN
	for {
		err := try()
		if !Redirected(err) {
			return err
		}
		class := ClassOf(err)
		if class != ClusterDown {
			down = time.Time{}
		} else if down.IsZero() {
			down = time.Now()
		} else if time.Since(down) >= ClusterDownFor {
			return err
		}
		if class != TryAgain {
			d.drv.Reload(ctx)
		}
		pause = min(max(2*pause, time.Millisecond), redirectPause)
		if stop := d.await(ctx, pause); stop != nil {
			return fmt.Errorf("%w (last answer: %w)", stop, err)
		}
	}
}

// await waits t, and returns nil then; or ctx's error if it ends first, or
// Config.Stopped if the Door closes first.
func (d *Door) await(ctx context.Context, t time.Duration) error {
	timer := time.NewTimer(t)
	defer timer.Stop()
	select {
	case <-timer.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-d.ctx.Done():
		return d.cfg.Stopped
	}
}

// ClusterDownFor is how long Resend sends again a call that a cluster
// answers CLUSTERDOWN: long enough for a replica to take over a failed
// master (its election ends a second or two after the master is marked
// failed), short enough that a cluster that lost a master without replica
// fails calls instead of holding them forever.
const ClusterDownFor = 5 * time.Second

// redirectPause is the longest pause before a redirected call is sent
// again: a slot's keys may take a while to move.
const redirectPause = 50 * time.Millisecond

// Synced runs s and then acked's WAIT in one pipeline on acked.Node, and,
// if the server does not know the script, once more by EVAL with a WAIT
// of its own. It returns the script's reply and the WAIT's that covers it.
func (d *Door) Synced(ctx context.Context, s *scripts.Script, keys []any, args []any, acked *Sync) (Reply, *Reply) {
	g := &syncGroup{node: acked.Node, n: acked.Replicas, ack: acked.Ack}
	replies, acks := runSynced(ctx, g, []*request{{script: s, keys: keys, args: args}})
	return replies[0], acks[0]
}

// pipe runs the calls of reqs in one pipeline, and those the server
// answered NOSCRIPT again by EVAL, and returns them with their replies,
// in buf when it is large enough.
func (d *Door) pipe(ctx context.Context, reqs []*request, buf []Exchange) []Exchange {
	xs := buf[:0]
	for _, r := range reqs {
		xs = append(xs, Exchange{Cmd: EvalSHA(r.script, r.keys, r.args)})
	}
	d.drv.Pipe(ctx, xs)
	for i, r := range reqs {
		if ClassOf(xs[i].Reply.err) == NoScript {
			xs[i].Reply = d.drv.Do(ctx, Eval(r.script, r.keys, r.args))
		}
	}
	return xs
}

// runSynced runs the calls of reqs in one pipeline on g's node followed by
// one WAIT for g.n replicas, then those the server answered NOSCRIPT by
// EVAL, followed by a WAIT of their own. It returns each call's reply and
// the WAIT's covering it.
func runSynced(ctx context.Context, g *syncGroup, reqs []*request) ([]Reply, []*Reply) {
	replies := make([]Reply, len(reqs))
	acks := make([]*Reply, len(reqs))
	xs := make([]Exchange, len(reqs)+1)
	for i, r := range reqs {
		xs[i].Cmd = EvalSHA(r.script, r.keys, r.args)
	}
	xs[len(reqs)].Cmd = g.ack(g.n)
	g.node.Pipe(ctx, xs)
	var again []int
	for i := range reqs {
		replies[i], acks[i] = xs[i].Reply, &xs[len(reqs)].Reply
		if ClassOf(replies[i].err) == NoScript {
			again = append(again, i)
		}
	}
	if len(again) == 0 {
		return replies, acks
	}
	xs = make([]Exchange, len(again)+1)
	for j, i := range again {
		xs[j].Cmd = Eval(reqs[i].script, reqs[i].keys, reqs[i].args)
	}
	xs[len(again)].Cmd = g.ack(g.n)
	g.node.Pipe(ctx, xs)
	for j, i := range again {
		replies[i], acks[i] = xs[j].Reply, &xs[len(again)].Reply
	}
	return replies, acks
}

const (
	queued    int32 = iota // waiting for a flusher
	sent                   // in a pipeline
	abandoned              // its caller has gone
	delivered              // its caller has the outcome
)

type request struct {
	script *scripts.Script
	keys   []any
	args   []any
	undo   Undo
	acked  *Sync // the replica acknowledgement it asks for, or nil
	state  atomic.Int32
	val    int64
	ack    *Reply // the WAIT's that followed a call with acked
	reply  Reply  // a round's call's outcome (DoRound)
	err    error
	done   chan struct{}
}

// deliver hands the outcome to the waiting caller, or, if the caller gave
// up, undoes a call that succeeded or whose outcome is unknown.
func (r *request) deliver(reply Reply, ack *Reply, d *Door) {
	v, err := reply.Int64()
	if r.state.CompareAndSwap(sent, delivered) || r.state.CompareAndSwap(queued, delivered) {
		r.val, r.ack, r.err = v, ack, err
		close(r.done)
		return
	}
	if r.undo != nil && (err == nil || !IsServer(err)) {
		d.undo(d.ctx, r.undo)
	}
}

func (d *Door) enqueue(r *request) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.stopped.Load() {
		return d.cfg.Stopped
	}
	d.queue = append(d.queue, r)
	if d.active < flushers {
		d.active++
		d.wg.Add(1)
		go d.flush()
	}
	return nil
}

// flush sends queued calls in pipelines until the queue is empty. Its
// batches reuse one buffer of requests and one of commands, which its
// calls' callers never see.
func (d *Door) flush() {
	defer d.wg.Done()
	var batch []*request
	var xs []Exchange
	for {
		d.mu.Lock()
		n := min(len(d.queue), maxBatch)
		if n == 0 {
			d.active--
			d.mu.Unlock()
			return
		}
		batch = append(batch[:0], d.queue[:n]...)
		d.queue = d.queue[n:]
		if len(d.queue) == 0 {
			d.queue = nil
		}
		d.mu.Unlock()
		xs = d.send(batch, xs)
		clear(batch) // hold on to nothing a caller made
	}
}

// send runs a batch: the calls without acked in one pipeline, and those
// with acked in one pipeline per node, each ending with its WAIT. The
// pipelines run at the same time. It returns buf, the plain pipeline's
// commands, grown if need be, for the next batch.
func (d *Door) send(batch []*request, buf []Exchange) []Exchange {
	live := batch[:0]
	for _, r := range batch {
		if r.state.CompareAndSwap(queued, sent) { // else abandoned before it was sent
			live = append(live, r)
		}
	}
	plain, nodes := byNode(live)
	together(nodes, d.sendSynced, func() { buf = d.sendPlain(plain, buf) }, len(plain) > 0)
	return buf
}

// together runs synced for every group of nodes, each in a goroutine of
// its own, and plain, if withPlain, at the same time, and returns once all
// are done.
func together(nodes []*syncGroup, synced func(*syncGroup), plain func(), withPlain bool) {
	var wg sync.WaitGroup
	for _, g := range nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			synced(g)
		}()
	}
	if withPlain {
		plain()
	}
	wg.Wait()
}

// byNode sorts reqs into those without acked and one group per node of
// those with it.
func byNode(reqs []*request) (plain []*request, nodes []*syncGroup) {
	if !slices.ContainsFunc(reqs, func(r *request) bool { return r.acked != nil }) {
		return reqs, nil // the common case, without replica sync
	}
	for _, r := range reqs {
		if r.acked == nil {
			plain = append(plain, r)
			continue
		}
		var g *syncGroup
		for _, x := range nodes {
			if x.node.Addr() == r.acked.Node.Addr() {
				g = x
				break
			}
		}
		if g == nil {
			g = &syncGroup{node: r.acked.Node, ack: r.acked.Ack}
			nodes = append(nodes, g)
		}
		g.reqs = append(g.reqs, r)
		g.n = max(g.n, r.acked.Replicas)
	}
	return plain, nodes
}

// syncGroup is the calls with acked of one batch for one node.
type syncGroup struct {
	node Node
	n    int
	ack  func(int) Cmd
	reqs []*request
}

// sendPlain runs the calls of batch in one pipeline, in buf, and delivers
// their outcomes; it returns buf, cleared, for the next batch.
func (d *Door) sendPlain(batch []*request, buf []Exchange) []Exchange {
	xs := d.pipe(d.ctx, batch, buf)
	for i, x := range xs {
		d.finish(batch[i], x.Reply, nil)
	}
	clear(xs)
	return xs[:0]
}

func (d *Door) sendSynced(g *syncGroup) {
	replies, acks := runSynced(d.ctx, g, g.reqs)
	for i, r := range g.reqs {
		d.finish(r, replies[i], acks[i])
	}
}

// finish delivers the outcome of a call that was sent.
func (d *Door) finish(r *request, reply Reply, ack *Reply) {
	if err := reply.err; err != nil && r.undo != nil && !IsServer(err) && r.state.Load() == sent {
		// Unknown outcome for a caller still waiting: undo before it
		// hears of the failure, as a direct call would.
		d.undo(d.ctx, r.undo)
	}
	r.deliver(reply, ack, d)
}
