// Package batch runs the script calls of many goroutines in shared
// pipelines. A call made while no other is in flight goes straight to Redis;
// calls made while others are in flight queue up and leave together in one
// pipeline as soon as a flusher is free, so concurrent lock calls cost the
// server one round trip per batch instead of one each, and a lone call pays
// nothing extra.
package batch

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/relock-go/relock/internal/scripts"
)

// Config sets up a Batcher.
type Config struct {
	Client   redis.UniversalClient
	MaxBatch int           // most calls in one pipeline (default 16)
	Flushers int           // most pipelines in flight at once (default 4)
	Cleanup  time.Duration // bound on undo calls (default 2s)
	// Stopped is the error of every call made once Close has begun, sent
	// or not (default ErrStopped).
	Stopped error
}

// Batcher batches script calls. It is safe for concurrent use.
type Batcher struct {
	cfg      Config
	ctx      context.Context
	cancel   context.CancelFunc
	wg       sync.WaitGroup
	inflight atomic.Int64

	mu      sync.Mutex
	queue   []*request
	active  int
	stopped atomic.Bool // set under mu
}

// New returns a Batcher; Close stops it.
func New(cfg Config) *Batcher {
	if cfg.MaxBatch <= 0 {
		// Small batches keep several pipelines busy at once, so the server
		// works on one while the client reads or writes another.
		cfg.MaxBatch = 16
	}
	if cfg.Flushers <= 0 {
		cfg.Flushers = 4
	}

	if cfg.Cleanup <= 0 {
		cfg.Cleanup = 2 * time.Second
	}
	if cfg.Stopped == nil {
		cfg.Stopped = ErrStopped
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Batcher{cfg: cfg, ctx: ctx, cancel: cancel}
}

// ErrStopped is the default error of calls made or queued once the
// Batcher is closed (see Config.Stopped).
var ErrStopped = errors.New("batch: stopped")

// Undo undoes a call whose reply was lost, or that nobody waits for any
// more, if the call had an effect. It is called with a bounded context.
type Undo interface {
	Undo(ctx context.Context)
}

// Do runs s with keys and args and returns its integer reply, sending it
// again while a cluster redirects it (see Resend). If the reply is lost (a
// transport error, or ctx ending first), undo, when not nil, is called so
// that the call leaves nothing behind; Do has returned by then or returns
// after it.
func (b *Batcher) Do(ctx context.Context, s *scripts.Script, keys []any, args []any, undo Undo) (int64, error) {
	var v int64
	err := b.Resend(ctx, func() (err error) {
		v, _, err = b.DoSync(ctx, s, keys, args, undo, nil)
		return err
	})
	return v, err
}

// Sync asks for a replica acknowledgement of a script call: the call and a
// WAIT (or WAITAOF) go in one pipeline on one connection of Node, since
// WAIT waits for the writes of its own connection. In a shared pipeline one
// WAIT, after all the calls for that node, covers them all.
type Sync struct {
	// Node is the client of the master that holds the call's keys: the
	// *redis.Client itself, or a cluster's (ClusterClient.MasterForKey).
	Node *redis.Client
	// Replicas is how many replicas the WAIT asks for; a shared WAIT asks
	// for the most any of its calls asks for.
	Replicas int
	// Ack returns the WAIT (or WAITAOF) to queue after the calls, asking
	// for n replicas: their acknowledgement.
	Ack func(ctx context.Context, n int) redis.Cmder
}

// Resend runs try, which sends a call, and again while its error is a
// redirection (see Redirected): the script did not run. A slot on the
// move holds a call up, it does not fail it. Before each new try the
// slot map is reloaded (but after TRYAGAIN: the map is right, the keys
// are moving), and a pause, that doubles up to redirectPause, is waited
// out. Resend returns try's last error, which is a redirection only where
// a cluster kept answering CLUSTERDOWN for ClusterDownFor; or an error
// wrapping ctx's (or Config.Stopped, when the Batcher closes) and the
// last answer, if ctx ends or the Batcher closes first.
func (b *Batcher) Resend(ctx context.Context, try func() error) error {
	var pause time.Duration
	var down time.Time // when the cluster began answering CLUSTERDOWN
	for {
		err := try()
		if !Redirected(err) {
			return err
		}
		if !redis.IsClusterDownError(err) {
			down = time.Time{}
		} else if down.IsZero() {
			down = time.Now()
		} else if time.Since(down) >= ClusterDownFor {
			return err
		}
		if !redis.IsTryAgainError(err) {
			if cc, ok := b.cfg.Client.(*redis.ClusterClient); ok {
				cc.ReloadState(ctx)
			}
		}
		pause = min(max(2*pause, time.Millisecond), redirectPause)
		if stop := b.await(ctx, pause); stop != nil {
			return fmt.Errorf("%w (last answer: %w)", stop, err)
		}
	}
}

// await waits d, and returns nil then; or ctx's error if it ends first, or
// Config.Stopped if the Batcher closes first.
func (b *Batcher) await(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-b.ctx.Done():
		return b.cfg.Stopped
	}
}

// ClusterDownFor is how long Resend sends again a call that a cluster
// answers CLUSTERDOWN: long enough for a replica to take over a failed
// master (its election ends a second or two after the master is marked
// failed), short enough that a cluster that lost a master without replica
// fails calls instead of holding them forever.
const ClusterDownFor = 5 * time.Second

// Direct returns a scripts.Runner that sends each command straight to
// Redis, outside the batches and also once the Batcher is closed (for its
// callers' cleanup), and, as Do does, again while a cluster redirects it
// (Resend).
func (b *Batcher) Direct() scripts.Runner { return direct{b} }

type direct struct{ b *Batcher }

func (d direct) Process(ctx context.Context, cmd redis.Cmder) error {
	err := d.b.Resend(ctx, func() error {
		cmd.SetErr(nil)
		return d.b.cfg.Client.Process(ctx, cmd)
	})
	if err != nil {
		cmd.SetErr(err) // the command's reader hears why it stopped
	}
	return err
}

// redirectPause is the longest pause before a redirected call is sent
// again: a slot's keys may take a while to move.
const redirectPause = 50 * time.Millisecond

// ErrNotMaster is wrapped by the error of a call that went to a node
// found to be a replica (its WAIT answered so): a failover changed the
// slot's master. The call did not run; like a redirection, it is sent
// again, to the master found again.
var ErrNotMaster = errors.New("not the master")

// Redirected reports whether err is a cluster's answer that a call's slot
// is served elsewhere (MOVED, or ErrNotMaster), is on its way there (ASK,
// TRYAGAIN), or has no master for now (CLUSTERDOWN): the call did not
// run, and may be sent again. No other answer is: one that will not
// change (a refused password, a busy script, an unknown command) is the
// caller's at once.
func Redirected(err error) bool {
	if err == nil {
		return false
	}
	if _, ok := redis.IsMovedError(err); ok {
		return true
	}
	if _, ok := redis.IsAskError(err); ok {
		return true
	}
	return redis.IsTryAgainError(err) || redis.IsClusterDownError(err) || errors.Is(err, ErrNotMaster)
}

// DoSync sends one try of Do, with a replica acknowledgement when acked is
// not nil: it returns the WAIT command that followed the call on its
// connection too (nil when acked is nil or the call was never sent), for
// the caller to judge. The undo rules are those of Do; a WAIT that fails
// or falls short is left to the caller, and so is a redirection: the
// caller sends the call again by Resend (to the slot's new master, with
// acked).
func (b *Batcher) DoSync(ctx context.Context, s *scripts.Script, keys []any, args []any, undo Undo, acked *Sync) (int64, redis.Cmder, error) {
	if b.stopped.Load() {
		return 0, nil, b.cfg.Stopped
	}
	if b.inflight.Add(1) == 1 {
		defer b.inflight.Add(-1)
		var cmd *redis.Cmd
		var ack redis.Cmder
		if acked != nil {
			cmd, ack = Synced(ctx, s, keys, args, acked)
		} else {
			cmd = s.Run(ctx, b.cfg.Client, keys, args...)
		}
		v, err := cmd.Int64()
		if err != nil && undo != nil && !isServerError(err) {
			b.undo(ctx, undo)
		}
		return v, ack, err
	}
	defer b.inflight.Add(-1)
	r := &request{script: s, keys: keys, args: args, undo: undo, acked: acked, done: make(chan struct{})}
	if err := b.enqueue(r); err != nil {
		return 0, nil, err
	}
	select {
	case <-r.done:
		return r.val, r.ack, r.err
	case <-ctx.Done():
	case <-b.ctx.Done():
		// Closing: the caller hears so now, whatever the server does; the
		// flusher undoes a call already sent when its reply comes.
		if r.state.CompareAndSwap(queued, abandoned) || r.state.CompareAndSwap(sent, abandoned) {
			return 0, nil, b.cfg.Stopped
		}
		<-r.done
		return r.val, r.ack, r.err
	}
	if r.state.CompareAndSwap(queued, abandoned) {
		return 0, nil, ctx.Err() // never sent: the flusher drops it
	}
	// Sent already: wait a bounded time for its outcome, so that a call
	// that took effect is undone before Do returns.
	bound := time.NewTimer(b.cfg.Cleanup)
	defer bound.Stop()
	select {
	case <-r.done:
		if r.err == nil && undo != nil {
			b.undo(ctx, undo)
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
			b.undo(ctx, undo)
		}
		return 0, nil, ctx.Err()
	}
}

// Call is one script call of a round (DoRound).
type Call struct {
	Script *scripts.Script
	Keys   []any
	Args   []any
	Acked  *Sync // the replica acknowledgement it asks for, or nil

	Cmd *redis.Cmd  // its outcome, once DoRound returns
	Ack redis.Cmder // the WAIT that followed it, with Acked
	// Resent tells that a cluster redirected the call, which went again
	// on its own, without a WAIT.
	Resent bool
}

// DoRound sends calls at once, as a batch goes: those without Acked in
// one pipeline, those with it in one pipeline per node, each ending with
// its WAIT, at the same time. A call that a cluster redirects is sent
// again on its own (by Direct, so again while the slot moves), without a
// WAIT. A watchdog's renewals go this way: they are many, due together,
// and must not wait their turn behind lock calls in the queue.
func (b *Batcher) DoRound(ctx context.Context, calls []*Call) {
	reqs := make([]*request, len(calls))
	for i, c := range calls {
		reqs[i] = &request{script: c.Script, keys: c.Keys, args: c.Args, acked: c.Acked}
	}
	plain, nodes := byNode(reqs)
	together(nodes, func(g *syncGroup) {
		cmds, acks := runSynced(ctx, g.node, g.n, g.ack, g.reqs)
		for i, r := range g.reqs {
			r.cmd, r.ack = cmds[i], acks[i]
		}
	}, func() {
		pipe := b.cfg.Client.Pipeline()
		for _, r := range plain {
			r.cmd = r.script.Queue(ctx, pipe, r.keys, r.args...)
		}
		_ = Exec(ctx, pipe)
		for _, r := range plain {
			r.cmd = r.script.Retry(ctx, b.cfg.Client, r.cmd)
		}
	}, len(plain) > 0)
	cc, _ := b.cfg.Client.(*redis.ClusterClient)
	reloaded := false
	for i, c := range calls {
		c.Cmd, c.Ack = reqs[i].cmd, reqs[i].ack
		err := c.Cmd.Err()
		// A call sent to a node that a failover made a replica is
		// answered READONLY: on a cluster, its slot's master is found
		// again, as for a redirection.
		demoted := c.Acked != nil && cc != nil && err != nil && redis.IsReadOnlyError(err)
		if !Redirected(err) && !demoted { // its slot is not on the move
			continue
		}
		if cc != nil && !reloaded {
			cc.ReloadState(ctx)
			reloaded = true
		}
		c.Cmd = c.Script.Run(ctx, b.Direct(), c.Keys, c.Args...)
		c.Resent = true
	}
}

// Synced runs s and then acked's WAIT in one pipeline on acked.Node, and,
// if the server does not know the script, once more by EVAL with a WAIT
// of its own. It returns the script's command and the WAIT that covers it.
func Synced(ctx context.Context, s *scripts.Script, keys []any, args []any, acked *Sync) (*redis.Cmd, redis.Cmder) {
	r := &request{script: s, keys: keys, args: args}
	cmds, acks := runSynced(ctx, acked.Node, acked.Replicas, acked.Ack, []*request{r})
	return cmds[0], acks[0]
}

// runSynced runs the calls of reqs in one pipeline on node followed by one
// WAIT for n replicas, then those the server answered NOSCRIPT by EVAL,
// followed by a WAIT of their own. It returns each call's command and the
// WAIT covering it.
func runSynced(ctx context.Context, node *redis.Client, n int, ack func(context.Context, int) redis.Cmder, reqs []*request) ([]*redis.Cmd, []redis.Cmder) {
	cmds := make([]*redis.Cmd, len(reqs))
	acks := make([]redis.Cmder, len(reqs))
	pipe := node.Pipeline()
	for i, r := range reqs {
		cmds[i] = r.script.Queue(ctx, pipe, r.keys, r.args...)
	}
	w := ack(ctx, n)
	_ = pipe.Process(ctx, w)
	_ = Exec(ctx, pipe)
	var again []int
	for i := range reqs {
		acks[i] = w
		if scripts.IsNoScript(cmds[i].Err()) {
			again = append(again, i)
		}
	}
	if len(again) == 0 {
		return cmds, acks
	}
	pipe = node.Pipeline()
	for _, i := range again {
		cmds[i] = reqs[i].script.QueueSource(ctx, pipe, reqs[i].keys, reqs[i].args...)
	}
	w = ack(ctx, n)
	_ = pipe.Process(ctx, w)
	_ = Exec(ctx, pipe)
	for _, i := range again {
		acks[i] = w
	}
	return cmds, acks
}

func (b *Batcher) undo(ctx context.Context, undo Undo) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), b.cfg.Cleanup)
	defer cancel()
	undo.Undo(ctx)
}

// Close stops the Batcher (Stop) and waits for its flushers.
func (b *Batcher) Close() {
	b.Stop()
	b.wg.Wait()
}

// Stop stops the Batcher without waiting: calls still queued, calls
// waiting for a pipeline's reply or to be sent again after a redirection,
// and every later call, fail with Config.Stopped; pipelines in flight are
// cut off (their callers' calls are undone). It may be called again.
func (b *Batcher) Stop() {
	b.mu.Lock()
	b.stopped.Store(true)
	queued := b.queue
	b.queue = nil
	b.mu.Unlock()
	for _, r := range queued {
		r.deliver(0, b.cfg.Stopped, nil, b)
	}
	b.cancel() // pipelines in flight end now; their undo calls are bounded
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
	ack    redis.Cmder // the WAIT that followed a call with acked
	cmd    *redis.Cmd  // a round's call's outcome (DoRound)
	err    error
	done   chan struct{}
}

// deliver hands the outcome to the waiting caller, or, if the caller gave
// up, undoes a call that succeeded or whose outcome is unknown.
func (r *request) deliver(v int64, err error, ack redis.Cmder, b *Batcher) {
	if r.state.CompareAndSwap(sent, delivered) || r.state.CompareAndSwap(queued, delivered) {
		r.val, r.ack, r.err = v, ack, err
		close(r.done)
		return
	}
	if r.undo != nil && (err == nil || !isServerError(err)) {
		b.undo(b.ctx, r.undo)
	}
}

func (b *Batcher) enqueue(r *request) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.stopped.Load() {
		return b.cfg.Stopped
	}
	b.queue = append(b.queue, r)
	if b.active < b.cfg.Flushers {
		b.active++
		b.wg.Add(1)
		go b.flush()
	}
	return nil
}

// flush sends queued calls in pipelines until the queue is empty.
func (b *Batcher) flush() {
	defer b.wg.Done()
	for {
		b.mu.Lock()
		n := min(len(b.queue), b.cfg.MaxBatch)
		if n == 0 {
			b.active--
			b.mu.Unlock()
			return
		}
		batch := make([]*request, n)
		copy(batch, b.queue)
		b.queue = b.queue[n:]
		if len(b.queue) == 0 {
			b.queue = nil
		}
		b.mu.Unlock()
		b.send(batch)
	}
}

// send runs a batch: the calls without acked in one pipeline, and those
// with acked in one pipeline per node, each ending with its WAIT. The
// pipelines run at the same time.
func (b *Batcher) send(batch []*request) {
	live := batch[:0]
	for _, r := range batch {
		if r.state.CompareAndSwap(queued, sent) { // else abandoned before it was sent
			live = append(live, r)
		}
	}
	plain, nodes := byNode(live)
	together(nodes, b.sendSynced, func() { b.sendPlain(plain) }, len(plain) > 0)
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
	for _, r := range reqs {
		if r.acked == nil {
			plain = append(plain, r)
			continue
		}
		var g *syncGroup
		for _, x := range nodes {
			if x.node == r.acked.Node {
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
	node *redis.Client
	n    int
	ack  func(context.Context, int) redis.Cmder
	reqs []*request
}

func (b *Batcher) sendPlain(batch []*request) {
	ctx := b.ctx
	pipe := b.cfg.Client.Pipeline()
	cmds := make([]*redis.Cmd, len(batch))
	for i, r := range batch {
		cmds[i] = r.script.Queue(ctx, pipe, r.keys, r.args...)
	}
	_ = Exec(ctx, pipe)
	for i, r := range batch {
		b.finish(r, r.script.Retry(ctx, b.cfg.Client, cmds[i]), nil)
	}
}

func (b *Batcher) sendSynced(g *syncGroup) {
	cmds, acks := runSynced(b.ctx, g.node, g.n, g.ack, g.reqs)
	for i, r := range g.reqs {
		b.finish(r, cmds[i], acks[i])
	}
}

// finish delivers the outcome of a call that was sent.
func (b *Batcher) finish(r *request, cmd *redis.Cmd, ack redis.Cmder) {
	v, err := cmd.Int64()
	if err != nil && r.undo != nil && !isServerError(err) && r.state.Load() == sent {
		// Unknown outcome for a caller still waiting: undo before it
		// hears of the failure, as a direct call would.
		b.undo(b.ctx, r.undo)
	}
	r.deliver(v, err, ack, b)
}

// Exec runs pipe and returns its error. Every command of pipe ends with
// its reply or an error: go-redis leaves the commands of a pipeline
// without either when the connection's setup failed on a reply of the
// server (a password refused on a reconnect), and their empty replies
// would read as "unexpected type=<nil>"; they get the pipeline's error.
func Exec(ctx context.Context, pipe redis.Pipeliner) error {
	cmds, err := pipe.Exec(ctx)
	if err == nil {
		return nil
	}
	for _, cmd := range cmds {
		if cmd.Err() != nil {
			return err // the commands were answered, or given the error
		}
	}
	for _, cmd := range cmds {
		cmd.SetErr(err)
	}
	return err
}

func isServerError(err error) bool {
	var re redis.Error
	return errors.As(err, &re)
}
