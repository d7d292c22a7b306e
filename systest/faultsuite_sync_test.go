package systest

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/internal/testkit"
)

// replicaSync is one setting of replica-synced acquisition under test.
type replicaSync struct {
	name string // for the report
	on   bool
	opts []relock.Option
}

// replicaSyncs returns the settings the failover scenarios compare: off;
// on with ReplicaSync's defaults (every replica the master has connected,
// and at least one, must acknowledge within 100ms, or the acquisition is
// released and fails with ErrReplicaSync); and on with one replica
// required.
func replicaSyncs() []replicaSync {
	return []replicaSync{
		{name: "off", opts: []relock.Option{relock.WithoutReplicaSync()}},
		{name: "on", on: true, opts: []relock.Option{relock.WithReplicaSync(relock.ReplicaSync{})}},
		{name: "on-replicas-1", on: true, opts: []relock.Option{relock.WithReplicaSync(relock.ReplicaSync{Replicas: 1})}},
	}
}

// TestFaultReplicaSyncCost measures what replica sync costs a serial
// lock+unlock on a master with two replicas, as a ratio of cycle times
// with sync on and off, for the safety report. It asserts nothing about
// the figure, nor on how many acquisitions too few replicas acknowledged
// in time (reported as sync_failures): both depend on the machine.
func TestFaultReplicaSyncCost(t *testing.T) {
	t.Parallel()
	r := redistest.NewReplicated(t, 2)
	waitAcknowledging(t, r.Master, 2)
	cycles := testkit.Rounds(300, 3000)
	ctx := testkit.CtxTimeout(t, 2*time.Minute)
	failures := 0
	measure := func(opts ...relock.Option) time.Duration {
		c := testkit.Deployment{Addr: r.Master.Addr}.Open(t, opts...)
		m := c.Mutex(testkit.LockName(t))
		for range 20 { // warm up: connections, scripts, the replica count
			failures += cycle(t, ctx, m)
		}
		start := time.Now()
		for range cycles {
			failures += cycle(t, ctx, m)
		}
		return time.Since(start) / time.Duration(cycles)
	}
	var off, on time.Duration
	for range 2 { // alternate, to even out whatever else the machine does
		off += measure(relock.WithoutReplicaSync())
		on += measure(relock.WithReplicaSync(relock.ReplicaSync{}))
	}
	off, on = off/2, on/2
	testkit.Safety(t, "replica-sync-cost", "runs", 2*cycles, "replicas", 2, "cycle_off", off, "cycle_on", on,
		"ratio", fmt.Sprintf("%.2f", float64(on)/float64(off)), "sync_failures", failures)
}

// cycle locks and unlocks m once. It returns 1 if the acquisition failed
// with ErrReplicaSync, and fails the test on any other error.
func cycle(t *testing.T, ctx context.Context, m *relock.Mutex) int {
	t.Helper()
	l, err := m.Lock(ctx)
	if errors.Is(err, relock.ErrReplicaSync) {
		return 1
	}
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	return 0
}

// waitAcknowledging waits until every replica of master has acknowledged
// a replication offset. A replica that has just finished its first
// synchronisation answers WAIT only after its first acknowledgement (up
// to a second later): until then every acquisition with replica sync on
// would fall short.
func waitAcknowledging(t *testing.T, master *redistest.Server, replicas int) {
	t.Helper()
	ctx := testkit.CtxTimeout(t, 30*time.Second)
	rdb := testkit.CloseLater(t, master.Client())
	testkit.Eventually(t, 30*time.Second, "the replicas to acknowledge", func() bool {
		_ = rdb.Set(ctx, "relock-test:ack", "1", time.Second).Err() // something to acknowledge
		f, err := infoFields(ctx, master, "replication")
		if err != nil {
			return false
		}
		for i := range replicas {
			v := f[fmt.Sprintf("slave%d", i)]
			if !containsField(v, "state=online") || containsField(v, "offset=0") {
				return false
			}
		}
		return true
	})
}
