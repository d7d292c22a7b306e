package relock_test

import (
	"errors"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/history"
	"github.com/relock-go/relock/internal/testkit"
)

// TestSpinHammer: spinning waiters exclude each other and subscribe to
// nothing.
func TestSpinHammer(t *testing.T) {
	testkit.ForEach(t, func(t *testing.T, top testkit.Topology) {
		clients := []*relock.Client{top.NewClient(t), top.NewClient(t)}
		name := testkit.LockName(t)
		rec := history.New()
		ctx := testkit.CtxTimeout(t, time.Minute)
		spin := relock.WithSpin(100*time.Microsecond, 2*time.Millisecond)
		counter := 0
		var wg sync.WaitGroup
		for i := 0; i < 8; i++ {
			c := clients[i%2]
			wg.Add(1)
			go func() {
				defer wg.Done()
				for j := 0; j < 25; j++ {
					l, err := c.Mutex(name).Lock(ctx, spin)
					if err != nil {
						t.Error(err)
						return
					}
					h := rec.Begin("w", name, l.Token())
					v := counter
					runtime.Gosched()
					counter = v + 1
					h.End()
					if err := l.Unlock(ctx); err != nil {
						t.Error(err)
						return
					}
				}
			}()
		}
		wg.Wait()
		if counter != 200 {
			t.Fatalf("counter %d, want 200", counter)
		}
		if v := rec.Check(); len(v) > 0 {
			t.Fatalf("%d violations, first: %+v", len(v), v[0])
		}
		for _, c := range clients {
			if s := c.Stats(); s.Waits == 0 || s.Wakeups != 0 || s.Channels != 0 {
				t.Fatalf("spinning client %+v: want waits, and no wake-ups or channels", s)
			}
		}
	})
}

func TestSpinBadOptions(t *testing.T) {
	c := testkit.NewClient(t, testkit.CloseLater(t, testkit.Standalone.Client()))
	m := c.Mutex(testkit.LockName(t))
	ctx := testkit.CtxTimeout(t, 5*time.Second)
	for _, o := range []relock.LockOption{
		relock.WithSpin(0, time.Millisecond),
		relock.WithSpin(-time.Millisecond, time.Millisecond),
		relock.WithSpin(2*time.Millisecond, time.Millisecond),
	} {
		if _, err := m.Lock(ctx, o); !errors.Is(err, relock.ErrInvalidOption) {
			t.Errorf("Lock: %v, want ErrInvalidOption", err)
		}
	}
}
