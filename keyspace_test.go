package relock_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/layout"
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
				if !strings.HasPrefix(k, layout.FencingCounter) {
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

// TestScriptKeys: a script is given as KEYS only keys its call may touch,
// since on a cluster a call whose KEYS include one that the node of a
// migrating slot lacks is answered TRYAGAIN. A Client without
// WithPerNameTokens gives no script a lock's own token key, and a channel
// is given as a key only as the guard of the release scripts that must
// not run while their slot migrates; with the option, the lock and
// release scripts of Mutex, FairMutex and RWMutex are given the own token
// key, and tokens come from it.
func TestScriptKeys(t *testing.T) {
	scripts := []string{"lock", "unlock", "fair_lock", "fair_unlock", "fair_pass", "rw_write_lock", "rw_write_unlock", "rw_read_lock", "rw_read_unlock"}
	guarded := map[string]bool{"fair_unlock": true, "fair_pass": true, "rw_write_unlock": true, "rw_read_unlock": true}
	testkit.ForEach(t, func(t *testing.T, top testkit.Topology) {
		for _, perName := range []bool{false, true} {
			rec := newKeysRecorder(scripts...)
			rdb := top.RDB(t)
			rdb.AddHook(rec)
			opts := []relock.Option{relock.WithoutReplicaSync()}
			if perName {
				opts = append(opts, relock.WithPerNameTokens())
			}
			c := testkit.NewClient(t, rdb, opts...)
			ctx := testkit.CtxTimeout(t, 10*time.Second)
			for _, k := range keyspaceKinds() {
				name := testkit.LockName(t) + ":" + k.name
				own := namedTokenKey(name)
				if perName {
					if err := rdb.Set(ctx, own, 1000, 0).Err(); err != nil {
						t.Fatal(err)
					}
				}
				rec.reset()
				token, err := k.lock(ctx, c, name)
				if err != nil {
					t.Fatalf("%s: %v", k.name, err)
				}
				if perName && token <= 1000 {
					t.Fatalf("%s with WithPerNameTokens: token %d, want above the own token key's 1000", k.name, token)
				}
				calls := rec.calls()
				if len(calls) == 0 {
					t.Fatalf("%s: no script call recorded", k.name)
				}
				for _, call := range calls {
					channels := 0
					for _, key := range call.keys {
						if isChannel(key) {
							channels++
						}
					}
					if want := map[bool]int{true: 1, false: 0}[guarded[call.script]]; channels != want {
						t.Errorf("%s: %s given KEYS %v: %d channels, want %d", k.name, call.script, call.keys, channels, want)
					}
					if slices.Contains(call.keys, own) != perName {
						t.Errorf("%s, per-name tokens %v: %s given KEYS %v", k.name, perName, call.script, call.keys)
					}
				}
			}
		}
	})
}

// keysRecorder is a go-redis hook that records the KEYS of every call of
// the scripts it was made for, sent alone or in a pipeline.
type keysRecorder struct {
	names map[string]string // script SHA1 -> file name
	mu    sync.Mutex
	seen  []scriptCall
}

// scriptCall is one call a keysRecorder saw.
type scriptCall struct {
	script string
	keys   []string
}

func newKeysRecorder(files ...string) *keysRecorder {
	r := &keysRecorder{names: make(map[string]string)}
	for _, f := range files {
		r.names[testkit.ScriptSHA(f)] = f
	}
	return r
}

func (r *keysRecorder) reset() {
	r.mu.Lock()
	r.seen = nil
	r.mu.Unlock()
}

func (r *keysRecorder) calls() []scriptCall {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.seen)
}

func (r *keysRecorder) record(cmd redis.Cmder) {
	args := cmd.Args()
	if len(args) < 3 {
		return
	}
	var script string
	switch strings.ToLower(fmt.Sprint(args[0])) {
	case "evalsha":
		script = r.names[fmt.Sprint(args[1])]
	case "eval":
		for _, f := range r.names {
			if strings.HasPrefix(fmt.Sprint(args[1]), "-- "+f+".lua:") {
				script = f
			}
		}
	}
	if script == "" {
		return
	}
	n, _ := strconv.Atoi(fmt.Sprint(args[2]))
	call := scriptCall{script: script}
	for _, k := range args[3 : 3+n] {
		call.keys = append(call.keys, fmt.Sprint(k))
	}
	r.mu.Lock()
	r.seen = append(r.seen, call)
	r.mu.Unlock()
}

// DialHook implements redis.Hook.
func (r *keysRecorder) DialHook(next redis.DialHook) redis.DialHook { return next }

// ProcessHook implements redis.Hook.
func (r *keysRecorder) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		r.record(cmd)
		return next(ctx, cmd)
	}
}

// ProcessPipelineHook implements redis.Hook.
func (r *keysRecorder) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, cmd := range cmds {
			r.record(cmd)
		}
		return next(ctx, cmds)
	}
}

// TestReleaseDuringMigration: while the slot of a lock is being migrated
// (half-migrated, none of its keys moved yet), calls whose KEYS all exist
// run at once: an attempt at a Mutex, a FairMutex or an RWMutex write
// lock that another Client holds and another waits for, and the
// Mutex's release, which grants the lock to that waiter. (With a lock's
// release channel and own token key among their KEYS, keys that do not
// exist, they were answered TRYAGAIN until the migration ended.) The
// FairMutex's and the RWMutex's releases, which take a guard, are answered
// TRYAGAIN while the slot migrates and grant the lock once it has moved.
func TestReleaseDuringMigration(t *testing.T) {
	cl := redistest.NewCluster(t, 3, 0)
	ctx := testkit.CtxTimeout(t, time.Minute)
	for _, k := range []struct {
		name    string
		locker  func(c *relock.Client, name string) relock.Locker
		guarded bool // its release waits for the migration to end
	}{
		{"mutex", func(c *relock.Client, name string) relock.Locker { return c.Mutex(name) }, false},
		{"fair", func(c *relock.Client, name string) relock.Locker { return c.FairMutex(name) }, true},
		{"rw", func(c *relock.Client, name string) relock.Locker { return c.RWMutex(name).WLocker() }, true},
	} {
		t.Run(k.name, func(t *testing.T) {
			tries := &tryAgains{}
			rdb := testkit.CloseLater(t, cl.Client())
			rdb.AddHook(tries)
			a := testkit.NewClient(t, rdb, relock.WithoutReplicaSync())
			b := testkit.NewClient(t, testkit.CloseLater(t, cl.Client()), relock.WithoutReplicaSync())
			name := testkit.LockName(t)
			held, err := k.locker(a, name).Lock(ctx)
			if err != nil {
				t.Fatal(err)
			}
			got := testkit.LockAsync(t, ctx, k.locker(b, name).Lock)
			testkit.Eventually(t, 5*time.Second, "the waiter to queue", func() bool { return b.Stats().Asleep == 1 })

			slot := slots.Of(name)
			from, err := cl.MasterForSlot(ctx, slot)
			if err != nil {
				t.Fatal(err)
			}
			to := cl.Masters[0]
			if to == from {
				to = cl.Masters[1]
			}
			m, err := cl.BeginMigration(ctx, slot, to)
			if err != nil {
				t.Fatal(err)
			}
			try, cancel := context.WithTimeout(ctx, 3*time.Second)
			defer cancel()
			if _, err := k.locker(a, name).TryLock(try); !errors.Is(err, relock.ErrNotAcquired) {
				t.Fatalf("TryLock of the held lock while its slot migrates: %v (%d TRYAGAIN), want ErrNotAcquired", err, tries.n.Load())
			}
			if n := tries.n.Load(); n != 0 {
				t.Fatalf("the attempt was answered TRYAGAIN %d times", n)
			}
			released := make(chan error, 1)
			go func() { released <- held.Unlock(ctx) }()
			if k.guarded {
				testkit.Eventually(t, 5*time.Second, "the release to be answered TRYAGAIN", func() bool { return tries.n.Load() > 0 })
				select {
				case err := <-released:
					t.Fatalf("the guarded release returned %v while the slot migrates", err)
				default:
				}
				if err := m.Finish(ctx); err != nil {
					t.Fatal(err)
				}
			}
			if err := <-released; err != nil {
				t.Fatalf("release: %v (%d TRYAGAIN)", err, tries.n.Load())
			}
			if n := tries.n.Load(); !k.guarded && n != 0 {
				t.Fatalf("the release was answered TRYAGAIN %d times", n)
			}
			l := <-got
			if l == nil {
				t.FailNow()
			}
			if !k.guarded {
				if err := m.Finish(ctx); err != nil {
					t.Fatal(err)
				}
			}
			if err := l.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// tryAgains is a go-redis hook that counts the calls answered TRYAGAIN.
type tryAgains struct{ n atomic.Int64 }

// DialHook implements redis.Hook.
func (h *tryAgains) DialHook(next redis.DialHook) redis.DialHook { return next }

// ProcessHook implements redis.Hook.
func (h *tryAgains) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		if redis.IsTryAgainError(cmd.Err()) {
			h.n.Add(1)
		}
		return err
	}
}

// ProcessPipelineHook implements redis.Hook.
func (h *tryAgains) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		err := next(ctx, cmds)
		for _, cmd := range cmds {
			if redis.IsTryAgainError(cmd.Err()) {
				h.n.Add(1)
			}
		}
		return err
	}
}

// isChannel reports whether key, among a lock script's KEYS, is the name
// of a channel: a guard (see rw_queue.lua).
func isChannel(key string) bool {
	for _, prefix := range []string{layout.LockChannel, layout.RWChannel, layout.ElectionChannel, layout.GrantChannel} {
		if _, ok := layout.NameOf(prefix, key); ok {
			return true
		}
	}
	return strings.HasPrefix(key, layout.LatchChannelPrefix)
}
