package relock_test

import (
	"context"
	"testing"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/internal/testkit"
)

// benchSyncModes are the replica sync settings the benchmarks compare:
// off, and on waiting for every replica.
var benchSyncModes = []struct {
	name string
	opt  relock.Option
}{
	{"off", relock.WithoutReplicaSync()},
	{"on", relock.WithReplicaSync(relock.ReplicaSync{})},
}

// BenchmarkReplicaSync measures a serial lock+unlock cycle on a master with
// two replicas, with replica sync off and on (WAIT for both replicas).
// Compare the two ns/op figures of one run: their ratio is what replica
// sync costs an uncontended cycle on this machine.
func BenchmarkReplicaSync(b *testing.B) {
	r := redistest.NewReplicated(b, 2)
	testkit.WaitReplicasOnline(b, r.Master, 2)
	for _, bc := range benchSyncModes {
		b.Run(bc.name, func(b *testing.B) {
			c := testkit.NewClient(b, testkit.CloseLater(b, r.Master.Client()), bc.opt)
			m := c.Mutex(testkit.LockName(b))
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				l, err := m.Lock(ctx)
				if err != nil {
					b.Fatal(err)
				}
				if err := l.Unlock(ctx); err != nil {
					b.Fatal(err)
				}
			}
			if n := c.Stats().SyncShort; n > 0 {
				b.Fatalf("%d acquisitions too few replicas acknowledged", n)
			}
		})
	}
}

// BenchmarkReplicaSyncSynchronizers is BenchmarkReplicaSync for a
// Semaphore's Acquire+Release and a PermitSemaphore's TryAcquire+Release:
// both calls of a cycle wait for the replicas with sync on.
func BenchmarkReplicaSyncSynchronizers(b *testing.B) {
	r := redistest.NewReplicated(b, 2)
	testkit.WaitReplicasOnline(b, r.Master, 2)
	for _, bc := range benchSyncModes {
		b.Run("semaphore/"+bc.name, func(b *testing.B) {
			c := testkit.NewClient(b, testkit.CloseLater(b, r.Master.Client()), bc.opt)
			s := c.Semaphore(testkit.LockName(b))
			ctx := context.Background()
			if _, err := s.TrySetPermits(ctx, 1); err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			for b.Loop() {
				if err := s.Acquire(ctx, 1); err != nil {
					b.Fatal(err)
				}
				if err := s.Release(ctx, 1); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run("permit/"+bc.name, func(b *testing.B) {
			c := testkit.NewClient(b, testkit.CloseLater(b, r.Master.Client()), bc.opt)
			ps := c.PermitSemaphore(testkit.LockName(b))
			ctx := context.Background()
			if _, err := ps.TrySetPermits(ctx, 1); err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			for b.Loop() {
				p, err := ps.TryAcquire(ctx)
				if err != nil {
					b.Fatal(err)
				}
				if err := p.Release(ctx); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
