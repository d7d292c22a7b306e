package door

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/relock-go/relock/internal/scripts"
)

// The Door and its calls on their own: a script by EVALSHA with EVAL on
// NOSCRIPT (Once), sent again while a cluster redirects it (Run, Resend),
// and plain commands. Shared pipelines and replica-synced sends are in
// batch.go.

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

// Once runs s once, by EVALSHA and by EVAL if the server answers
// NOSCRIPT, outside the batches, and returns its reply.
func (d *Door) Once(ctx context.Context, s *scripts.Script, keys []any, args ...any) Reply {
	r := d.drv.Do(ctx, EvalSHA(s, keys, args))
	if ClassOf(r.err) == NoScript {
		r = d.drv.Do(ctx, Eval(s, keys, args))
	}
	return r
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
