package relock_test

import (
	"context"
	"fmt"
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

// keyspaceNames is how many distinct names each lock kind locks in
// TestKeyspaceBounded.
const keyspaceNames = 10000

// keyspaceKind takes and releases one hold of a name, returning its token.
type keyspaceKind struct {
	name string
	lock func(ctx context.Context, c *relock.Client, name string) (uint64, error)
}

func keyspaceKinds() []keyspaceKind {
	cycle := func(ctx context.Context, l *relock.Lease, err error) (uint64, error) {
		if err != nil {
			return 0, err
		}
		return l.Token(), l.Unlock(ctx)
	}
	return []keyspaceKind{
		{"mutex", func(ctx context.Context, c *relock.Client, name string) (uint64, error) {
			l, err := c.Mutex(name).Lock(ctx)
			return cycle(ctx, l, err)
		}},
		{"reentrant", func(ctx context.Context, c *relock.Client, name string) (uint64, error) {
			ctx = relock.WithOwner(ctx)
			m := c.Mutex(name)
			outer, err := m.Lock(ctx)
			if err != nil {
				return 0, err
			}
			inner, err := m.Lock(ctx)
			if err != nil {
				return 0, err
			}
			if inner.Token() != outer.Token() {
				return 0, fmt.Errorf("re-entry token %d, the hold's is %d", inner.Token(), outer.Token())
			}
			if err := inner.Unlock(ctx); err != nil {
				return 0, err
			}
			return outer.Token(), outer.Unlock(ctx)
		}},
		{"fair", func(ctx context.Context, c *relock.Client, name string) (uint64, error) {
			l, err := c.FairMutex(name).Lock(ctx)
			return cycle(ctx, l, err)
		}},
		{"rw", func(ctx context.Context, c *relock.Client, name string) (uint64, error) {
			rw := c.RWMutex(name)
			w, err := rw.Lock(ctx)
			if err != nil {
				return 0, err
			}
			token := w.Token()
			if err := w.Unlock(ctx); err != nil {
				return 0, err
			}
			r, err := rw.RLock(ctx)
			if err != nil {
				return 0, err
			}
			if r.Token() < token {
				return 0, fmt.Errorf("reader token %d below the writer's %d", r.Token(), token)
			}
			return token, r.Unlock(ctx)
		}},
	}
}

// TestKeyspaceBounded locks and releases 10,000 distinct names with each
// lock kind, on a standalone server and on a cluster of their own, and
// checks what stays in Redis without a TTL: one fencing counter on the
// standalone server, one per hash slot in use at most on the cluster,
// nothing per name. Every name is locked a second time by another Client
// in the middle of the run, and its tokens must grow.
func TestKeyspaceBounded(t *testing.T) {
	srv, err := redistest.Start(redistest.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	cl, err := redistest.StartCluster(3, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	for _, top := range []testkit.Topology{
		{Name: "standalone", RDB: func(t testing.TB) redis.UniversalClient { return testkit.CloseLater(t, srv.Client()) }},
		{Name: "cluster", RDB: func(t testing.TB) redis.UniversalClient { return testkit.CloseLater(t, cl.Client()) }},
	} {
		t.Run(top.Name, func(t *testing.T) {
			rdb := top.RDB(t)
			a, b := testkit.NewClient(t, rdb), testkit.NewClient(t, top.RDB(t))
			ctx := testkit.CtxTimeout(t, 5*time.Minute)
			slotsUsed := make(map[int]bool)
			for _, k := range keyspaceKinds() {
				names := make([]string, keyspaceNames)
				for i := range names {
					names[i] = fmt.Sprintf("keyspace:%s:order:%d", k.name, i)
					slotsUsed[slots.Of(names[i])] = true
				}
				if err := lockAll(ctx, k, names, a, b); err != nil {
					t.Fatalf("%s: %v", k.name, err)
				}
			}
			persistent := keysWithoutTTL(t, ctx, rdb)
			t.Logf("%d names in %d slots, %d lock kinds: %d keys without TTL", keyspaceNames, len(slotsUsed), len(keyspaceKinds()), len(persistent))
			for _, k := range persistent {
				if !strings.HasPrefix(k, "relock_fencing") {
					t.Errorf("key %q left without TTL", k)
				}
			}
			bound := 1
			if top.Name == "cluster" {
				bound = len(slotsUsed)
			}
			if len(persistent) == 0 || len(persistent) > bound {
				t.Fatalf("%d keys without TTL, want 1 to %d", len(persistent), bound)
			}
		})
	}
}

// lockAll locks and releases every name once with a, in parallel, and
// every name again with b after a has passed it, checking that b's token
// is above a's.
func lockAll(ctx context.Context, k keyspaceKind, names []string, a, b *relock.Client) error {
	const workers = 16
	tokens := make([]uint64, len(names))
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		first error
	)
	fail := func(err error) {
		mu.Lock()
		defer mu.Unlock()
		if first == nil {
			first = err
		}
	}
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < len(names); i += workers {
				t, err := k.lock(ctx, a, names[i])
				if err != nil {
					fail(fmt.Errorf("%s: %w", names[i], err))
					return
				}
				tokens[i] = t
			}
			for i := w; i < len(names); i += workers {
				t, err := k.lock(ctx, b, names[i])
				if err != nil {
					fail(fmt.Errorf("%s again: %w", names[i], err))
					return
				}
				if t <= tokens[i] {
					fail(fmt.Errorf("%s: token %d after %d", names[i], t, tokens[i]))
					return
				}
			}
		}()
	}
	wg.Wait()
	return first
}

// keysWithoutTTL lists the keys without a TTL on every master of rdb.
func keysWithoutTTL(t *testing.T, ctx context.Context, rdb redis.UniversalClient) []string {
	t.Helper()
	var (
		mu    sync.Mutex
		found []string
	)
	scan := func(ctx context.Context, c *redis.Client) error {
		iter := c.Scan(ctx, 0, "*", 1000).Iterator()
		var keys []string
		for iter.Next(ctx) {
			keys = append(keys, iter.Val())
		}
		if err := iter.Err(); err != nil {
			return err
		}
		p := c.Pipeline()
		ttls := make([]*redis.DurationCmd, len(keys))
		for i, k := range keys {
			ttls[i] = p.PTTL(ctx, k)
		}
		if _, err := p.Exec(ctx); err != nil && err != redis.Nil {
			return err
		}
		mu.Lock()
		defer mu.Unlock()
		for i, k := range keys {
			if ttls[i].Val() == -1 { // go-redis reports "no expiry" as -1
				found = append(found, k)
			}
		}
		return nil
	}
	var err error
	if cc, ok := rdb.(*redis.ClusterClient); ok {
		err = cc.ForEachMaster(ctx, scan)
	} else {
		err = scan(ctx, rdb.(*redis.Client))
	}
	if err != nil {
		t.Fatal(err)
	}
	return found
}
