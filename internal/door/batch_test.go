package door_test

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

	"github.com/relock-go/relock/internal/door"
	"github.com/relock-go/relock/internal/door/goredis"
	"github.com/relock-go/relock/internal/layout"
	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/internal/scripts"
)

var srv *redistest.Server

func TestMain(m *testing.M) {
	os.Exit(redistest.Main(m, func(s *redistest.Server) func() { srv = s; return nil }))
}

// The tests of the batcher (they were internal/batch's).

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

func setup(t *testing.T, p *pipelines) (*door.Door, *redis.Client) {
	rdb := srv.Client()
	rdb.AddHook(p)
	b := door.New(door.Config{Driver: goredis.New(rdb), Cleanup: 5 * time.Second})
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
	b, rdb := setup(t, p)
	defer b.Busy()() // another call in flight: every call queues

	// One sent call per flusher, each held after it ran, so that the next
	// call stays queued.
	sentCtx, cancelSent := context.WithCancel(context.Background())
	undos := make([]*undoCount, door.Flushers)
	result := make(chan error, door.Flushers)
	for i := range undos {
		key := fmt.Sprintf("b:sent:%d", i)
		undos[i] = &undoCount{rdb: rdb, key: key}
		go func() {
			keys, args := lockArgs(key, "o:1")
			_, err := b.Do(sentCtx, scripts.Lock, keys, args, undos[i])
			result <- err
		}()
		<-p.ran // the call ran on the server; its flusher is held
	}

	queuedCtx, cancelQueued := context.WithCancel(context.Background())
	cancelQueued()
	keys, args := lockArgs("b:queued", "o:1")
	if _, err := b.Do(queuedCtx, scripts.Lock, keys, args, &undoCount{rdb: rdb, key: "b:queued"}); !errors.Is(err, context.Canceled) {
		t.Fatalf("queued call: %v, want context.Canceled", err)
	}

	cancelSent()
	close(p.hold)
	for range undos {
		if err := <-result; !errors.Is(err, context.Canceled) {
			t.Fatalf("sent call: %v, want context.Canceled", err)
		}
	}
	for i, undo := range undos {
		if undo.n.Load() != 1 {
			t.Fatalf("sent call %d undone %d times before Do returned, want 1", i, undo.n.Load())
		}
	}
	b.Close() // the flushers have finished with the queue
	ctx := context.Background()
	left := []string{"b:queued"}
	for _, u := range undos {
		left = append(left, u.key)
	}
	if n := rdb.Exists(ctx, left...).Val(); n != 0 {
		t.Fatalf("%d keys left: a cancelled call stayed in effect", n)
	}
	if _, err := b.Do(ctx, scripts.Lock, keys, args, nil); !errors.Is(err, door.ErrStopped) {
		t.Fatalf("Do after Close: %v, want ErrStopped", err)
	}
}
