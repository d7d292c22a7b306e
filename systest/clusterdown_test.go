package systest

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/internal/slots"
	"github.com/relock-go/relock/internal/testkit"
)

// TestClusterDown: on a cluster that lost a master without replica (its
// nodes answer CLUSTERDOWN for every slot), a call given a ctx that never
// ends is sent again only for a bounded time (long enough for a failover)
// and then returns the cluster's answer: Try calls, ForceUnlock,
// Election.Leader and Lease.Unlock alike. A call still sending again when
// its Client closes returns ErrClosed.
func TestClusterDown(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := redistest.NewCluster(t, 3, 0)
	rdb := testkit.CloseLater(t, c.Client())
	cl := testkit.NewClient(t, rdb)
	// Names on the first master, which stays up.
	name := func(i int) string { return "down{" + slots.Tag(i) + "}" }
	lease, err := cl.Mutex(name(1)).TryLock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Masters[2].Kill(); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 30*time.Second, "the cluster to be down", func() bool {
		_, err := c.Masters[0].Do(ctx, "SET", name(0), "x")
		return err != nil && strings.HasPrefix(err.Error(), "CLUSTERDOWN")
	})

	const bound = 60 * time.Second // far beyond the bound relock keeps, only not to hang
	calls := []struct {
		name string
		call func(*relock.Client) error
	}{
		{"Mutex.TryLock", func(cl *relock.Client) error { _, err := cl.Mutex(name(2)).TryLock(ctx); return err }},
		{"FairMutex.TryLock", func(cl *relock.Client) error { _, err := cl.FairMutex(name(3)).TryLock(ctx); return err }},
		{"RWMutex.TryRLock", func(cl *relock.Client) error { _, err := cl.RWMutex(name(4)).TryRLock(ctx); return err }},
		{"Semaphore.TryAcquire", func(cl *relock.Client) error { return cl.Semaphore(name(5)).TryAcquire(ctx, 1) }},
		{"Mutex.ForceUnlock", func(cl *relock.Client) error { _, err := cl.Mutex(name(6)).ForceUnlock(ctx); return err }},
		{"Election.Leader", func(cl *relock.Client) error { _, err := cl.Election(name(7)).Leader(ctx); return err }},
	}
	t.Run("bounded", func(t *testing.T) {
		errs := make(chan error, len(calls)+1)
		for _, k := range calls {
			go func() { errs <- k.call(cl) }()
		}
		go func() { errs <- lease.Unlock(ctx) }()
		timeout := time.After(bound)
		for range len(calls) + 1 {
			select {
			case err := <-errs:
				if err == nil || !strings.Contains(err.Error(), "CLUSTERDOWN") {
					t.Errorf("call on a cluster down = %v, want the cluster's CLUSTERDOWN", err)
				}
			case <-timeout:
				t.Fatalf("calls on a cluster down did not return within %v", bound)
			}
		}
	})
	t.Run("closed", func(t *testing.T) {
		rdb := testkit.CloseLater(t, c.Client())
		down := &downHook{seen: make(chan struct{}, len(calls))}
		rdb.AddHook(down)
		cl, err := relock.New(rdb)
		if err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		errs := make(chan error, len(calls))
		for _, k := range calls {
			wg.Add(1)
			go func() {
				defer wg.Done()
				errs <- k.call(cl)
			}()
		}
		for range len(calls) {
			<-down.seen // the calls are being sent again
		}
		_ = cl.Close()
		timeout := time.After(bound)
		for range calls {
			select {
			case err := <-errs:
				if !errors.Is(err, relock.ErrClosed) {
					t.Errorf("call on a cluster down when its Client closed = %v, want ErrClosed", err)
				}
			case <-timeout:
				t.Fatalf("calls on a cluster down did not end with Close within %v", bound)
			}
		}
		wg.Wait()
	})
}

// downHook signals each CLUSTERDOWN answer it sees, while seen has room.
type downHook struct{ seen chan struct{} }

func (h *downHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *downHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		h.saw(err)
		return err
	}
}

func (h *downHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		err := next(ctx, cmds)
		for _, cmd := range cmds {
			h.saw(cmd.Err())
		}
		return err
	}
}

func (h *downHook) saw(err error) {
	if redis.IsClusterDownError(err) {
		select {
		case h.seen <- struct{}{}:
		default:
		}
	}
}
