package relock_test

import (
	"testing"
	"time"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/layout"
	"github.com/relock-go/relock/internal/testkit"
)

// namedTokenKey is a lock's own token key, as Redisson's RFencedLock and
// relock Clients with WithPerNameTokens keep it.
func namedTokenKey(name string) string { return layout.Companion(layout.Token, name) }

// TestFencingOwnKey: a Client with WithPerNameTokens continues above a
// name's own token key that an earlier release or Redisson's RFencedLock
// left, with every lock kind, keeps the key at its last token without a
// TTL, and stays above RFencedLock's increments of it; a Client without
// the option neither reads nor writes the key, and its tokens still grow
// past every token relock handed for the name, the per-name Client's
// included, since every Client keeps the shared counter above them.
func TestFencingOwnKey(t *testing.T) {
	testkit.ForEach(t, func(t *testing.T, top testkit.Topology) {
		rdb := top.RDB(t)
		named := top.NewClient(t, relock.WithPerNameTokens())
		bounded := top.NewClient(t)
		ctx := testkit.CtxTimeout(t, 20*time.Second)
		for _, k := range keyspaceKinds() {
			name := testkit.LockName(t) + ":" + k.name
			key := namedTokenKey(name)
			if err := rdb.Set(ctx, key, 1000, 0).Err(); err != nil {
				t.Fatal(err)
			}
			t1, err := k.lock(ctx, named, name)
			if err != nil {
				t.Fatal(err)
			}
			if t1 <= 1000 {
				t.Fatalf("%s: token %d, want above the own token key's 1000", k.name, t1)
			}
			if got, _ := rdb.Get(ctx, key).Uint64(); got != t1 {
				t.Fatalf("%s: own token key %d after token %d", k.name, got, t1)
			}
			if ttl := rdb.PTTL(ctx, key).Val(); ttl != -1 {
				t.Fatalf("%s: own token key TTL %v, want none", k.name, ttl)
			}
			old := rdb.Incr(ctx, key).Val() // RFencedLock locks
			t2, err := k.lock(ctx, named, name)
			if err != nil {
				t.Fatal(err)
			}
			if t2 <= uint64(old) {
				t.Fatalf("%s: token %d after RFencedLock's %d", k.name, t2, old)
			}
			// A value the Client without the option must neither read nor
			// change.
			if err := rdb.Set(ctx, key, 1_000_000, 0).Err(); err != nil {
				t.Fatal(err)
			}
			t3, err := k.lock(ctx, bounded, name)
			if err != nil {
				t.Fatal(err)
			}
			if t3 <= t2 || t3 >= 1_000_000 {
				t.Fatalf("%s: token %d of a Client without the option after %d, want the counter's next", k.name, t3, t2)
			}
			if got := rdb.Get(ctx, key).Val(); got != "1000000" {
				t.Fatalf("%s: own token key %s after a Client without the option, want it untouched", k.name, got)
			}
		}
	})
}

// TestPerNameTokens: with WithPerNameTokens a Client keeps each name's
// own token key without TTL, as Redisson's RFencedLock does, so that
// RFencedLock's increments and relock's tokens form one growing sequence;
// a Client without the option on the same name keeps tokens growing too.
func TestPerNameTokens(t *testing.T) {
	testkit.ForEach(t, func(t *testing.T, top testkit.Topology) {
		rdb := top.RDB(t)
		named := top.NewClient(t, relock.WithPerNameTokens())
		bounded := top.NewClient(t)
		ctx := testkit.CtxTimeout(t, 20*time.Second)
		name := testkit.LockName(t)
		key := namedTokenKey(name)
		var last uint64
		step := func(who string, c *relock.Client) {
			t.Helper()
			l, err := c.Mutex(name).Lock(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if l.Token() <= last {
				t.Fatalf("%s: token %d after %d", who, l.Token(), last)
			}
			last = l.Token()
			if err := l.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
		}
		step("per-name client", named)
		if ttl := rdb.PTTL(ctx, key).Val(); ttl != -1 {
			t.Fatalf("own token key TTL %v with WithPerNameTokens, want none", ttl)
		}
		if got, _ := rdb.Get(ctx, key).Uint64(); got != last {
			t.Fatalf("own token key %d, want the last token %d", got, last)
		}
		step("bounded client", bounded)
		last = uint64(rdb.Incr(ctx, key).Val()) // Redisson's RFencedLock locks
		step("per-name client after RFencedLock", named)
		if ttl := rdb.PTTL(ctx, key).Val(); ttl != -1 {
			t.Fatalf("own token key TTL %v after the per-name client, want none", ttl)
		}
		step("bounded client after RFencedLock", bounded)
	})
}

// TestTokenOnReentryAfterOtherNames: the fencing counter is shared by the
// names of a slot, so it moves while a hold lasts; a re-entry still gets
// the token of the hold it re-enters, and the next fresh hold a greater
// one.
func TestTokenOnReentryAfterOtherNames(t *testing.T) {
	testkit.ForEach(t, func(t *testing.T, top testkit.Topology) {
		c := top.NewClient(t)
		ctx := relock.WithOwner(testkit.CtxTimeout(t, 10*time.Second))
		tag := "{" + testkit.LockName(t) + "}"
		a, b := c.Mutex(tag+":a"), c.Mutex(tag+":b")
		outer, err := a.Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var other uint64
		for i := 0; i < 3; i++ {
			l, err := b.Lock(ctx)
			if err != nil {
				t.Fatal(err)
			}
			other = l.Token()
			if err := l.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
		}
		if other <= outer.Token() {
			t.Fatalf("names of one slot: token %d after %d, want the shared counter to grow", other, outer.Token())
		}
		inner, err := a.Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if inner.Token() != outer.Token() {
			t.Fatalf("re-entry token %d, want the hold's %d", inner.Token(), outer.Token())
		}
		for _, l := range []*relock.Lease{inner, outer} {
			if err := l.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
		}
		next, err := a.Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer next.Unlock(ctx)
		if next.Token() <= other {
			t.Fatalf("next hold's token %d, want above %d", next.Token(), other)
		}
	})
}
