package relock_test

import (
	"context"
	"runtime"
	"testing"
)

// BenchmarkSemaphoreContended measures Acquire(1)+Release(1) cycles of 16
// goroutines of one Client on a semaphore of 4 permits: most acquisitions
// wait for a release, so the figure includes the wake-ups.
func BenchmarkSemaphoreContended(b *testing.B) {
	e := newBenchEnv(b)
	ctx := context.Background()
	s := e.c.Semaphore("bench:semaphore")
	if _, err := s.TrySetPermits(ctx, 4); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.SetParallelism(max(1, 16/runtime.GOMAXPROCS(0)))
	e.mark(b)
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if err := s.Acquire(ctx, 1); err != nil {
				b.Error(err)
				return
			}
			if err := s.Release(ctx, 1); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.StopTimer()
	e.report(b)
}

// BenchmarkPermitSemaphoreContended is BenchmarkSemaphoreContended with
// watchdog-kept permits.
func BenchmarkPermitSemaphoreContended(b *testing.B) {
	e := newBenchEnv(b)
	ctx := context.Background()
	ps := e.c.PermitSemaphore("bench:permits")
	if _, err := ps.TrySetPermits(ctx, 4); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.SetParallelism(max(1, 16/runtime.GOMAXPROCS(0)))
	e.mark(b)
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			p, err := ps.Acquire(ctx)
			if err != nil {
				b.Error(err)
				return
			}
			if err := p.Release(ctx); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.StopTimer()
	e.report(b)
}
