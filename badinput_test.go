package relock_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/internal/testkit"
)

func TestBadInput(t *testing.T) {
	testkit.ForEach(t, func(t *testing.T, top testkit.Topology) {
		c := top.NewClient(t)
		rdb := top.RDB(t)
		ctx := testkit.CtxTimeout(t, 10*time.Second)
		long := strings.Repeat("x", relock.MaxNameLen+1)
		for _, tc := range []struct {
			name string
			lock string
			opts []relock.LockOption
			want error
		}{
			{"empty name", "", nil, relock.ErrInvalidName},
			{"long name", long, nil, relock.ErrInvalidName},
			{"open brace only", "bad{name", nil, relock.ErrInvalidName},
			{"close brace only", "bad}name", nil, relock.ErrInvalidName},
			{"empty hash tag", "{}bad", nil, relock.ErrInvalidName},
			{"zero lease", "test:bad:zero", []relock.LockOption{relock.WithLease(0)}, relock.ErrInvalidOption},
			{"negative lease", "test:bad:neg", []relock.LockOption{relock.WithLease(-time.Second)}, relock.ErrInvalidOption},
			{"sub-millisecond lease", "test:bad:tiny", []relock.LockOption{relock.WithLease(time.Microsecond)}, relock.ErrInvalidOption},
		} {
			t.Run(tc.name, func(t *testing.T) {
				m := c.Mutex(tc.lock)
				if _, err := m.Lock(ctx, tc.opts...); !errors.Is(err, tc.want) {
					t.Errorf("Lock: %v, want %v", err, tc.want)
				}
				if _, err := m.TryLock(ctx, tc.opts...); !errors.Is(err, tc.want) {
					t.Errorf("TryLock: %v, want %v", err, tc.want)
				}
				if tc.want == relock.ErrInvalidName {
					if _, err := m.IsLocked(ctx); !errors.Is(err, tc.want) {
						t.Errorf("IsLocked: %v", err)
					}
					if _, err := m.TTL(ctx); !errors.Is(err, tc.want) {
						t.Errorf("TTL: %v", err)
					}
					if _, err := m.ForceUnlock(ctx); !errors.Is(err, tc.want) {
						t.Errorf("ForceUnlock: %v", err)
					}
				}
				if tc.lock != "" && len(tc.lock) < 100 {
					if keys := testkit.KeysOf(t, rdb, tc.lock); len(keys) > 0 {
						t.Errorf("keys left: %v", keys)
					}
				}
			})
		}
		if s := c.Stats(); s.Held != 0 || s.Channels != 0 || s.Acquired != 0 {
			t.Fatalf("bad input left state behind: %+v", s)
		}
	})
}

// TestWrongType: a name that holds another kind of value is refused with
// ErrWrongType and left as it was.
func TestWrongType(t *testing.T) {
	testkit.ForEach(t, func(t *testing.T, top testkit.Topology) {
		c := top.NewClient(t)
		rdb := top.RDB(t)
		name := testkit.LockName(t)
		ctx := testkit.CtxTimeout(t, 10*time.Second)
		if err := rdb.Set(ctx, name, "not a lock", 0).Err(); err != nil {
			t.Fatal(err)
		}
		m := c.Mutex(name)
		if _, err := m.TryLock(ctx); !errors.Is(err, relock.ErrWrongType) {
			t.Fatalf("TryLock: %v, want ErrWrongType", err)
		}
		if _, err := m.Lock(ctx); !errors.Is(err, relock.ErrWrongType) {
			t.Fatalf("Lock: %v, want ErrWrongType", err)
		}
		if _, err := m.ForceUnlock(ctx); !errors.Is(err, relock.ErrWrongType) {
			t.Fatalf("ForceUnlock: %v, want ErrWrongType", err)
		}
		if v, _ := rdb.Get(ctx, name).Result(); v != "not a lock" {
			t.Fatalf("value changed to %q", v)
		}
		rdb.Del(ctx, name)
	})
}

// TestOutOfMemory: a server at maxmemory with noeviction refuses the
// acquisition with ErrOutOfMemory, and the lock works again once there is
// room.
func TestOutOfMemory(t *testing.T) {
	srv := redistest.Standalone(t)
	rdb := testkit.CloseLater(t, srv.Client())
	c := testkit.NewClient(t, rdb)
	ctx := testkit.CtxTimeout(t, 10*time.Second)
	if err := rdb.ConfigSet(ctx, "maxmemory", "1").Err(); err != nil {
		t.Fatal(err)
	}
	m := c.Mutex(testkit.LockName(t))
	if _, err := m.TryLock(ctx); !errors.Is(err, relock.ErrOutOfMemory) {
		t.Fatalf("TryLock at maxmemory: %v, want ErrOutOfMemory", err)
	}
	if keys := testkit.KeysOf(t, rdb, m.Name()); len(keys) > 0 {
		t.Fatalf("keys left: %v", keys)
	}
	if err := rdb.ConfigSet(ctx, "maxmemory", "0").Err(); err != nil {
		t.Fatal(err)
	}
	l, err := m.TryLock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}

func TestBadOptions(t *testing.T) {
	rdb := testkit.CloseLater(t, testkit.Standalone.Client())
	for _, opt := range []relock.Option{
		relock.WithWatchdogTimeout(0),
		relock.WithWatchdogTimeout(-time.Second),
		relock.WithWatchdogTimeout(time.Millisecond),
		relock.WithLogger(nil),
		relock.WithCleanupTimeout(0),
	} {
		if c, err := relock.New(rdb, opt); !errors.Is(err, relock.ErrInvalidOption) {
			t.Errorf("New: %v, want ErrInvalidOption", err)
			if c != nil {
				_ = c.Close()
			}
		}
	}
	ring := redis.NewRing(&redis.RingOptions{Addrs: map[string]string{"a": testkit.Standalone.Addr}})
	defer ring.Close()
	if _, err := relock.New(ring); !errors.Is(err, relock.ErrUnsupportedClient) {
		t.Errorf("New(ring): %v, want ErrUnsupportedClient", err)
	}
	if _, err := relock.New(nil); !errors.Is(err, relock.ErrUnsupportedClient) {
		t.Errorf("New(nil): %v, want ErrUnsupportedClient", err)
	}
}

func TestClosedClient(t *testing.T) {
	testkit.ForEach(t, func(t *testing.T, top testkit.Topology) {
		c := top.NewClient(t)
		other := top.NewClient(t)
		name := testkit.LockName(t)
		ctx := testkit.CtxTimeout(t, 10*time.Second)
		held, err := c.Mutex(name).Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		// A waiter blocked in Lock returns ErrClosed when its Client closes.
		w := top.NewClient(t)
		blocked := make(chan error, 1)
		go func() {
			_, err := w.Mutex(name).Lock(ctx)
			blocked <- err
		}()
		testkit.Eventually(t, 5*time.Second, "the waiter to wait", func() bool { return w.Stats().Asleep == 1 })
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		if err := <-blocked; !errors.Is(err, relock.ErrClosed) {
			t.Fatalf("blocked Lock after Close: %v, want ErrClosed", err)
		}
		if _, err := w.Mutex(name).TryLock(ctx); !errors.Is(err, relock.ErrClosed) {
			t.Fatalf("TryLock on a closed client: %v", err)
		}
		ps := c.PermitSemaphore(name + ":permits")
		if _, err := ps.TrySetPermits(ctx, 1); err != nil {
			t.Fatal(err)
		}
		permit, err := ps.Acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		// Closing the holder's client ends its leases and permits, with an
		// error that matches both ErrLockLost and ErrClosed, but leaves the
		// keys to expire.
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
		testkit.WaitDone(t, held, time.Second)
		if err := held.Err(); !errors.Is(err, relock.ErrLockLost) || !errors.Is(err, relock.ErrClosed) {
			t.Fatalf("lease after Close: %v, want ErrLockLost and ErrClosed", err)
		}
		select {
		case <-permit.Done():
		case <-time.After(time.Second):
			t.Fatal("a permit's Done did not close with its Client")
		}
		if err := permit.Err(); !errors.Is(err, relock.ErrLockLost) || !errors.Is(err, relock.ErrClosed) {
			t.Fatalf("permit after Close: %v, want ErrLockLost and ErrClosed", err)
		}
		if locked, _ := other.Mutex(name).IsLocked(ctx); !locked {
			t.Fatal("Close released a held lock")
		}
		if _, err := other.Mutex(name).ForceUnlock(context.Background()); err != nil {
			t.Fatal(err)
		}
	})
}

// TestEvictionWarning: a server that may evict keys is reported once in
// the log.
func TestEvictionWarning(t *testing.T) {
	srv := redistest.Standalone(t, redistest.Options{Args: []string{"maxmemory-policy allkeys-lru"}})
	var log syncBuffer
	c, err := relock.New(testkit.CloseLater(t, srv.Client()), relock.WithLogger(slog.New(slog.NewTextHandler(&log, nil))))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	testkit.Eventually(t, 5*time.Second, "the eviction warning", func() bool {
		return strings.Contains(log.String(), "maxmemory-policy=allkeys-lru")
	})
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
