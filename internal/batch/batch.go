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
	stopped bool
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
	ctx, cancel := context.WithCancel(context.Background())
	return &Batcher{cfg: cfg, ctx: ctx, cancel: cancel}
}

// ErrStopped is returned for calls queued when the Batcher is closed.
var ErrStopped = errors.New("batch: stopped")

// Undo undoes a call whose reply was lost, or that nobody waits for any
// more, if the call had an effect. It is called with a bounded context.
type Undo interface {
	Undo(ctx context.Context)
}

// Do runs s with keys and args and returns its integer reply. If the reply
// is lost (a transport error, or ctx ending first), undo, when not nil, is
// called so that the call leaves nothing behind; Do has returned by then or
// returns after it.
func (b *Batcher) Do(ctx context.Context, s *scripts.Script, keys []string, args []any, undo Undo) (int64, error) {
	if b.inflight.Add(1) == 1 {
		defer b.inflight.Add(-1)
		v, err := s.Run(ctx, b.cfg.Client, keys, args...).Int64()
		if err != nil && undo != nil && !isServerError(err) {
			b.undo(ctx, undo)
		}
		return v, err
	}
	defer b.inflight.Add(-1)
	r := &request{script: s, keys: keys, args: args, undo: undo, done: make(chan struct{})}
	if err := b.enqueue(r); err != nil {
		return 0, err
	}
	select {
	case <-r.done:
		return r.val, r.err
	case <-ctx.Done():
	}
	if r.state.CompareAndSwap(queued, abandoned) {
		return 0, ctx.Err() // never sent: the flusher drops it
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
			return r.val, r.err
		}
		return 0, ctx.Err()
	case <-bound.C:
		if r.state.CompareAndSwap(sent, abandoned) {
			return 0, ctx.Err() // the flusher undoes it when its reply comes
		}
		<-r.done
		if r.err == nil && undo != nil {
			b.undo(ctx, undo)
		}
		return 0, ctx.Err()
	}
}

func (b *Batcher) undo(ctx context.Context, undo Undo) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), b.cfg.Cleanup)
	defer cancel()
	undo.Undo(ctx)
}

// Close stops the flushers: calls still queued fail with ErrStopped, and
// pipelines in flight are cut off (their callers' calls are undone).
func (b *Batcher) Close() {
	b.mu.Lock()
	b.stopped = true
	queued := b.queue
	b.queue = nil
	b.mu.Unlock()
	for _, r := range queued {
		r.deliver(0, ErrStopped, b)
	}
	b.cancel() // pipelines in flight end now; their undo calls are bounded
	b.wg.Wait()
}

const (
	queued    int32 = iota // waiting for a flusher
	sent                   // in a pipeline
	abandoned              // its caller has gone
	delivered              // its caller has the outcome
)

type request struct {
	script *scripts.Script
	keys   []string
	args   []any
	undo   Undo
	state  atomic.Int32
	val    int64
	err    error
	done   chan struct{}
}

// deliver hands the outcome to the waiting caller, or, if the caller gave
// up, undoes a call that succeeded or whose outcome is unknown.
func (r *request) deliver(v int64, err error, b *Batcher) {
	if r.state.CompareAndSwap(sent, delivered) || r.state.CompareAndSwap(queued, delivered) {
		r.val, r.err = v, err
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
	if b.stopped {
		return ErrStopped
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

func (b *Batcher) send(batch []*request) {
	ctx := b.ctx
	pipe := b.cfg.Client.Pipeline()
	cmds := make([]*redis.Cmd, len(batch))
	for i, r := range batch {
		if r.state.CompareAndSwap(queued, sent) {
			cmds[i] = r.script.Queue(ctx, pipe, r.keys, r.args...)
		}
	}
	if pipe.Len() == 0 {
		return
	}
	_, _ = pipe.Exec(ctx)
	for i, r := range batch {
		if cmds[i] == nil {
			continue // abandoned before it was sent
		}
		cmd := r.script.Retry(ctx, b.cfg.Client, cmds[i])
		v, err := cmd.Int64()
		if err != nil && r.undo != nil && !isServerError(err) && r.state.Load() == sent {
			// Unknown outcome for a caller still waiting: undo before it
			// hears of the failure, as a direct call would.
			b.undo(ctx, r.undo)
		}
		r.deliver(v, err, b)
	}
}

func isServerError(err error) bool {
	var re redis.Error
	return errors.As(err, &re)
}
