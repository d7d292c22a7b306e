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
	"github.com/relock-go/relock/internal/layout"
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

// TestBadOptions: every invalid option of every scope is refused with
// ErrInvalidOption by the call it reaches (New for a Client's, the call for
// a lock call's, every call on the handle for a handle's) before anything
// is written to the server.
func TestBadOptions(t *testing.T) {
	srv := redistest.Standalone(t)
	rdb := testkit.CloseLater(t, srv.Client())
	ctx := testkit.CtxTimeout(t, 30*time.Second)

	t.Run("Client", func(t *testing.T) {
		short := testkit.CloseLater(t, redis.NewClient(&redis.Options{Addr: srv.Addr, ReadTimeout: 50 * time.Millisecond}))
		for _, tc := range []struct {
			name string
			rdb  *redis.Client
			opt  relock.Option
		}{
			{"zero watchdog timeout", rdb, relock.WithWatchdogTimeout(0)},
			{"negative watchdog timeout", rdb, relock.WithWatchdogTimeout(-time.Second)},
			{"watchdog timeout below 100ms", rdb, relock.WithWatchdogTimeout(time.Millisecond)},
			{"nil logger", rdb, relock.WithLogger(nil)},
			{"zero cleanup timeout", rdb, relock.WithCleanupTimeout(0)},
			{"negative cleanup timeout", rdb, relock.WithCleanupTimeout(-time.Second)},
			{"client name over 200 bytes", rdb, relock.WithClientName(strings.Repeat("x", 201))},
			{"nil meter provider", rdb, relock.WithMeterProvider(nil)},
			{"nil tracer provider", rdb, relock.WithTracerProvider(nil)},
			{"negative sync replicas", rdb, relock.WithReplicaSync(relock.ReplicaSync{Replicas: -1})},
			{"negative sync timeout", rdb, relock.WithReplicaSync(relock.ReplicaSync{Timeout: -time.Second})},
			{"sync timeout below 1ms", rdb, relock.WithReplicaSync(relock.ReplicaSync{Timeout: time.Microsecond})},
			{"sync timeout past the read timeout", short, relock.WithReplicaSync(relock.ReplicaSync{Timeout: 100 * time.Millisecond})},
			{"sync timeout past the renewal interval", rdb, relock.WithReplicaSync(relock.ReplicaSync{Timeout: 20 * time.Second})},
		} {
			t.Run(tc.name, func(t *testing.T) {
				c, err := relock.New(tc.rdb, tc.opt)
				if !errors.Is(err, relock.ErrInvalidOption) {
					t.Errorf("New: %v, want ErrInvalidOption", err)
				}
				if c != nil {
					_ = c.Close()
				}
			})
		}
		if n, err := rdb.DBSize(ctx).Result(); err != nil || n != 0 {
			t.Fatalf("the server holds %d keys after New refused its options (%v), want none", n, err)
		}
	})

	c := testkit.NewClient(t, rdb)
	name := testkit.LockName(t)
	t.Run("call", func(t *testing.T) {
		type lockCall = func(context.Context, ...relock.LockOption) (*relock.Lease, error)
		rw := c.RWMutex(name + ":rw")
		ps := c.PermitSemaphore(name + ":permits")
		calls := map[string]lockCall{
			"Mutex.Lock":        c.Mutex(name).Lock,
			"Mutex.TryLock":     c.Mutex(name).TryLock,
			"FairMutex.Lock":    c.FairMutex(name + ":fair").Lock,
			"FairMutex.TryLock": c.FairMutex(name + ":fair").TryLock,
			"RWMutex.RLock":     rw.RLock,
			"RWMutex.TryRLock":  rw.TryRLock,
			"RWMutex.Lock":      rw.Lock,
			"RWMutex.TryLock":   rw.TryLock,
			"MultiLock.Lock":    relock.Multi(c.Mutex(name+":a"), c.Mutex(name+":b")).Lock,
			"MultiLock.TryLock": relock.Multi(c.Mutex(name+":a"), c.Mutex(name+":b")).TryLock,
			"RedLock.Lock":      relock.NewRedLock(name+":red", []*relock.Client{c}).Lock,
			"RedLock.TryLock":   relock.NewRedLock(name+":red", []*relock.Client{c}).TryLock,
			"Election.Campaign": func(ctx context.Context, opts ...relock.LockOption) (*relock.Lease, error) {
				_, err := c.Election(name+":election").Campaign(ctx, "v", opts...)
				return nil, err
			},
			"PermitSemaphore.Acquire": func(ctx context.Context, opts ...relock.LockOption) (*relock.Lease, error) {
				_, err := ps.Acquire(ctx, opts...)
				return nil, err
			},
			"PermitSemaphore.TryAcquire": func(ctx context.Context, opts ...relock.LockOption) (*relock.Lease, error) {
				_, err := ps.TryAcquire(ctx, opts...)
				return nil, err
			},
		}
		for _, tc := range []struct {
			name string
			opt  relock.LockOption
		}{
			{"zero lease", relock.WithLease(0)},
			{"negative lease", relock.WithLease(-time.Second)},
			{"sub-millisecond lease", relock.WithLease(time.Microsecond)},
			{"zero spin minimum", relock.WithSpin(0, time.Second)},
			{"negative spin minimum", relock.WithSpin(-time.Millisecond, time.Second)},
			{"spin maximum below its minimum", relock.WithSpin(10*time.Millisecond, 5*time.Millisecond)},
		} {
			t.Run(tc.name, func(t *testing.T) {
				for op, call := range calls {
					// A valid option before the bad one does not save it.
					if _, err := call(ctx, relock.WithLease(time.Minute), tc.opt); !errors.Is(err, relock.ErrInvalidOption) {
						t.Errorf("%s: %v, want ErrInvalidOption", op, err)
					}
				}
			})
		}
	})

	t.Run("handle", func(t *testing.T) {
		type handleCall struct {
			op   string
			call func(context.Context) error
		}
		fairCalls := func(m *relock.FairMutex) []handleCall {
			return []handleCall{
				{"Lock", func(ctx context.Context) error { _, err := m.Lock(ctx); return err }},
				{"TryLock", func(ctx context.Context) error { _, err := m.TryLock(ctx); return err }},
				{"IsLocked", func(ctx context.Context) error { _, err := m.IsLocked(ctx); return err }},
				{"TTL", func(ctx context.Context) error { _, err := m.TTL(ctx); return err }},
				{"ForceUnlock", func(ctx context.Context) error { _, err := m.ForceUnlock(ctx); return err }},
			}
		}
		redCalls := func(r *relock.RedLock) []handleCall {
			return []handleCall{
				{"Lock", func(ctx context.Context) error { _, err := r.Lock(ctx); return err }},
				{"TryLock", func(ctx context.Context) error { _, err := r.TryLock(ctx); return err }},
			}
		}
		for _, tc := range []struct {
			name  string
			calls []handleCall
		}{
			{"zero waiter timeout", fairCalls(c.FairMutex(name+":fair", relock.WithWaiterTimeout(0)))},
			{"negative waiter timeout", fairCalls(c.FairMutex(name+":fair", relock.WithWaiterTimeout(-time.Second)))},
			{"waiter timeout below 30ms", fairCalls(c.FairMutex(name+":fair", relock.WithWaiterTimeout(29*time.Millisecond)))},
			{"zero attempt timeout", redCalls(relock.NewRedLock(name+":red", []*relock.Client{c}, relock.WithAttemptTimeout(0)))},
			{"negative attempt timeout", redCalls(relock.NewRedLock(name+":red", []*relock.Client{c}, relock.WithAttemptTimeout(-time.Second)))},
			{"bad option after a good one", redCalls(relock.NewRedLock(name+":red", []*relock.Client{c},
				relock.WithAttemptTimeout(time.Second), relock.WithAttemptTimeout(0)))},
		} {
			t.Run(tc.name, func(t *testing.T) {
				for _, hc := range tc.calls {
					if err := hc.call(ctx); !errors.Is(err, relock.ErrInvalidOption) {
						t.Errorf("%s: %v, want ErrInvalidOption", hc.op, err)
					}
				}
			})
		}
	})

	keys, err := rdb.Keys(ctx, "*").Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range keys {
		if _, info := layout.NameOf(layout.ClientInfo, k); !info {
			t.Errorf("key left behind: %q", k)
		}
	}
	if s := c.Stats(); s.Held != 0 || s.Channels != 0 || s.Acquired != 0 || s.Asleep != 0 {
		t.Fatalf("bad options left state behind: %+v", s)
	}
}

// TestUnsupportedClient: New refuses a *redis.Ring and a nil client,
// NewWithDriver a nil driver.
func TestUnsupportedClient(t *testing.T) {
	ring := redis.NewRing(&redis.RingOptions{Addrs: map[string]string{"a": testkit.Standalone.Addr}})
	defer ring.Close()
	if _, err := relock.New(ring); !errors.Is(err, relock.ErrUnsupportedClient) {
		t.Errorf("New(ring): %v, want ErrUnsupportedClient", err)
	}
	if _, err := relock.New(nil); !errors.Is(err, relock.ErrUnsupportedClient) {
		t.Errorf("New(nil): %v, want ErrUnsupportedClient", err)
	}
	if _, err := relock.NewWithDriver(nil); !errors.Is(err, relock.ErrUnsupportedClient) || !errors.Is(err, relock.ErrInvalidOption) {
		t.Errorf("NewWithDriver(nil): %v, want ErrUnsupportedClient and ErrInvalidOption", err)
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
