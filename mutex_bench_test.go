package relock_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/redistest"
)

// Each benchmark starts its own server (redistest.ServerEnv chooses
// which), so a run measures relock and one process on loopback, nothing
// else. Besides ns/op and allocations, every benchmark reports two counts
// per operation:
//
//	redis-calls/op   commands relock sent, counted by a go-redis hook: round
//	                 trips, since nothing here is pipelined
//	server-cmds/op   the INFO commandstats delta, which also counts every
//	                 command a Lua script runs inside the server

// benchEnv is one benchmark's server, client and counters.
type benchEnv struct {
	srv   *redistest.Server
	rdb   *redis.Client
	c     *relock.Client
	calls *callCounter
	cmds  int64 // commandstats total at mark
}

// newBenchEnv starts a server and a relock Client on it, both closed when
// the benchmark ends.
func newBenchEnv(b *testing.B) *benchEnv {
	b.Helper()
	srv := redistest.Standalone(b)
	rdb := srv.Client()
	calls := &callCounter{}
	rdb.AddHook(calls)
	b.Cleanup(func() { _ = rdb.Close() })
	c, err := relock.New(rdb)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = c.Close() })
	return &benchEnv{srv: srv, rdb: rdb, c: c, calls: calls}
}

// mark starts counting Redis commands from now on.
func (e *benchEnv) mark(b *testing.B) {
	b.Helper()
	e.cmds = commandTotal(b, e.srv)
	e.calls.n.Store(0)
}

// report adds the per-operation Redis counts since mark to the result.
func (e *benchEnv) report(b *testing.B) {
	b.Helper()
	calls := e.calls.n.Load()
	// The INFO call of mark is counted by the server; this one is not yet.
	cmds := commandTotal(b, e.srv) - e.cmds - 1
	b.ReportMetric(float64(calls)/float64(b.N), "redis-calls/op")
	b.ReportMetric(float64(cmds)/float64(b.N), "server-cmds/op")
}

// commandTotal returns the sum of calls over all commands in INFO
// commandstats.
func commandTotal(b *testing.B, srv *redistest.Server) int64 {
	b.Helper()
	reply, err := srv.Do(context.Background(), "INFO", "commandstats")
	if err != nil {
		b.Fatal(err)
	}
	info, _ := reply.(string)
	var total int64
	for _, line := range strings.Split(info, "\n") {
		if !strings.HasPrefix(line, "cmdstat_") {
			continue
		}
		_, fields, _ := strings.Cut(line, ":")
		for _, f := range strings.Split(strings.TrimSpace(fields), ",") {
			if v, ok := strings.CutPrefix(f, "calls="); ok {
				n, err := strconv.ParseInt(v, 10, 64)
				if err != nil {
					b.Fatalf("bad commandstats line %q", line)
				}
				total += n
			}
		}
	}
	return total
}

// callCounter is a go-redis hook counting the commands a client sends.
type callCounter struct{ n atomic.Int64 }

// DialHook implements redis.Hook; dials are not counted.
func (h *callCounter) DialHook(next redis.DialHook) redis.DialHook { return next }

// ProcessHook implements redis.Hook, counting one command.
func (h *callCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.n.Add(1)
		return next(ctx, cmd)
	}
}

// ProcessPipelineHook implements redis.Hook, counting every command of
// the pipeline.
func (h *callCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		h.n.Add(int64(len(cmds)))
		return next(ctx, cmds)
	}
}

// lockUnlock takes and releases m once.
func lockUnlock(ctx context.Context, m *relock.Mutex) error {
	l, err := m.Lock(ctx)
	if err != nil {
		return err
	}
	return l.Unlock(ctx)
}

// BenchmarkMutexLockUnlock measures one uncontended Lock and Unlock, one
// after the other on one goroutine.
func BenchmarkMutexLockUnlock(b *testing.B) {
	e := newBenchEnv(b)
	ctx := context.Background()
	m := e.c.Mutex("bench:serial")
	e.serial(b, func() error { return lockUnlock(ctx, m) })
}

// serial measures cycle, run one after the other on one goroutine, once
// a first run has connected and loaded the scripts.
func (e *benchEnv) serial(b *testing.B, cycle func() error) {
	if err := cycle(); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	e.mark(b)
	for b.Loop() {
		if err := cycle(); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	e.report(b)
}

// BenchmarkRWMutexLockUnlock measures one uncontended write Lock and
// Unlock of an RWMutex, one after the other on one goroutine.
func BenchmarkRWMutexLockUnlock(b *testing.B) {
	e := newBenchEnv(b)
	ctx := context.Background()
	rw := e.c.RWMutex("bench:rw:serial")
	e.serial(b, func() error {
		l, err := rw.Lock(ctx)
		if err != nil {
			return err
		}
		return l.Unlock(ctx)
	})
}

// BenchmarkFairMutexLockUnlock measures one uncontended Lock and Unlock
// of a FairMutex, one after the other on one goroutine.
func BenchmarkFairMutexLockUnlock(b *testing.B) {
	e := newBenchEnv(b)
	ctx := context.Background()
	m := e.c.FairMutex("bench:fair:serial")
	e.serial(b, func() error {
		l, err := m.Lock(ctx)
		if err != nil {
			return err
		}
		return l.Unlock(ctx)
	})
}

// BenchmarkMutexLockUnlockParallel measures uncontended Lock and Unlock
// from about 64 goroutines, each on its own name.
func BenchmarkMutexLockUnlockParallel(b *testing.B) {
	e := newBenchEnv(b)
	ctx := context.Background()
	const goroutines = 64
	// Open the pool's connections before measuring.
	var wg sync.WaitGroup
	errs := make(chan error, goroutines)
	for i := range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := lockUnlock(ctx, e.c.Mutex(fmt.Sprintf("bench:warm:%d", i))); err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		b.Fatal(err)
	}
	var next atomic.Int64
	b.SetParallelism(max(1, goroutines/runtime.GOMAXPROCS(0)))
	b.ReportAllocs()
	e.mark(b)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		m := e.c.Mutex(fmt.Sprintf("bench:parallel:%d", next.Add(1)))
		for pb.Next() {
			if err := lockUnlock(ctx, m); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.StopTimer()
	e.report(b)
}

// BenchmarkMutexTryLockHeld measures TryLock on a name another owner
// holds: the failure path, which must cost one round trip and nothing else.
func BenchmarkMutexTryLockHeld(b *testing.B) {
	e := newBenchEnv(b)
	ctx := context.Background()
	m := e.c.Mutex("bench:held")
	held, err := m.Lock(ctx)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = held.Unlock(context.Background()) })
	if _, err := m.TryLock(ctx); !errors.Is(err, relock.ErrNotAcquired) {
		b.Fatalf("TryLock of a held lock: got %v, want ErrNotAcquired", err)
	}
	b.ReportAllocs()
	e.mark(b)
	for b.Loop() {
		if _, err := m.TryLock(ctx); !errors.Is(err, relock.ErrNotAcquired) {
			b.Fatalf("TryLock of a held lock: got %v, want ErrNotAcquired", err)
		}
	}
	b.StopTimer()
	e.report(b)
}

// BenchmarkMutexReentrant measures one owner locking a name twice and
// unlocking it twice.
func BenchmarkMutexReentrant(b *testing.B) {
	e := newBenchEnv(b)
	ctx := relock.WithOwner(context.Background())
	m := e.c.Mutex("bench:reentrant")
	e.serial(b, func() error {
		outer, err := m.Lock(ctx)
		if err != nil {
			return err
		}
		inner, err := m.Lock(ctx)
		if err != nil {
			return err
		}
		if err := inner.Unlock(ctx); err != nil {
			return err
		}
		return outer.Unlock(ctx)
	})
}
