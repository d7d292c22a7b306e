package batch

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/relock-go/relock/internal/layout"
	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/internal/scripts"
)

var srv *redistest.Server

func TestMain(m *testing.M) {
	os.Exit(redistest.Main(m, func(s *redistest.Server) func() { srv = s; return nil }))
}

// pipelines counts the pipelines carrying script calls, and can hold them
// after they ran.
type pipelines struct {
	n, cmds atomic.Int64
	hold    chan struct{} // when not nil, a pipeline waits for it after running
	ran     chan struct{} // signalled after a held pipeline ran
}

func (p *pipelines) DialHook(next redis.DialHook) redis.DialHook          { return next }
func (p *pipelines) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }
func (p *pipelines) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		scriptCalls := 0
		for _, c := range cmds {
			if c.Name() == "evalsha" || c.Name() == "eval" {
				scriptCalls++
			}
		}
		if scriptCalls == 0 { // the connection's own handshake
			return next(ctx, cmds)
		}
		p.n.Add(1)
		p.cmds.Add(int64(scriptCalls))
		err := next(ctx, cmds)
		if p.hold != nil {
			p.ran <- struct{}{}
			<-p.hold
		}
		return err
	}
}

func setup(t *testing.T, p *pipelines, flushers ...int) (*Batcher, *redis.Client) {
	rdb := srv.Client()
	rdb.AddHook(p)
	cfg := Config{Client: rdb, Cleanup: 5 * time.Second}
	if len(flushers) > 0 {
		cfg.Flushers = flushers[0]
	}
	b := New(cfg)
	t.Cleanup(func() { b.Close(); _ = rdb.Close() })
	return b, rdb
}

func lockArgs(key, owner string) ([]any, []any) {
	return []any{key, layout.FencingCounter, layout.Companion(layout.LockQueue, key)}, []any{60000, owner, "1", "", time.Now().UnixMilli()}
}

type undoCount struct {
	rdb *redis.Client
	key string
	n   atomic.Int32
}

func (u *undoCount) Undo(ctx context.Context) {
	u.n.Add(1)
	u.rdb.Del(ctx, u.key)
}

func TestLoneCallGoesStraight(t *testing.T) {
	p := &pipelines{}
	b, _ := setup(t, p)
	for i := 0; i < 20; i++ {
		keys, args := lockArgs(fmt.Sprintf("b:lone:%d", i), "o:1")
		if v, err := b.Do(context.Background(), scripts.Lock, keys, args, nil); err != nil || v <= 0 {
			t.Fatalf("Do = %d, %v", v, err)
		}
	}
	if n := p.n.Load(); n != 0 {
		t.Fatalf("%d pipelines for serial calls, want none", n)
	}
}

func TestConcurrentCallsShareRoundTrips(t *testing.T) {
	p := &pipelines{}
	b, _ := setup(t, p)
	const workers, calls = 32, 50
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < calls; i++ {
				keys, args := lockArgs(fmt.Sprintf("b:conc:%d:%d", w, i), "o:1")
				if v, err := b.Do(context.Background(), scripts.Lock, keys, args, nil); err != nil || v <= 0 {
					t.Errorf("Do = %d, %v", v, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	n, cmds := p.n.Load(), p.cmds.Load()
	if n == 0 || cmds <= n {
		t.Fatalf("%d pipelines carried %d calls: no batching", n, cmds)
	}
	t.Logf("%d of %d calls went in %d pipelines (%.1f per pipeline)", cmds, workers*calls, n, float64(cmds)/float64(n))
}

// TestCancelledCalls: a call cancelled while queued never runs; one
// cancelled after it was sent is undone before Do returns.
func TestCancelledCalls(t *testing.T) {
	p := &pipelines{hold: make(chan struct{}), ran: make(chan struct{}, 10)}
	b, rdb := setup(t, p, 1)
	b.inflight.Add(1) // another call in flight: every call queues
	defer b.inflight.Add(-1)

	sentCtx, cancelSent := context.WithCancel(context.Background())
	undo := &undoCount{rdb: rdb, key: "b:sent"}
	result := make(chan error, 1)
	go func() {
		keys, args := lockArgs("b:sent", "o:1")
		_, err := b.Do(sentCtx, scripts.Lock, keys, args, undo)
		result <- err
	}()
	<-p.ran // the call ran on the server; its flusher is held

	queuedCtx, cancelQueued := context.WithCancel(context.Background())
	cancelQueued()
	keys, args := lockArgs("b:queued", "o:1")
	if _, err := b.Do(queuedCtx, scripts.Lock, keys, args, &undoCount{rdb: rdb, key: "b:queued"}); !errors.Is(err, context.Canceled) {
		t.Fatalf("queued call: %v, want context.Canceled", err)
	}

	cancelSent()
	close(p.hold)
	if err := <-result; !errors.Is(err, context.Canceled) {
		t.Fatalf("sent call: %v, want context.Canceled", err)
	}
	if undo.n.Load() != 1 {
		t.Fatalf("sent call undone %d times before Do returned, want 1", undo.n.Load())
	}
	b.Close() // the flusher has finished with the queue
	ctx := context.Background()
	if n := rdb.Exists(ctx, "b:sent", "b:queued").Val(); n != 0 {
		t.Fatalf("%d keys left: a cancelled call stayed in effect", n)
	}
	if _, err := b.Do(ctx, scripts.Lock, keys, args, nil); !errors.Is(err, ErrStopped) {
		t.Fatalf("Do after Close: %v, want ErrStopped", err)
	}
}
