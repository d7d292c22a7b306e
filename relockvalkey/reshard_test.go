package relockvalkey

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/internal/slots"
	"github.com/relock-go/relock/internal/testkit"
)

// TestClusterLiveReshard: while four Clients contend for two mutexes of
// one hash slot, the slot migrates key by key to another master (the
// source answering ASK, the target TRYAGAIN meanwhile) and then for good:
// every Lock and Unlock succeeds, no two holders overlap, and the locks go
// on changing hands after the move.
func TestClusterLiveReshard(t *testing.T) {
	c := redistest.NewCluster(t, 3, 0)
	ctx := testkit.CtxTimeout(t, 2*time.Minute)
	tag := fmt.Sprintf("{live-%d}", time.Now().UnixNano())
	names := []string{"reshard:" + tag + ":a", "reshard:" + tag + ":b"}
	slot := slots.Of(names[0])
	holders := make([]atomic.Int32, len(names))
	var ops atomic.Int64
	progress := make(chan struct{}, 1)
	stop := make(chan struct{})
	errs := make(chan error, 8)
	var wg sync.WaitGroup
	for w := range 4 {
		locks := newLocks(t, testkit.Deployment{Addrs: c.Addrs()})
		wg.Add(1)
		go func() {
			defer wg.Done()
			i := w % len(names)
			m := locks.Mutex(names[i])
			for {
				select {
				case <-stop:
					return
				default:
				}
				l, err := m.Lock(ctx)
				if err != nil {
					errs <- fmt.Errorf("lock: %w", err)
					return
				}
				if n := holders[i].Add(1); n != 1 {
					errs <- fmt.Errorf("%d holders of %s at once", n, names[i])
				}
				holders[i].Add(-1)
				if err := l.Unlock(ctx); err != nil {
					errs <- fmt.Errorf("unlock: %w", err)
					return
				}
				ops.Add(1)
				select {
				case progress <- struct{}{}:
				default:
				}
			}
		}()
	}
	// advance waits until the workers have made n more cycles.
	advance := func(n int64, what string) {
		t.Helper()
		until := ops.Load() + n
		for ops.Load() < until {
			select {
			case <-progress:
			case err := <-errs:
				t.Fatalf("%s: %v", what, err)
			case <-ctx.Done():
				t.Fatalf("%s: the workers stalled at %d cycles", what, ops.Load())
			}
		}
	}
	advance(20, "before the move")
	from, err := c.MasterForSlot(ctx, slot)
	if err != nil {
		t.Fatal(err)
	}
	mig, err := c.BeginMigration(ctx, slot, otherMaster(c, from))
	if err != nil {
		t.Fatal(err)
	}
	// The keys go over one at a time while the workers run; a script
	// whose keys are split between the two masters cannot run until the
	// last has moved (TRYAGAIN), so the workers may not progress before.
	for {
		n, err := mig.MoveKeys(ctx, 1)
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			break
		}
	}
	if err := mig.Finish(ctx); err != nil {
		t.Fatal(err)
	}
	advance(20, "after the move")
	close(stop)
	wg.Wait()
	select {
	case err := <-errs:
		t.Fatal(err)
	default:
	}
}
