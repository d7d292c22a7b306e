package testkit

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/layout"
	"github.com/relock-go/relock/internal/redistest"
)

// RWSubscribers counts the server's subscribers of a read-write lock's
// release channel.
func RWSubscribers(t testing.TB, top Topology, name string) int64 {
	t.Helper()
	ctx := CtxTimeout(t, 5*time.Second)
	channel := RWChannel(name)
	if top.Name == "cluster" {
		c, err := top.RDB(t).(*redis.ClusterClient).MasterForKey(ctx, channel)
		if err != nil {
			t.Fatal(err)
		}
		return c.PubSubShardNumSub(ctx, channel).Val()[channel]
	}
	return CloseLater(t, Standalone.Client()).PubSubNumSub(ctx, channel).Val()[channel]
}

// RWMust returns a function that fails the test on an error and returns
// the lease.
func RWMust(t testing.TB) func(*relock.Lease, error) *relock.Lease {
	return func(l *relock.Lease, err error) *relock.Lease {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
}

// RWUnlockAll unlocks every lease, failing the test on an error.
func RWUnlockAll(t testing.TB, ctx context.Context, leases ...*relock.Lease) {
	t.Helper()
	for _, l := range leases {
		if err := l.Unlock(ctx); err != nil {
			t.Fatalf("unlock: %v", err)
		}
	}
}

// Nodes returns one relock Client per master, on clients of the test
// binary's client library set up as docs/redlock.md recommends: a dead
// node fails an attempt at once instead of after rounds of dial retries.
func Nodes(t testing.TB, ms redistest.Masters, opts ...relock.Option) []*relock.Client {
	t.Helper()
	clients := make([]*relock.Client, len(ms))
	for i, m := range ms {
		clients[i] = Deployment{Addr: m.Addr, FailFast: true}.Open(t, opts...)
	}
	return clients
}

// Direct returns a plain go-redis client per master, for looking at keys.
func Direct(t testing.TB, ms redistest.Masters) []redis.UniversalClient {
	rdbs := make([]redis.UniversalClient, len(ms))
	for i, m := range ms {
		rdbs[i] = CloseLater(t, m.Client())
	}
	return rdbs
}

// Exists reports whether the key name exists.
func Exists(t testing.TB, rdb redis.UniversalClient, name string) bool {
	t.Helper()
	n, err := rdb.Exists(context.Background(), name).Result()
	if err != nil {
		t.Fatal(err)
	}
	return n == 1
}

// Queued returns the owners in a fair lock's queue, first one first, and
// checks that the deadline zset holds the same owners.
func Queued(t testing.TB, rdb redis.UniversalClient, name string) []string {
	t.Helper()
	ctx := CtxTimeout(t, 5*time.Second)
	var lr *redis.StringSliceCmd
	var zc *redis.IntCmd
	_, err := rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		lr = p.LRange(ctx, FairQueueKey(name), 0, -1)
		zc = p.ZCard(ctx, FairTimeoutKey(name))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	q, n := lr.Val(), zc.Val()
	if int(n) != len(q) {
		t.Fatalf("queue of %d owners, %d deadlines", len(q), n)
	}
	return q
}

// WaitQueued waits until a fair lock's queue holds n owners.
func WaitQueued(t testing.TB, rdb redis.UniversalClient, name string, n int) {
	t.Helper()
	Eventually(t, 5*time.Second, fmt.Sprintf("%d Queued", n), func() bool { return len(Queued(t, rdb, name)) == n })
}

// NoKeysLeft fails the test if the lock, its queue or its deadlines (or
// any other key of name but the fencing counter and the request markers of
// reentrant owners, which expire on their own) are left.
func NoKeysLeft(t testing.TB, rdb redis.UniversalClient, name string) {
	t.Helper()
	var left []string
	for _, k := range KeysOf(t, rdb, name) {
		_, request := layout.NameOf(layout.LockRequest, k)
		_, release := layout.NameOf(layout.UnlockLatch, k)
		if !request && !release {
			left = append(left, k)
		}
	}
	if len(left) > 0 {
		ctx := context.Background()
		for _, k := range left {
			// What a key holds and for how long says which path left it.
			typ, _ := rdb.Type(ctx, k).Result()
			ttl, _ := rdb.PTTL(ctx, k).Result()
			var fields map[string]string
			if typ == "hash" {
				fields, _ = rdb.HGetAll(ctx, k).Result()
			}
			t.Logf("left: %s (%s, PTTL %v) %v", k, typ, ttl, fields)
		}
		t.Fatalf("keys left behind: %v", left)
	}
}

// SlotNames returns n lock names for a test. Their hash tags {a}, {b},
// {c} hash to slots 15495, 3300 and 7365, one on each master of the
// 3-master test cluster, so that a MultiLock over them spans nodes.
func SlotNames(t testing.TB, n int) []string {
	names := make([]string, n)
	base := LockName(t)
	for i := range names {
		names[i] = fmt.Sprintf("%s:{%c}", base, 'a'+i%3)
		if i >= 3 {
			names[i] += fmt.Sprint(i)
		}
	}
	return names
}

// NoKeys fails the test if any of the names has a key left.
func NoKeys(t testing.TB, rdb redis.UniversalClient, names ...string) {
	t.Helper()
	for _, name := range names {
		if keys := KeysOf(t, rdb, name); len(keys) > 0 {
			t.Fatalf("keys left behind: %v", keys)
		}
	}
}

// Free fails the test if any of the names is locked. Unlike NoKeys it
// allows the request markers reentrant owners leave to expire.
func Free(t testing.TB, rdb redis.UniversalClient, names ...string) {
	t.Helper()
	for _, name := range names {
		if n, err := rdb.Exists(context.Background(), name).Result(); err != nil || n != 0 {
			t.Fatalf("%q still locked (%d, %v)", name, n, err)
		}
	}
}

// Idle fails the test if a Client still watches holds or waits.
func Idle(t testing.TB, clients ...*relock.Client) {
	t.Helper()
	for _, c := range clients {
		if s := c.Stats(); s.Held != 0 || s.Asleep != 0 || s.Channels != 0 {
			t.Fatalf("state left behind: %+v", s)
		}
	}
}

// NewPermits returns a PermitSemaphore of a fresh name with n permits.
func NewPermits(t *testing.T, c *relock.Client, n int) *relock.PermitSemaphore {
	t.Helper()
	ps := c.PermitSemaphore(LockName(t))
	if ok, err := ps.TrySetPermits(CtxTimeout(t, 5*time.Second), n); !ok || err != nil {
		t.Fatalf("TrySetPermits: %v %v", ok, err)
	}
	return ps
}

// RWReaders returns the reader fields of a read-write lock's hash.
func RWReaders(t testing.TB, rdb redis.UniversalClient, name string) []string {
	t.Helper()
	var fields []string
	for f := range rdb.HGetAll(context.Background(), name).Val() {
		if f != "mode" && f != layout.TokenField && !strings.HasSuffix(f, ":write") {
			fields = append(fields, f)
		}
	}
	return fields
}

// RWHoldKey is the key of a reader's i-th hold.
func RWHoldKey(name, owner string, i int) string {
	return layout.ReaderHold(name, owner, i)
}

// RWChannel is the release channel of a read-write lock.
func RWChannel(name string) string { return layout.Companion(layout.RWChannel, name) }

// FairQueueKey is a fair lock's queue list.
func FairQueueKey(name string) string { return layout.Companion(layout.FairQueue, name) }

// FairTimeoutKey is a fair lock's zset of waiter deadlines.
func FairTimeoutKey(name string) string { return layout.Companion(layout.FairTimeout, name) }

// GivingUp returns the context for a hammer's call that may give up: ctx
// ended after d when giveUp, else ctx itself. The call's caller cancels
// it once the call has returned.
func GivingUp(ctx context.Context, giveUp bool, d time.Duration) (context.Context, context.CancelFunc) {
	if !giveUp {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, d)
}

// LockAsync runs lock(ctx) in a goroutine and sends its Lease (nil after
// an error, which fails the test) on the returned channel.
func LockAsync(t testing.TB, ctx context.Context, lock func(context.Context, ...relock.LockOption) (*relock.Lease, error)) <-chan *relock.Lease {
	got := make(chan *relock.Lease, 1)
	go func() {
		l, err := lock(ctx)
		if err != nil {
			t.Error(err)
		}
		got <- l
	}()
	return got
}

// Listen subscribes a plain connection (as a Redisson waiter does) to
// channel, sharded on a cluster, until the test ends.
func Listen(t testing.TB, ctx context.Context, rdb redis.UniversalClient, channel string) {
	t.Helper()
	var ps *redis.PubSub
	if cc, ok := rdb.(*redis.ClusterClient); ok {
		ps = cc.SSubscribe(ctx, channel)
	} else {
		ps = rdb.(*redis.Client).Subscribe(ctx, channel)
	}
	t.Cleanup(func() { _ = ps.Close() })
	if _, err := ps.Receive(ctx); err != nil {
		t.Fatal(err)
	}
}

// Gone waits until none of keys exists, and fails the test if one still
// does after 5s.
func Gone(t testing.TB, rdb redis.UniversalClient, keys ...string) {
	t.Helper()
	Eventually(t, 5*time.Second, "the keys to go", func() bool {
		n, err := rdb.Exists(context.Background(), keys...).Result()
		return err == nil && n == 0
	})
}

// NextLeader receives the next value of an Observe channel within a bound.
func NextLeader(t testing.TB, ch <-chan relock.Leader) relock.Leader {
	t.Helper()
	select {
	case l, ok := <-ch:
		if !ok {
			t.Fatal("Observe channel closed")
		}
		return l
	case <-time.After(10 * time.Second):
		t.Fatal("no change observed within 10s")
	}
	return relock.Leader{}
}

// WaitPermitDone waits for a permit's Done channel within a generous bound.
func WaitPermitDone(t testing.TB, p *relock.Permit, bound time.Duration) {
	t.Helper()
	select {
	case <-p.Done():
	case <-time.After(bound):
		t.Fatalf("permit %s not done within %v", p.ID(), bound)
	}
}

// TakeInQueueOrder takes the FairMutex of name through mutex(0), queues n
// Lock calls behind that hold one at a time, the i-th on mutex(i), and
// releases it; each call unlocks at once. It returns the order in which
// the calls took the lock and the tokens they were given, in that order.
func TakeInQueueOrder(t *testing.T, ctx context.Context, rdb redis.UniversalClient, name string, n int, mutex func(i int) *relock.FairMutex) ([]int, []uint64) {
	t.Helper()
	holder, err := mutex(0).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var order []int
	var tokens []uint64
	var wg sync.WaitGroup
	for i := range n {
		m := mutex(i)
		wg.Add(1)
		go func() {
			defer wg.Done()
			l, err := m.Lock(ctx)
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			order, tokens = append(order, i), append(tokens, l.Token())
			mu.Unlock()
			if err := l.Unlock(ctx); err != nil {
				t.Error(err)
			}
		}()
		WaitQueued(t, rdb, name, i+1)
	}
	if err := holder.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	return order, tokens
}

// DumpKeys returns the keys of name and its companions on rdb (the
// fencing counter included) with their values and whether they expire,
// for a test to compare what a call changed.
func DumpKeys(t testing.TB, rdb *redis.Client, name string) map[string]string {
	t.Helper()
	ctx := CtxTimeout(t, 5*time.Second)
	keys := append(KeysOf(t, rdb, name), layout.Fencing(name, false))
	out := make(map[string]string, len(keys))
	for _, k := range keys {
		typ := rdb.Type(ctx, k).Val()
		var v any
		switch typ {
		case "none":
			continue
		case "string":
			v = rdb.Get(ctx, k).Val()
		case "hash":
			v = rdb.HGetAll(ctx, k).Val() // fmt prints a map sorted
		case "zset":
			v = rdb.ZRangeWithScores(ctx, k, 0, -1).Val()
		case "list":
			v = rdb.LRange(ctx, k, 0, -1).Val()
		case "set":
			v = rdb.SMembers(ctx, k).Val()
			slices.Sort(v.([]string))
		case "stream":
			v = rdb.XRange(ctx, k, "-", "+").Val()
		}
		out[k] = fmt.Sprintf("%s %v expires:%v", typ, v, rdb.PTTL(ctx, k).Val() != -1)
	}
	return out
}
