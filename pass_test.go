package relock_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/layout"
	"github.com/relock-go/relock/internal/testkit"
)

// lockFunc is a lock's Lock method.
type lockFunc = func(context.Context, ...relock.LockOption) (*relock.Lease, error)

// passKind is a lock whose holds a Client passes on in process: the
// Mutex, and the RWMutex's write side. opts are the options of the
// Clients of a test on every topology: an RWMutex's releases hand nothing
// while the Client waits for replicas, as it does on the test cluster.
type passKind struct {
	name   string
	lock   func(c *relock.Client, name string) relock.Locker // its write side, for an RWMutex
	script string                                            // its lock script, whose calls are attempts
	opts   []relock.Option
}

var passKinds = []passKind{
	{"Mutex", func(c *relock.Client, name string) relock.Locker { return c.Mutex(name) }, "lock.lua", nil},
	{"RWMutex", func(c *relock.Client, name string) relock.Locker { return c.RWMutex(name).WLocker() },
		"rw_write_lock.lua", []relock.Option{relock.WithoutReplicaSync()}},
}

// forPassKinds runs test once for each passKind, as a subtest.
func forPassKinds(t *testing.T, test func(t *testing.T, k passKind)) {
	for _, k := range passKinds {
		t.Run(k.name, func(t *testing.T) { test(t, k) })
	}
}

// passRun is a Client about to pass a lock of kind k on in process: b
// holds it, granted by a release that reserved tokens for passing on, and
// a third call waits (next); b's Unlock passes the lock to it. other is a
// second Client.
type passRun struct {
	k        passKind
	c, other *relock.Client
	rdb      redis.UniversalClient
	name     string
	ctx      context.Context
	b        *relock.Lease
	next     <-chan *relock.Lease
}

// newPassRun makes a passRun on the standalone server, whose master has no
// replicas: on the test cluster every master has one, and a Client waits
// for its acknowledgement before it hands anyone a grant, so it never
// passes a lock on in process there.
func newPassRun(t *testing.T, k passKind) *passRun {
	t.Helper()
	top := testkit.Topologies()[0]
	r := &passRun{k: k, c: top.NewClient(t), other: top.NewClient(t), rdb: top.RDB(t), name: testkit.LockName(t),
		ctx: testkit.CtxTimeout(t, 20*time.Second)}
	r.b = holdRun(t, r.ctx, r.c, k.lock(r.c, r.name).Lock)
	r.next = testkit.LockAsync(t, r.ctx, k.lock(r.c, r.name).Lock)
	testkit.Eventually(t, 5*time.Second, "the third call to sleep", func() bool { return r.c.Stats().Asleep == 1 })
	return r
}

// pass unlocks b and returns the lease the next call got.
func (r *passRun) pass(t *testing.T) *relock.Lease {
	t.Helper()
	if err := r.b.Unlock(r.ctx); err != nil {
		t.Fatalf("a release that passed the lock on: %v", err)
	}
	n := <-r.next
	if n == nil {
		t.FailNow()
	}
	return n
}

// checkPassed checks that n was passed the lock from prev in process: with
// the token after prev's, reserved for it, and, once Redis has answered
// the switch (Check waits for it), recorded there with that token.
func checkPassed(t *testing.T, ctx context.Context, rdb redis.UniversalClient, name string, prev, n *relock.Lease) {
	t.Helper()
	if n.Token() != prev.Token()+1 {
		t.Fatalf("passed on with token %d after %d: not the reserved one", n.Token(), prev.Token())
	}
	if err := n.Check(ctx); err != nil {
		t.Fatalf("check of the passed hold: %v", err)
	}
	if tok := rdb.HGet(ctx, name, layout.TokenField).Val(); tok != strconv.FormatUint(n.Token(), 10) {
		t.Fatalf("Redis records token %s, the holder has %d", tok, n.Token())
	}
}

// finish checks that the other Client can take the lock, then that
// nothing is left behind.
func (r *passRun) finish(t *testing.T) *relock.Lease {
	t.Helper()
	o, err := r.k.lock(r.other, r.name).TryLock(r.ctx)
	if err != nil {
		t.Fatalf("the other Client cannot take the lock: %v", err)
	}
	if err := o.Unlock(r.ctx); err != nil {
		t.Fatal(err)
	}
	testkit.NoKeysLeft(t, r.rdb, r.name)
	testkit.Idle(t, r.c, r.other)
	return o
}

// TestPassOnInProcess: a release that passes the lock to a waiter of its
// Client hands it the first reserved token (one above its own, while a
// grant by Redis would take one above the reserved block), Redis then
// records the new holder with that token, and the next Client to take the
// lock gets a token above every reserved one.
func TestPassOnInProcess(t *testing.T) {
	forPassKinds(t, testPassOnInProcess)
}

func testPassOnInProcess(t *testing.T, k passKind) {
	r := newPassRun(t, k)
	n := r.pass(t)
	checkPassed(t, r.ctx, r.rdb, r.name, r.b, n)
	if h := testkit.HoldCount(t, r.rdb, r.name); h != 1 {
		t.Fatalf("%d holds in Redis, want 1", h)
	}
	if err := n.Unlock(r.ctx); err != nil {
		t.Fatal(err)
	}
	if o := r.finish(t); o.Token() <= r.b.Token()+8 {
		t.Fatalf("the next Client's token %d is not above the block reserved after %d", o.Token(), r.b.Token())
	}
}

// TestPassOnBrokenRun: a lock deleted under its holder and then passed on
// in process is not taken by the switch: the new holder's lease is lost
// as soon as Redis answers, its Unlock reports ErrNotHeld, and the lock is
// free for anyone.
func TestPassOnBrokenRun(t *testing.T) {
	forPassKinds(t, testPassOnBrokenRun)
}

func testPassOnBrokenRun(t *testing.T, k passKind) {
	r := newPassRun(t, k)
	// Deleted without a word (a force unlock would tell the waiter to
	// attempt, and it would take the free lock before the release).
	if n, err := r.rdb.Del(r.ctx, r.name).Result(); err != nil || n != 1 {
		t.Fatalf("delete: %v, %v", n, err)
	}
	n := r.pass(t)
	select {
	case <-n.Done():
	case <-r.ctx.Done():
		t.Fatal("a hold passed on from a deleted lock was never found lost")
	}
	if err := n.Err(); !errors.Is(err, relock.ErrLockLost) {
		t.Fatalf("Err of the lost hold: %v", err)
	}
	if err := n.Unlock(r.ctx); !errors.Is(err, relock.ErrNotHeld) {
		t.Fatalf("Unlock of the lost hold: %v, want ErrNotHeld", err)
	}
	if testkit.Exists(t, r.rdb, r.name) {
		t.Fatal("the switch took a lock its Client did not hold")
	}
	r.finish(t)
}

// TestPassOnYieldsToOtherClients: while four goroutines of one Client
// keep taking a lock, passing it on in process, a waiter of another Client
// gets it: passing on ends once Redis answers that another Client's
// waiter is first.
func TestPassOnYieldsToOtherClients(t *testing.T) {
	forPassKinds(t, testPassOnYieldsToOtherClients)
}

func testPassOnYieldsToOtherClients(t *testing.T, k passKind) {
	testkit.ForEach(t, func(t *testing.T, top testkit.Topology) {
		c, other := top.NewClient(t, k.opts...), top.NewClient(t, k.opts...)
		name := testkit.LockName(t)
		passingYields(t, top, c, name, k.lock(c, name).Lock, "the other Client", k.lock(other, name).Lock)
		testkit.Idle(t, other)
	})
}

// TestRWPassOnYieldsToReaders: while four goroutines of one Client keep
// taking an RWMutex's write lock, passing it on in process, a reader of
// the same Client gets in: passing on ends once Redis answers that a
// reader is in the queue.
func TestRWPassOnYieldsToReaders(t *testing.T) {
	testkit.ForEach(t, func(t *testing.T, top testkit.Topology) {
		c := top.NewClient(t, relock.WithoutReplicaSync())
		name := testkit.LockName(t)
		rw := c.RWMutex(name)
		passingYields(t, top, c, name, rw.Lock, "the reader", rw.RLock)
	})
}

// passingYields keeps four goroutines of c taking the lock name with lock
// until c passes it on in process, then checks that contender, called as
// who, gets the lock all the same; nothing is left behind.
func passingYields(t *testing.T, top testkit.Topology, c *relock.Client, name string, lock lockFunc, who string, contender lockFunc) {
	ctx := testkit.CtxTimeout(t, 30*time.Second)
	stop := make(chan struct{})
	var holds atomic.Int64
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				l, err := lock(ctx)
				if err != nil {
					t.Error(err)
					return
				}
				holds.Add(1)
				if err := l.Unlock(ctx); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	testkit.Eventually(t, 10*time.Second, "the Client to pass the lock on", func() bool { return c.Stats().Handoffs > 50 })
	before := holds.Load()
	o, err := contender(ctx)
	if err != nil {
		t.Fatalf("%s: %v", who, err)
	}
	during := holds.Load() - before
	if err := o.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	close(stop)
	wg.Wait()
	t.Logf("%s waited through %d holds", who, during)
	testkit.NoKeysLeft(t, top.RDB(t), name)
	testkit.Idle(t, c)
}

// TestFairPassOnInProcess: a FairMutex's release to its Client's waiter
// names the queue's next heads that are the Client's too; that waiter's
// release passes the lock to the first of them with the token reserved
// for it, and Redis then records it.
func TestFairPassOnInProcess(t *testing.T) {
	top := testkit.Topologies()[0] // no replicas (see newPassRun)
	c, rdb := top.NewClient(t), top.RDB(t)
	name := testkit.LockName(t)
	ctx := testkit.CtxTimeout(t, 20*time.Second)
	m := c.FairMutex(name)
	a, err := m.Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	bCh := testkit.LockAsync(t, ctx, m.Lock)
	testkit.Eventually(t, 5*time.Second, "the second call to sleep", func() bool { return c.Stats().Asleep == 1 })
	cCh := testkit.LockAsync(t, ctx, m.Lock)
	testkit.Eventually(t, 5*time.Second, "the third call to sleep", func() bool { return c.Stats().Asleep == 2 })
	if err := a.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	b := <-bCh
	if b == nil {
		t.FailNow()
	}
	if err := b.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	n := <-cCh
	if n == nil {
		t.FailNow()
	}
	checkPassed(t, ctx, rdb, name, b, n)
	if err := n.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	testkit.NoKeysLeft(t, rdb, name)
	testkit.Idle(t, c)
}

// TestFairPassKeepsOrder: 20 calls of one Client, queued one at a time,
// take a FairMutex in the order they queued while its releases pass it on
// in process, with growing tokens, and so do calls of two Clients whose
// waiters alternate in runs.
func TestFairPassKeepsOrder(t *testing.T) {
	top := testkit.Topologies()[0] // no replicas (see newPassRun)
	rdb := top.RDB(t)
	for _, nclients := range []int{1, 2} {
		clients := []*relock.Client{top.NewClient(t), top.NewClient(t)}[:nclients]
		name := testkit.LockName(t) + ":" + strconv.Itoa(nclients)
		ctx := testkit.CtxTimeout(t, time.Minute)
		const waiters = 20
		order, tokens := testkit.TakeInQueueOrder(t, ctx, rdb, name, waiters, func(i int) *relock.FairMutex {
			return clients[(i/3)%nclients].FairMutex(name) // runs of three per Client
		})
		passed := 0
		for i, got := range order {
			if got != i {
				t.Fatalf("%d Clients: acquisition order %v, want 0..%d", nclients, order, waiters-1)
			}
			if i > 0 && tokens[i] <= tokens[i-1] {
				t.Fatalf("%d Clients: tokens %v do not grow", nclients, tokens)
			}
			if i > 0 && tokens[i] == tokens[i-1]+1 {
				passed++
			}
		}
		if len(order) != waiters || passed == 0 {
			t.Fatalf("%d Clients: %d of %d acquired, %d passed on with a reserved token", nclients, len(order), waiters, passed)
		}
		testkit.NoKeysLeft(t, rdb, name)
		testkit.Idle(t, clients...)
	}
}

// TestFairPassAsksForHeadsWhenLow: the switches of a FairMutex's run
// ask Redis to name the queue's next heads only when few of those named
// before are left, and the run keeps the queue's order with growing
// tokens.
func TestFairPassAsksForHeadsWhenLow(t *testing.T) {
	top := testkit.Topologies()[0] // no replicas (see newPassRun)
	arb := top.RDB(t)
	switches := &testkit.CountCalls{Script: "fair_pass.lua"}
	asking := &testkit.CountCalls{Script: "fair_pass.lua", When: func(args []any) bool {
		// EVALSHA sha numkeys KEYS[1..numkeys] ARGV[1..]: ARGV[4] is how
		// many heads to name.
		if len(args) < 3 {
			return false
		}
		n, _ := strconv.Atoi(fmt.Sprint(args[2]))
		return len(args) > 6+n && fmt.Sprint(args[6+n]) != "0"
	}}
	arb.AddHook(switches)
	arb.AddHook(asking)
	c, rdb := testkit.NewClient(t, arb), top.RDB(t)
	name := testkit.LockName(t)
	ctx := testkit.CtxTimeout(t, time.Minute)
	const waiters = 12
	order, tokens := testkit.TakeInQueueOrder(t, ctx, rdb, name, waiters, func(int) *relock.FairMutex { return c.FairMutex(name) })
	for i, got := range order {
		if got != i || (i > 0 && tokens[i] <= tokens[i-1]) {
			t.Fatalf("acquisition order %v with tokens %v, want 0..%d with growing tokens", order, tokens, waiters-1)
		}
	}
	if n, a := switches.N.Load(), asking.N.Load(); n < 4 || 2*a > n {
		t.Fatalf("%d of %d acquisitions passed on in process, %d of the switches asking for heads; want at least 4, at most half asking", n, waiters, a)
	}
	testkit.NoKeysLeft(t, rdb, name)
	testkit.Idle(t, c)
}

// joinedRun is a Client whose calls pass a lock of kind k on in process:
// b holds it, granted by a's release with tokens reserved, and attempts
// counts the Client's calls of the lock script.
type joinedRun struct {
	k        passKind
	c        *relock.Client
	rdb      redis.UniversalClient
	name     string
	ctx      context.Context
	b        *relock.Lease
	attempts *testkit.CountCalls
}

func newJoinedRun(t *testing.T, k passKind) *joinedRun {
	t.Helper()
	top := testkit.Topologies()[0] // see newPassRun
	c, attempts := top.CountingClient(t, k.script)
	r := &joinedRun{k: k, c: c, rdb: top.RDB(t), name: testkit.LockName(t),
		ctx: testkit.CtxTimeout(t, 20*time.Second), attempts: attempts}
	r.b = holdRun(t, r.ctx, r.c, k.lock(r.c, r.name).Lock)
	return r
}

// holdRun returns a hold by lock, a Lock method of a lock of c, that may
// pass it on in process: granted to a waiting call by c's release of the
// hold before, with tokens reserved.
func holdRun(t *testing.T, ctx context.Context, c *relock.Client, lock lockFunc) *relock.Lease {
	t.Helper()
	a, err := lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	bCh := testkit.LockAsync(t, ctx, lock)
	testkit.Eventually(t, 5*time.Second, "the second call to sleep", func() bool { return c.Stats().Asleep == 1 })
	if err := a.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	b := <-bCh
	if b == nil {
		t.FailNow()
	}
	return b
}

// join starts a Lock call that must join the run: it sleeps without an
// attempt. asleep is how many calls then sleep.
func (r *joinedRun) join(t *testing.T, asleep int64) <-chan *relock.Lease {
	t.Helper()
	before := r.attempts.N.Load()
	ch := testkit.LockAsync(t, r.ctx, r.k.lock(r.c, r.name).Lock)
	testkit.Eventually(t, 5*time.Second, "the call to sleep", func() bool { return r.c.Stats().Asleep == asleep })
	if n := r.attempts.N.Load() - before; n != 0 {
		t.Fatalf("a call that came while its Client passes the lock on made %d attempts, want 0", n)
	}
	return ch
}

// TestPassOnJoinsRun: a Lock call that comes while its Client passes the
// lock on in process sleeps without an attempt of its own, and is passed
// the lock in turn with the next reserved token.
func TestPassOnJoinsRun(t *testing.T) {
	forPassKinds(t, testPassOnJoinsRun)
}

func testPassOnJoinsRun(t *testing.T, k passKind) {
	r := newJoinedRun(t, k)
	next := r.join(t, 1)
	if err := r.b.Unlock(r.ctx); err != nil {
		t.Fatal(err)
	}
	n := <-next
	if n == nil {
		t.FailNow()
	}
	checkPassed(t, r.ctx, r.rdb, r.name, r.b, n)
	if err := n.Unlock(r.ctx); err != nil {
		t.Fatal(err)
	}
	testkit.NoKeysLeft(t, r.rdb, r.name)
	testkit.Idle(t, r.c)
}

// TestPassOnRunEndWakesJoined: when the run ends (Redis answered that
// another Client's waiter is first), the calls that joined it without an
// attempt are told to attempt at once, and queue behind that waiter.
func TestPassOnRunEndWakesJoined(t *testing.T) {
	forPassKinds(t, testPassOnRunEndWakesJoined)
}

func testPassOnRunEndWakesJoined(t *testing.T, k passKind) {
	r := newJoinedRun(t, k)
	x1 := r.join(t, 1)
	x2 := r.join(t, 2)
	// Without replica sync, the other Client's waiter takes grants: it is
	// granted the lock when the run ends, ahead of the calls that joined.
	other := testkit.Topologies()[0].NewClient(t, relock.WithoutReplicaSync())
	o := testkit.LockAsync(t, r.ctx, k.lock(other, r.name).Lock)
	testkit.Eventually(t, 5*time.Second, "the other Client's call to sleep", func() bool { return other.Stats().Asleep == 1 })
	attempts := r.attempts.N.Load()
	if err := r.b.Unlock(r.ctx); err != nil {
		t.Fatal(err)
	}
	l1 := <-x1
	if l1 == nil {
		t.FailNow()
	}
	if err := l1.Check(r.ctx); err != nil { // the switch is answered: another Client's waiter is first
		t.Fatal(err)
	}
	wakeups := r.c.Stats().Wakeups
	if err := l1.Unlock(r.ctx); err != nil {
		t.Fatal(err)
	}
	lo := <-o
	if lo == nil {
		t.FailNow()
	}
	// Told (a wake-up: its timer alone would wake it without one), it
	// attempts: the Mutex's calls make none before the run ends. An
	// RWMutex's second writer waits for its Client's writers' turn, not
	// in the run: it has the turn once the first is passed the lock, and
	// joins the run then only if no answer has ended it yet (to be told
	// to attempt when it ends); either way it attempts.
	if k.name == "Mutex" {
		testkit.Eventually(t, 5*time.Second, "the call that joined the run to be told to attempt", func() bool { return r.c.Stats().Wakeups > wakeups })
	}
	testkit.Eventually(t, 5*time.Second, "the call that joined the run to attempt", func() bool { return r.attempts.N.Load() > attempts })
	if lo.Token() <= l1.Token() {
		t.Errorf("the other Client's token %d after %d", lo.Token(), l1.Token())
	}
	if err := lo.Unlock(r.ctx); err != nil {
		t.Fatal(err)
	}
	l2 := <-x2
	if l2 == nil {
		t.FailNow()
	}
	if l2.Token() <= lo.Token() {
		t.Errorf("the joined call's token %d after the other Client's %d: not behind it", l2.Token(), lo.Token())
	}
	if err := l2.Unlock(r.ctx); err != nil {
		t.Fatal(err)
	}
	testkit.NoKeysLeft(t, r.rdb, r.name)
	testkit.Idle(t, r.c, other)
}
