package door

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/relock-go/relock/internal/scripts"
)

// The Door itself, the shapes of a script command (EvalSHA, Eval), and
// the calls that go straight to Redis: a script for a caller's cleanup
// (Run) and plain commands. A script call's way in shared pipelines, alone
// or synced to replicas, and sent again on redirections, is batch.go; a
// round of calls at once, round.go.

// Config sets up a Door.
type Config struct {
	Driver  Driver
	Cleanup time.Duration // bound on undo calls (default 2s)
	// Stopped is the error of every call made once Close has begun, sent
	// or not (default ErrStopped).
	Stopped error
}

// Door sends every call of a Client to Redis. It is safe for concurrent
// use.
type Door struct {
	cfg      Config
	drv      Driver
	ctx      context.Context
	cancel   context.CancelFunc
	wg       sync.WaitGroup
	inflight atomic.Int64

	mu      sync.Mutex
	queue   []*request
	active  int
	stopped atomic.Bool // set under mu
}

// New returns a Door over cfg.Driver; Close stops it.
func New(cfg Config) *Door {
	if cfg.Cleanup <= 0 {
		cfg.Cleanup = 2 * time.Second
	}
	if cfg.Stopped == nil {
		cfg.Stopped = ErrStopped
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Door{cfg: cfg, drv: cfg.Driver, ctx: ctx, cancel: cancel}
}

// ErrStopped is the default error of calls made or queued once the Door
// is closed (see Config.Stopped).
var ErrStopped = errors.New("relock: door stopped")

// Driver returns the driver the door sends through, for what it knows of
// the deployment (its masters, the master of a key).
func (d *Door) Driver() Driver { return d.drv }

// Undo undoes a call whose reply was lost, or that nobody waits for any
// more, if the call had an effect. It is called with a bounded context.
type Undo interface {
	Undo(ctx context.Context)
}

// EvalSHA returns the EVALSHA of s with keys and args; the first key is
// its fourth argument, which a cluster routes it by.
func EvalSHA(s *scripts.Script, keys, args []any) Cmd {
	sha, _ := s.Boxed()
	return scriptCmd("evalsha", sha, keys, args)
}

// Eval returns the EVAL of s's source with keys and args.
func Eval(s *scripts.Script, keys, args []any) Cmd {
	_, src := s.Boxed()
	return scriptCmd("eval", src, keys, args)
}

func scriptCmd(name string, script any, keys, args []any) Cmd {
	a := make([]any, 0, 3+len(keys)+len(args))
	a = append(a, name, script, len(keys))
	a = append(a, keys...)
	a = append(a, args...)
	c := Cmd{Args: a}
	if len(keys) > 0 {
		c.Key = 3
	}
	return c
}

// Run runs s as Once does, straight to Redis, also once the Door is
// closed (for its callers' cleanup), and again while a cluster redirects
// it (Resend).
func (d *Door) Run(ctx context.Context, s *scripts.Script, keys []any, args ...any) Reply {
	var r Reply
	err := d.Resend(ctx, func() error {
		r = d.Once(ctx, s, keys, args...)
		return r.err
	})
	if err != nil {
		r = Failed(err) // its reader hears why it stopped
	}
	return r
}

// Command sends one plain command straight to Redis and returns its
// reply; the driver routes it by cmd.Key. A plain command is a read or a
// delete whose caller takes the answer as it comes: it is not sent again
// on a redirection the driver did not follow itself.
func (d *Door) Command(ctx context.Context, cmd Cmd) Reply { return d.drv.Do(ctx, cmd) }

// Pipe sends plain commands together and sets their replies; as Command,
// it does not send them again on a redirection.
func (d *Door) Pipe(ctx context.Context, xs []Exchange) { d.drv.Pipe(ctx, xs) }

func (d *Door) undo(ctx context.Context, undo Undo) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), d.cfg.Cleanup)
	defer cancel()
	undo.Undo(ctx)
}

// Close stops the Door (Stop) and waits for its flushers.
func (d *Door) Close() {
	d.Stop()
	d.wg.Wait()
}

// Stop stops the Door without waiting: calls still queued, calls waiting
// for a pipeline's reply or to be sent again after a redirection, and
// every later batched call, fail with Config.Stopped; pipelines in flight
// are cut off (their callers' calls are undone). Run, Once, Command and
// Pipe still send, for their callers' cleanup. It may be called again.
func (d *Door) Stop() {
	d.mu.Lock()
	d.stopped.Store(true)
	queue := d.queue
	d.queue = nil
	d.mu.Unlock()
	for _, r := range queue {
		r.deliver(Failed(d.cfg.Stopped), nil, d)
	}
	d.cancel() // pipelines in flight end now; their undo calls are bounded
}
