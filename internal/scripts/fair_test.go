package scripts

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/relock-go/relock/internal/layout"
)

// fairLock is one fair lock's keys, for calling the fair scripts.
type fairLock struct {
	name, queue, timeouts, channel, counter, token, alive string
	waiters                                               string // the prefix of the waiters' own channels
}

func newFairLock(name string) fairLock {
	return fairLock{
		name:     name,
		queue:    layout.Companion(layout.FairQueue, name),
		timeouts: layout.Companion(layout.FairTimeout, name),
		channel:  layout.Companion(layout.LockChannel, name),
		counter:  layout.Companion(layout.FencingCounter, name),
		token:    layout.Companion(layout.Token, name),
		alive:    layout.Companion(layout.FairAlive, name),
		waiters:  layout.WaiterChannels(layout.Companion(layout.LockChannel, name)),
	}
}

// keys returns the fair lock's KEYS: the four every fair script takes,
// then extra (the fencing counter, the guard, a marker).
func (f fairLock) keys(extra ...string) []string {
	return append([]string{f.name, f.queue, f.timeouts, f.alive}, extra...)
}

// kill makes relock waiters dead: their liveness deadlines pass.
func (f fairLock) kill(t *testing.T, owners ...string) {
	t.Helper()
	for i, o := range owners {
		if err := rdb.HSet(context.Background(), f.alive, o, i+1).Err(); err != nil {
			t.Fatal(err)
		}
	}
}

// lock runs fair_lock.lua for a one-shot owner with a 10s lease; waiter is
// the waiter timeout in ms (0: do not queue).
func (f fairLock) lock(t *testing.T, owner string, waiter int) int64 {
	t.Helper()
	return run(t, FairLock, f.keys(f.counter), 10000, owner, "0", 60000, waiter, f.waiters, "publish", counterOnly).(int64)
}

// waitOf reads fair_lock.lua's reply v when it did not acquire: how long
// to wait in ms, and whether others than relock are ahead or hold.
func waitOf(v int64) (ms int64, other bool) {
	w := -v - 1
	return w/2 - 1, w%2 == 1
}

func (f fairLock) unlock(t *testing.T, owner string, candidates ...any) any {
	t.Helper()
	args := append([]any{owner, f.waiters, "publish", "0", 60000, counterOnly, "0", "0", ""}, candidates...)
	return run(t, FairUnlock, f.keys(f.counter, f.channel), args...)
}

func (f fairLock) leave(t *testing.T, owner, mode string) int64 {
	t.Helper()
	return run(t, FairLeave, f.keys(f.channel), owner, f.waiters, "publish", mode).(int64)
}

func (f fairLock) queued(t *testing.T) string {
	t.Helper()
	q, err := rdb.LRange(context.Background(), f.queue, 0, -1).Result()
	if err != nil {
		t.Fatal(err)
	}
	z, err := rdb.ZRange(context.Background(), f.timeouts, 0, -1).Result()
	if err != nil {
		t.Fatal(err)
	}
	if len(q) != len(z) {
		t.Fatalf("queue %v and deadlines %v differ", q, z)
	}
	return strings.Join(q, " ")
}

// gone fails the test if the queue keys are left.
func (f fairLock) gone(t *testing.T) {
	t.Helper()
	if n := rdb.Exists(context.Background(), f.queue, f.timeouts).Val(); n != 0 {
		t.Fatalf("%d queue keys left", n)
	}
}

// listener hears the waiters' channels of a fair lock. Messages reach it in
// the order they were published, so a message it publishes itself after
// an operation marks the end of what that operation published.
type listener struct {
	f      fairLock
	ps     *redis.PubSub
	owners map[string]string // the owner of each waiter's channel
}

func (f fairLock) listen(t *testing.T, owners ...string) *listener {
	t.Helper()
	ctx := context.Background()
	l := &listener{f: f, owners: make(map[string]string)}
	var chans []string
	for _, o := range append([]string{"end"}, owners...) {
		ch := layout.WaiterChannel(f.channel, o)
		l.owners[ch] = o
		chans = append(chans, ch)
	}
	l.ps = rdb.Subscribe(ctx, chans...)
	t.Cleanup(func() { _ = l.ps.Close() })
	for range chans {
		if _, err := l.ps.Receive(ctx); err != nil {
			t.Fatal(err)
		}
	}
	return l
}

// heard returns the owners told since the last call, in order.
func (l *listener) heard(t *testing.T) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := rdb.Publish(ctx, layout.WaiterChannel(l.f.channel, "end"), "end").Err(); err != nil {
		t.Fatal(err)
	}
	var told []string
	for {
		msg, err := l.ps.ReceiveMessage(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if msg.Payload == "end" {
			return strings.Join(told, " ")
		}
		told = append(told, l.owners[msg.Channel])
	}
}

// message returns the payload of the next message, which must be to
// owner.
func (l *listener) message(t *testing.T, owner string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	msg, err := l.ps.ReceiveMessage(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if to := l.owners[msg.Channel]; to != owner {
		t.Fatalf("a message to %q, want to %q", to, owner)
	}
	return msg.Payload
}

func TestFairHeaders(t *testing.T) {
	fresh(t)
	for _, s := range []*Script{FairLock, FairUnlock, FairLeave, FairForceUnlock, FairTell} {
		header := s.Source()[:strings.Index(s.Source(), "\n\n")]
		for _, want := range []string{"-- " + s.Name() + ".lua:", "KEYS[", "ARGV[", "Returns"} {
			if !strings.Contains(header, want) {
				t.Errorf("%s.lua header lacks %q", s.Name(), want)
			}
		}
		fn := "local function purge(" // the queue functions the script calls
		if s == FairTell {
			fn = "local function wake("
		}
		if !strings.Contains(s.Source(), fn) {
			t.Errorf("%s lacks %q", s.Name(), fn)
		}
	}
}

func TestFairQueueOrder(t *testing.T) {
	fresh(t)
	ctx := context.Background()
	f := newFairLock("s:fair:order")
	hear := f.listen(t, "a", "b", "c")
	if v := f.lock(t, "a", 5000); v != 1 {
		t.Fatalf("first acquisition = %d, want token 1", v)
	}
	// b waits for the holder's TTL, c no longer than b's liveness (see
	// TestFairWaitForTheOneAhead).
	for _, w := range []struct {
		owner string
		ms    int64
	}{{"b", 10000}, {"c", 5000}} {
		v := f.lock(t, w.owner, 5000)
		if ttl, other := waitOf(v); v > 0 || ttl < w.ms-1000 || ttl > w.ms || other {
			t.Fatalf("%s = %d, want to wait about %dms, and no others", w.owner, v, w.ms)
		}
	}
	if q := f.queued(t); q != "b c" {
		t.Fatalf("queue %q, want \"b c\"", q)
	}
	// Liveness deadlines are the server's clock plus the waiter timeout;
	// scores follow Redisson's arithmetic: b has the lock's TTL plus 5
	// minutes, c 5 minutes more.
	tm := rdb.Time(ctx).Val().UnixMilli()
	alive, _, _ := strings.Cut(rdb.HGet(ctx, f.alive, "c").Val(), ":")
	if d, _ := strconv.ParseInt(alive, 10, 64); d-tm < 4000 || d-tm > 5000 {
		t.Fatalf("liveness deadline %dms from the server's now, want about 5000", d-tm)
	}
	for o, want := range map[string]int64{"b": 310000, "c": 610000} {
		if d := int64(rdb.ZScore(ctx, f.timeouts, o).Val()) - tm; d < want-1000 || d > want {
			t.Fatalf("%s's score %dms from now, want about %d", o, d, want)
		}
	}
	// The shared queue keys never get a TTL.
	for _, key := range []string{f.queue, f.timeouts} {
		if ttl := rdb.PTTL(ctx, key).Val(); ttl != -1 {
			t.Fatalf("%s TTL %v, want none", key, ttl)
		}
	}
	// relock's liveness hash outlives the last score by a waiter timeout
	// or more.
	if ttl := rdb.PTTL(ctx, f.alive).Val(); ttl < 614*time.Second || ttl > 626*time.Second {
		t.Fatalf("liveness TTL %v, want c's score plus 5s to 15s", ttl)
	}
	// Asking again keeps one's place.
	f.lock(t, "b", 5000)
	if q := f.queued(t); q != "b c" {
		t.Fatalf("queue %q after a repeated request, want \"b c\"", q)
	}
	if v := f.unlock(t, "a"); v != int64(2) {
		t.Fatalf("unlock = %v, want 2", v)
	}
	if h := hear.heard(t); h != "b" {
		t.Fatalf("told %q, want only the head b", h)
	}
	// The lock is free, but b is first: c waits until b's deadline.
	v := f.lock(t, "c", 5000)
	if wait, _ := waitOf(v); v > 0 || wait < 4000 || wait > 5000 {
		t.Fatalf("c while b is first = %d, want b's remaining deadline", v)
	}
	if v := f.lock(t, "x", 0); v > 0 {
		t.Fatal("a single attempt went past the queue")
	}
	if v := f.lock(t, "b", 5000); v != 2 {
		t.Fatalf("head b = %d, want token 2", v)
	}
	if q := f.queued(t); q != "c" {
		t.Fatalf("queue %q, want \"c\"", q)
	}
	f.unlock(t, "b")
	if h := hear.heard(t); h != "c" {
		t.Fatalf("told %q, want c", h)
	}
	if v := f.lock(t, "c", 5000); v != 3 {
		t.Fatalf("c = %d, want token 3", v)
	}
	f.gone(t)
	if v := f.unlock(t, "c"); v != int64(2) {
		t.Fatalf("unlock = %v", v)
	}
	if h := hear.heard(t); h != "" {
		t.Fatalf("told %q with nobody waiting", h)
	}
	if rdb.Exists(ctx, f.name).Val() != 0 {
		t.Fatal("lock left")
	}
}

func TestFairTryNeverQueues(t *testing.T) {
	fresh(t)
	f := newFairLock("s:fair:try")
	f.lock(t, "a", 0)
	if v := f.lock(t, "b", 0); v > 0 {
		t.Fatal("acquired a held lock")
	}
	f.gone(t)
	// A one-shot owner's repeated request is a retry: same token.
	if v := f.lock(t, "a", 0); v != 1 {
		t.Fatalf("repeated request = %d, want token 1", v)
	}
	f.unlock(t, "a")
	if v := f.lock(t, "b", 0); v != 2 {
		t.Fatalf("try on a free lock with an empty queue = %d", v)
	}
	f.unlock(t, "b")
}

func TestFairDeadWaitersPurged(t *testing.T) {
	fresh(t)
	ctx := context.Background()
	f := newFairLock("s:fair:dead")
	hear := f.listen(t, "b", "c", "d")
	f.lock(t, "a", 5000)
	for _, o := range []string{"b", "c", "d"} {
		f.lock(t, o, 5000)
	}
	// b and c die: their deadlines pass. A queue entry without a deadline
	// (a foreign leftover) must not break the scripts either.
	f.kill(t, "b", "c")
	rdb.LPush(ctx, f.queue, "ghost")
	f.unlock(t, "a")
	if h := hear.heard(t); h != "d" {
		t.Fatalf("told %q, want the first live waiter d", h)
	}
	if q := f.queued(t); q != "d" {
		t.Fatalf("queue %q, want \"d\"", q)
	}
	// d dies too while the lock is free: the next caller purges it.
	f.kill(t, "d")
	if v := f.lock(t, "e", 0); v <= 0 {
		t.Fatalf("try after every waiter died = %d", v)
	}
	f.gone(t)
	f.unlock(t, "e")
}

// TestFairDeadWaiterWhileIdle: a relock waiter that dies while the lock
// is held is skipped once its waiter timeout has passed, however long
// nobody called on the lock meanwhile: its liveness entry outlives its
// score in the shared zset, which is far in the future (Redisson's
// arithmetic) and would otherwise be its deadline.
func TestFairDeadWaiterWhileIdle(t *testing.T) {
	fresh(t)
	ctx := context.Background()
	f := newFairLock("s:fair:idle")
	f.lock(t, "a", 0)
	if v := f.lock(t, "b", 50); v > 0 {
		t.Fatalf("b = %d while a holds the lock", v)
	}
	// b's liveness lasts as long as its score does.
	now := rdb.Time(ctx).Val().UnixMilli()
	score := int64(rdb.ZScore(ctx, f.timeouts, "b").Val())
	if ttl := rdb.PTTL(ctx, f.alive).Val().Milliseconds(); now+ttl < score {
		t.Fatalf("liveness hash expires %dms from now, before b's score %dms from now", ttl, score-now)
	}
	// b dies: nobody calls for many times its 50ms waiter timeout.
	for rdb.Time(ctx).Val().UnixMilli() < now+500 {
		time.Sleep(20 * time.Millisecond)
	}
	f.unlock(t, "a")
	if q := f.queued(t); q != "" {
		t.Fatalf("queue %q after the release, want the dead b purged", q)
	}
	if v := f.lock(t, "c", 0); v <= 0 {
		t.Fatalf("try after the dead waiter's timeout = %d, want the lock", v)
	}
	f.gone(t)
	f.unlock(t, "c")
}

func TestFairPurgeWakesNewHead(t *testing.T) {
	fresh(t)
	f := newFairLock("s:fair:purgewake")
	hear := f.listen(t, "b", "c", "d")
	f.lock(t, "a", 5000)
	for _, o := range []string{"b", "c", "d"} {
		f.lock(t, o, 5000)
	}
	f.unlock(t, "a")
	if h := hear.heard(t); h != "b" {
		t.Fatalf("told %q", h)
	}
	// b dies before taking the lock; d's next request purges it and tells
	// the new head c.
	f.kill(t, "b")
	if v := f.lock(t, "d", 5000); v > 0 {
		t.Fatal("d went past c")
	}
	if h := hear.heard(t); h != "c" {
		t.Fatalf("told %q, want the new head c", h)
	}
	f.lock(t, "c", 5000)
	f.unlock(t, "c")
	f.lock(t, "d", 5000)
	f.unlock(t, "d")
	f.gone(t)
}

func TestFairLeave(t *testing.T) {
	fresh(t)
	ctx := context.Background()
	f := newFairLock("s:fair:leave")
	hear := f.listen(t, "b", "c", "d")
	f.lock(t, "a", 5000)
	for _, o := range []string{"b", "c", "d"} {
		f.lock(t, o, 5000)
	}
	if v := f.leave(t, "c", "0"); v != 1 {
		t.Fatalf("leave = %d", v)
	}
	if v := f.leave(t, "c", "0"); v != 0 {
		t.Fatalf("second leave = %d", v)
	}
	if q := f.queued(t); q != "b d" {
		t.Fatalf("queue %q, want \"b d\"", q)
	}
	if h := hear.heard(t); h != "" {
		t.Fatalf("a leave in the middle told %q", h)
	}
	f.unlock(t, "a")
	if h := hear.heard(t); h != "b" {
		t.Fatalf("told %q", h)
	}
	// The told head leaves: the next is told.
	f.leave(t, "b", "0")
	if h := hear.heard(t); h != "d" {
		t.Fatalf("told %q after the head left, want d", h)
	}
	f.leave(t, "d", "0")
	f.gone(t)

	// Undo a one-shot owner's hold whose reply was lost.
	f.lock(t, "e", 5000)
	f.lock(t, "b", 5000)
	if v := f.leave(t, "e", "1"); v != 1 {
		t.Fatalf("undo = %d", v)
	}
	if h := hear.heard(t); h != "b" {
		t.Fatalf("told %q after an undone hold, want b", h)
	}
	if rdb.Exists(ctx, f.name).Val() != 0 {
		t.Fatal("hold not undone")
	}
	f.leave(t, "b", "0")
	f.gone(t)

	// A reentrant owner's hold is undone only if the marker shows the lost
	// call was applied.
	marker := layout.Marker(layout.LockRequest, f.name, "r:1")
	if v := run(t, FairLock, f.keys(f.counter, marker), 10000, "r", "1", 60000, 5000, f.waiters, "publish", counterOnly); v.(int64) <= 0 {
		t.Fatal("reentrant lock failed")
	}
	if v := run(t, FairLeave, f.keys(f.channel, layout.Marker(layout.LockRequest, f.name, "r:2")), "r", f.waiters, "publish", "2"); v != int64(0) {
		t.Fatalf("undo of an unapplied call = %v", v)
	}
	if v := run(t, FairLeave, f.keys(f.channel, marker), "r", f.waiters, "publish", "2"); v != int64(1) {
		t.Fatalf("undo of an applied call = %v", v)
	}
	if rdb.Exists(ctx, f.name).Val() != 0 {
		t.Fatal("reentrant hold not undone")
	}
}

// TestFairGrant: a release grants the lock to a relock head of another
// client that takes grants, for at most the grant time, and tells it on its
// channel with its token, the grant's time and how long its entry had
// left; a head that takes no grants is told the lock is free.
func TestFairGrant(t *testing.T) {
	fresh(t)
	ctx := context.Background()
	f := newFairLock("s:fair:grant")
	hear := f.listen(t, "b", "c")
	f.lock(t, "a", 5000)
	grantable := func(owner string, lease int) {
		t.Helper()
		if v := run(t, FairLock, f.keys(f.counter), 10000, owner, "0", 60000, 5000, f.waiters, "publish", counterOnly, lease).(int64); v > 0 {
			t.Fatalf("%s acquired a held lock", owner)
		}
	}
	grantable("b", 30000)
	// A refresh keeps when b's entry was made.
	made := func() string {
		v := rdb.HGet(ctx, f.alive, "b").Val()
		return v[strings.LastIndex(v, ":")+1:]
	}
	before := made()
	ms, _ := strconv.ParseInt(before, 10, 64)
	for rdb.Time(ctx).Val().UnixMilli() <= ms { // the refresh comes a millisecond later at least
	}
	grantable("b", 30000)
	if after := made(); after != before {
		t.Fatalf("b's entry was made at %s, and at %s after a refresh", before, after)
	}
	f.lock(t, "c", 5000) // takes no grants
	args := []any{"a", f.waiters, "publish", "0", 60000, counterOnly, 2000}
	if v := run(t, FairUnlock, f.keys(f.counter, f.channel), args...); v != int64(3) {
		t.Fatalf("release to a head that takes grants = %v, want 3", v)
	}
	if got := rdb.HGet(ctx, f.name, "b").Val(); got != "1" {
		t.Fatalf("b holds %q", got)
	}
	if ttl := rdb.PTTL(ctx, f.name).Val(); ttl > 2*time.Second || ttl < time.Second {
		t.Fatalf("a grant's TTL %v, want at most 2s", ttl)
	}
	if q := f.queued(t); q != "c" {
		t.Fatalf("queue %q after the grant, want \"c\"", q)
	}
	msg := hear.message(t, "b")
	f2 := strings.Split(msg, ":")
	if len(f2) != 4 || f2[0] != "g" || f2[2] != "2000" {
		t.Fatalf("b heard %q, want g:<token>:2000:<age>", msg)
	}
	if age, err := strconv.Atoi(f2[3]); err != nil || age < 0 || age > 1000 {
		t.Fatalf("b's entry was made %q ms before the grant, want under a second", f2[3])
	}
	// The head that takes no grants is told the lock is free.
	args[0] = "b"
	if v := run(t, FairUnlock, f.keys(f.counter, f.channel), args...); v != int64(2) {
		t.Fatalf("release to a head that takes no grants = %v, want 2", v)
	}
	if h := hear.heard(t); h != "c" {
		t.Fatalf("told %q, want c", h)
	}
}

// TestFairGrantWithinLiveness: a grant to a relock head of another client
// ends by the head's liveness deadline, so that a head that died waiting
// holds up the queue no longer than its waiter timeout, grant or not.
func TestFairGrantWithinLiveness(t *testing.T) {
	fresh(t)
	ctx := context.Background()
	f := newFairLock("s:fair:grantalive")
	hear := f.listen(t, "b")
	f.lock(t, "a", 0)
	// b takes grants for its 30s lease, with a 300ms waiter timeout.
	if v := run(t, FairLock, f.keys(f.counter), 10000, "b", "0", 60000, 300, f.waiters, "publish", counterOnly, 30000).(int64); v > 0 {
		t.Fatalf("b = %d while a holds the lock", v)
	}
	args := []any{"a", f.waiters, "publish", "0", 60000, counterOnly, 2000}
	if v := run(t, FairUnlock, f.keys(f.counter, f.channel), args...); v != int64(3) {
		t.Fatalf("release to a head that takes grants = %v, want 3", v)
	}
	if ttl := rdb.PTTL(ctx, f.name).Val(); ttl <= 0 || ttl > 300*time.Millisecond {
		t.Fatalf("the grant's TTL %v, want b's liveness left, under 300ms", ttl)
	}
	f2 := strings.Split(hear.message(t, "b"), ":")
	if ms, err := strconv.Atoi(f2[2]); len(f2) != 4 || err != nil || ms <= 0 || ms > 300 {
		t.Fatalf("b heard a grant for %q ms, want its liveness left, under 300", f2[2])
	}
}

// TestFairWaitForTheOneAhead: a waiter sleeps no longer than until the
// liveness deadline of the relock waiter directly ahead of it, whatever
// its own waiter timeout: if that one died, the waiter behind is the one
// to move on then. A waiter behind a Redisson waiter, or a relock waiter
// already dead, sleeps for the holder's TTL.
func TestFairWaitForTheOneAhead(t *testing.T) {
	fresh(t)
	ctx := context.Background()
	f := newFairLock("s:fair:ahead")
	f.lock(t, "a", 0)
	f.lock(t, "b", 300)
	// c's first attempt and a refresh alike.
	for range 2 {
		v := f.lock(t, "c", 30000)
		if ms, _ := waitOf(v); v > 0 || ms <= 0 || ms > 300 {
			t.Fatalf("c behind b = %d, want to wait b's liveness left, under 300ms", v)
		}
	}
	rdb.ZAdd(ctx, f.timeouts, redis.Z{Score: float64(time.Now().Add(time.Hour).UnixMilli()), Member: "java:1"})
	rdb.RPush(ctx, f.queue, "java:1")
	if ms, _ := waitOf(f.lock(t, "d", 30000)); ms < 9000 || ms > 10000 {
		t.Fatalf("d behind a Redisson waiter waits %dms, want the holder's TTL", ms)
	}
	f.kill(t, "b")
	if ms, _ := waitOf(f.lock(t, "c", 30000)); ms < 9000 || ms > 10000 {
		t.Fatalf("c behind a dead b waits %dms, want the holder's TTL", ms)
	}
}

func TestFairHandoff(t *testing.T) {
	fresh(t)
	ctx := context.Background()
	f := newFairLock("s:fair:handoff")
	hear := f.listen(t, "b", "c")
	f.lock(t, "a", 5000)
	f.lock(t, "b", 5000)
	f.lock(t, "c", 5000)
	// c is a candidate but not the head: b is told, nobody is handed.
	if v := f.unlock(t, "a", "c", 7000); v != int64(2) {
		t.Fatalf("unlock = %v, want 2", v)
	}
	if h := hear.heard(t); h != "b" {
		t.Fatalf("told %q", h)
	}
	f.lock(t, "b", 5000)
	// b releases to the candidate c, the head: handed, nobody told.
	v := f.unlock(t, "b", "x", 1000, "c", 7000)
	if fmt.Sprint(v) != "[3 2 [] 0]" {
		t.Fatalf("unlock = %v, want [3 2 [] 0] (token 3, candidate 2, no one to pass it to)", v)
	}
	if h := hear.heard(t); h != "" {
		t.Fatalf("a handoff told %q", h)
	}
	if n := rdb.HGet(ctx, f.name, "c").Val(); n != "1" {
		t.Fatalf("c holds %q", n)
	}
	if ttl := rdb.PTTL(ctx, f.name).Val(); ttl < 6*time.Second || ttl > 7*time.Second {
		t.Fatalf("handed lease %v, want the candidate's 7s", ttl)
	}
	f.gone(t)
	// c finds it holds the lock: its own request is answered with its token.
	if v := f.lock(t, "c", 5000); v != 3 {
		t.Fatalf("c = %d, want its token 3", v)
	}
	f.unlock(t, "c")
}

func TestFairReentrant(t *testing.T) {
	fresh(t)
	ctx := context.Background()
	f := newFairLock("s:fair:reentrant")
	lock := func(req string) int64 {
		return run(t, FairLock, f.keys(f.counter, layout.Marker(layout.LockRequest, f.name, req)), 10000, "r", "1", 60000, 5000, f.waiters, "publish", counterOnly).(int64)
	}
	unlock := func(req string) any {
		return run(t, FairUnlock, f.keys(f.counter, f.channel, layout.Marker(layout.UnlockLatch, f.name, req)), "r", f.waiters, "publish", "1", 60000, counterOnly, "0")
	}
	a := lock("1")
	f.lock(t, "b", 5000)
	// Re-entry does not queue behind b.
	if v := lock("2"); v != a {
		t.Fatalf("re-entry = %d, want %d", v, a)
	}
	lock("2") // a retry
	if n := rdb.HGet(ctx, f.name, "r").Val(); n != "2" {
		t.Fatalf("count %q, want 2", n)
	}
	if v := unlock("x"); v != int64(1) {
		t.Fatalf("unlock = %v", v)
	}
	if v := unlock("x"); v != int64(1) {
		t.Fatalf("retried unlock = %v, want the first answer", v)
	}
	if v := unlock("y"); v != int64(2) {
		t.Fatalf("last unlock = %v", v)
	}
	f.leave(t, "b", "0")
	f.gone(t)
}

func TestFairForceUnlock(t *testing.T) {
	fresh(t)
	ctx := context.Background()
	f := newFairLock("s:fair:force")
	hear := f.listen(t, owner(2))
	rdb.Set(ctx, f.name, "x", 0)
	if err := FairForceUnlock.Run(ctx, rdb, Keys(f.keys(f.channel)...), f.waiters, "publish").Err(); err == nil || !strings.Contains(err.Error(), "WRONGTYPE") {
		t.Fatalf("force unlock of a string: %v", err)
	}
	if err := FairLock.Run(ctx, rdb, Keys(f.keys(f.counter)...), 10000, "a", "0", 60000, 5000, f.waiters, "publish", counterOnly).Err(); err == nil || !strings.Contains(err.Error(), "WRONGTYPE") {
		t.Fatalf("lock of a string: %v", err)
	}
	rdb.Del(ctx, f.name)
	f.lock(t, owner(1), 5000)
	f.lock(t, owner(2), 5000)
	if v := run(t, FairForceUnlock, f.keys(f.channel), f.waiters, "publish"); v != int64(1) {
		t.Fatalf("force unlock = %v", v)
	}
	if h := hear.heard(t); h != owner(2) {
		t.Fatalf("told %q", h)
	}
	if v := run(t, FairForceUnlock, f.keys(f.channel), f.waiters, "publish"); v != int64(0) {
		t.Fatalf("force unlock of a free lock = %v", v)
	}
	f.leave(t, owner(2), "0")
	f.gone(t)
}

// TestFairRedissonScores: scores in the shared timeout set follow
// Redisson's arithmetic. A grant lowers every remaining score by 5
// minutes, a waiter that leaves lowers the scores behind it by 5 minutes,
// and a relock waiter keeps at least 5 minutes per waiter ahead of it
// plus its waiter timeout.
func TestFairRedissonScores(t *testing.T) {
	fresh(t)
	ctx := context.Background()
	f := newFairLock("s:fair:scores")
	score := func(o string) int64 {
		t.Helper()
		return int64(rdb.ZScore(ctx, f.timeouts, o).Val()) - rdb.Time(ctx).Val().UnixMilli()
	}
	f.lock(t, "a", 5000)
	for _, o := range []string{"b", "c", "d"} {
		f.lock(t, o, 5000)
	}
	// A Redisson waiter joins behind d: d's score plus its wait time.
	javaScore := rdb.ZScore(ctx, f.timeouts, "d").Val() + 300000
	rdb.ZAdd(ctx, f.timeouts, redis.Z{Score: javaScore, Member: "java"})
	rdb.RPush(ctx, f.queue, "java")
	if v := f.leave(t, "c", "0"); v != 1 {
		t.Fatalf("leave = %d", v)
	}
	if d := score("b"); d < 309000 || d > 310000 {
		t.Fatalf("b, ahead of the one who left, moved: %d", d)
	}
	if got := rdb.ZScore(ctx, f.timeouts, "java").Val(); got != javaScore-300000 {
		t.Fatalf("java's score %v after c left, want %v", got, javaScore-300000)
	}
	f.unlock(t, "a")
	if v := f.lock(t, "b", 5000); v <= 0 {
		t.Fatalf("b = %d, want the lock", v)
	}
	if got := rdb.ZScore(ctx, f.timeouts, "java").Val(); got != javaScore-600000 {
		t.Fatalf("java's score %v after b's grant, want %v", got, javaScore-600000)
	}
	// d refreshes: first now, it keeps at least its waiter timeout.
	f.lock(t, "d", 5000)
	if d := score("d"); d < 4000 {
		t.Fatalf("d's score %dms from now after its refresh", d)
	}
	f.leave(t, "java", "0")
	f.leave(t, "d", "0")
	f.unlock(t, "b")
	f.gone(t)
	if rdb.Exists(ctx, f.alive).Val() != 0 {
		t.Fatal("liveness hash left")
	}
}

// TestFairTell: the head of the queue, and only it, is told to check
// again; an empty queue tells nobody.
func TestFairTell(t *testing.T) {
	fresh(t)
	f := newFairLock("s:fair:tell")
	hear := f.listen(t, "b", "c")
	f.lock(t, "a", 0)
	f.lock(t, "b", 5000)
	f.lock(t, "c", 5000)
	if v := run(t, FairTell, f.keys(), f.waiters, "publish"); v != int64(1) {
		t.Fatalf("tell = %v", v)
	}
	if h := hear.heard(t); h != "b" {
		t.Fatalf("told %q, want the head b", h)
	}
	f.leave(t, "b", "0")
	f.leave(t, "c", "0")
	if v := run(t, FairTell, f.keys(), f.waiters, "publish"); v != int64(0) {
		t.Fatalf("tell over an empty queue = %v", v)
	}
	if h := hear.heard(t); h != "" {
		t.Fatalf("told %q over an empty queue", h)
	}
	f.unlock(t, "a")
	f.gone(t)
}

// TestFairPass: a release to a waiter of the releasing client names the
// queue's next heads that are that client's too, reserving a token for
// each, for passing the lock on in process; fair_pass.lua then makes one
// of them the holder with its reserved token and names the heads after
// it, tells an older switch that comes later it was overtaken, and takes
// no lock the client does not hold.
func TestFairPass(t *testing.T) {
	fresh(t)
	ctx := context.Background()
	f := newFairLock("s:fair:pass")
	f.lock(t, "u:1", 5000)
	for _, o := range []string{"u:2", "u:3", "u:4", "u:5", "v:1", "u:6"} {
		f.lock(t, o, 5000)
	}
	args := []any{"u:1", f.waiters, "publish", "0", 60000, counterOnly, "0", "8", "", "u:2", 7000}
	v := run(t, FairUnlock, f.keys(f.counter, f.channel), args...).([]any)
	t2 := v[0].(int64)
	if fmt.Sprint(v[1:]) != fmt.Sprintf("[1 [u:3 u:4 u:5] %d]", t2+1) {
		t.Fatalf("release to u:2 = %v, want u:3 to u:5 named, tokens from %d", v, t2+1)
	}
	if c := rdb.Get(ctx, f.counter).Val(); c != strconv.FormatInt(t2+3, 10) {
		t.Fatalf("counter %s after reserving 3 past %d", c, t2)
	}
	since := ""
	pass := func(owner string, token int64) string {
		t.Helper()
		return fmt.Sprint(run(t, FairPass, f.keys(f.counter, f.channel), owner, 7000, token, 8, since, counterOnly))
	}
	// u:2 passes to u:3 and u:3 to u:4; u:4's switch comes first, while
	// u:3 is still queued (the client knows it passed it the lock). It
	// records the client's clock as the hold's start.
	since = "1700000000000"
	if v := pass("u:4", t2+2); v != fmt.Sprintf("[1 [u:3 u:5] %d]", t2+4) {
		t.Fatalf("pass to u:4 = %v", v)
	}
	if got := rdb.HGet(ctx, f.name, layout.SinceField).Val(); got != since {
		t.Fatalf("relock_since %q after a pass at the client's clock %s", got, since)
	}
	since = ""
	if v := pass("u:3", t2+1); v != fmt.Sprintf("[2 %d]", t2+2) {
		t.Fatalf("overtaken pass to u:3 = %v, want [2 %d]", v, t2+2)
	}
	if q := f.queued(t); !strings.HasPrefix(q, "u:5 v:1") {
		t.Fatalf("queue %q after the passes", q)
	}
	if got := rdb.HGetAll(ctx, f.name).Val(); got["u:4"] != "1" || got[layout.TokenField] != strconv.FormatInt(t2+2, 10) || len(got) != 3 {
		t.Fatalf("hash after the passes: %v", got)
	}
	if ttl := rdb.PTTL(ctx, f.name).Val(); ttl < 6*time.Second {
		t.Fatalf("TTL %v after a pass, want the grantee's lease", ttl)
	}
	// A retry of the same switch changes nothing; one that asks for no
	// heads is told none and reserves no token.
	if v := pass("u:4", t2+2); !strings.HasPrefix(v, "[1 ") {
		t.Fatalf("a retried pass = %v", v)
	}
	counter := rdb.Get(ctx, f.counter).Val()
	if v := fmt.Sprint(run(t, FairPass, f.keys(f.counter, f.channel), "u:4", 7000, t2+2, 0, "", counterOnly)); v != "[1 [] 0]" {
		t.Fatalf("a pass asking for no heads = %v, want [1 [] 0]", v)
	}
	if c := rdb.Get(ctx, f.counter).Val(); c != counter {
		t.Fatalf("counter %s after a pass asking for no heads, was %s", c, counter)
	}
	// u:5 is passed it; the next head is another client's: nothing named.
	if v := pass("u:5", t2+3); v != "[1 [] 0]" {
		t.Fatalf("pass to u:5 = %v, want [1 [] 0]", v)
	}
	if q := f.queued(t); !strings.HasPrefix(q, "v:1 u:6") {
		t.Fatalf("queue %q, want v:1 first", q)
	}
	// The hold deleted: a pass takes nothing.
	rdb.Del(ctx, f.name)
	if v := pass("u:6", t2+20); v != "[0]" {
		t.Fatalf("pass over a deleted hold = %v, want [0]", v)
	}
	if rdb.Exists(ctx, f.name).Val() != 0 {
		t.Fatal("a pass took a free lock")
	}
	rdb.Del(ctx, f.name, f.queue, f.timeouts, f.alive, f.counter, f.token)
}

// TestFairGrantLowersEveryScore: a grant lowers the score of every waiter
// left in the queue by Redisson's wait time, however long the queue (the
// scores go in ZADDs of at most 200 waiters).
func TestFairGrantLowersEveryScore(t *testing.T) {
	fresh(t)
	ctx := context.Background()
	f := newFairLock("s:fair:lower")
	f.lock(t, "u:0", 5000)
	const n = 450
	for i := 1; i <= n; i++ {
		f.lock(t, "u:"+strconv.Itoa(i), 5000)
	}
	before := rdb.ZRangeWithScores(ctx, f.timeouts, 0, -1).Val()
	if len(before) != n {
		t.Fatalf("%d scores for %d waiters", len(before), n)
	}
	v := f.unlock(t, "u:0", "u:1", 7000)
	if r, ok := v.([]any); !ok || r[1] != int64(1) {
		t.Fatalf("release to u:1 = %v", v)
	}
	after := make(map[string]float64)
	for _, z := range rdb.ZRangeWithScores(ctx, f.timeouts, 0, -1).Val() {
		after[z.Member.(string)] = z.Score
	}
	if len(after) != n-1 {
		t.Fatalf("%d scores left, want %d", len(after), n-1)
	}
	for _, z := range before {
		m := z.Member.(string)
		if m == "u:1" {
			continue
		}
		if got, want := after[m], z.Score-300000; got != want {
			t.Fatalf("%s: score %v after the grant, want %v", m, got, want)
		}
	}
	rdb.Del(ctx, f.name, f.queue, f.timeouts, f.alive, f.counter, f.token)
}

// TestFairTellsOnGrantChannels: with the grant channels' prefix, a relock
// waiter is told on its client's grant channel, with its owner in the
// message ("fg:" a grant, "fn:" check now); a waiter without a liveness
// entry (Redisson's) on its own channel, as before. An attempt reports
// whether anyone but relock's waiters holds the lock or is ahead.
func TestFairTellsOnGrantChannels(t *testing.T) {
	fresh(t)
	ctx := context.Background()
	f := newFairLock("s:fair:grantchan")
	prefix := grantPrefix
	own := f.listen(t, "u:1", "u:2", "v:1", "java:9")
	grants := rdb.Subscribe(ctx, prefix+"u", prefix+"v")
	t.Cleanup(func() { _ = grants.Close() })
	for range 2 {
		if _, err := grants.Receive(ctx); err != nil {
			t.Fatal(err)
		}
	}
	next := func(want string) {
		t.Helper()
		ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		msg, err := grants.ReceiveMessage(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if got := msg.Channel + " " + msg.Payload; !strings.HasPrefix(got, want) {
			t.Fatalf("heard %q, want %q...", got, want)
		}
	}
	lock := func(owner, grants string) int64 {
		t.Helper()
		return run(t, FairLock, f.keys(f.counter), 10000, owner, "0", 60000, 5000, f.waiters, "publish", counterOnly, grants, "1700000000000", prefix).(int64)
	}
	unlock := func(owner string) any {
		t.Helper()
		return run(t, FairUnlock, f.keys(f.counter, f.channel), owner, f.waiters, "publish", "0", 60000, counterOnly, 2000, "0", prefix)
	}
	if v := lock("u:1", "0"); v <= 0 {
		t.Fatalf("u:1 = %d, want the lock", v)
	}
	// v:1 takes grants, u:2 does not; all of relock: no others.
	for _, o := range []string{"v:1", "u:2"} {
		grants := "0"
		if o == "v:1" {
			grants = "30000"
		}
		if v := lock(o, grants); v > 0 {
			t.Fatalf("%s = %d, want to wait", o, v)
		} else if _, other := waitOf(v); other {
			t.Fatalf("%s: others reported with only relock's waiters", o)
		}
	}
	// A Redisson waiter joins behind u:2; it is ahead of nobody.
	rdb.ZAdd(ctx, f.timeouts, redis.Z{Score: rdb.ZScore(ctx, f.timeouts, "u:2").Val() + 300000, Member: "java:9"})
	rdb.RPush(ctx, f.queue, "java:9")
	if v := lock("u:2", "0"); v > 0 {
		t.Fatalf("u:2 = %d, want to wait", v)
	} else if _, other := waitOf(v); other {
		t.Fatal("u:2: others reported for a Redisson waiter behind it")
	}
	// The grant to v:1 goes to client v's grant channel.
	if v := unlock("u:1"); v != int64(3) {
		t.Fatalf("release = %v, want a grant (3)", v)
	}
	next(prefix + "v fg:")
	// u:2, next, takes no grants: it is told to check now on u's channel.
	if v := unlock("v:1"); v != int64(2) {
		t.Fatalf("release = %v, want 2", v)
	}
	next(prefix + "u fn:u:2")
	if v := lock("u:2", "0"); v <= 0 {
		t.Fatalf("u:2 = %d, want the lock", v)
	}
	// The Redisson waiter is told on its own channel.
	if v := unlock("u:2"); v != int64(2) {
		t.Fatalf("release = %v, want 2", v)
	}
	if got := own.heard(t); got != "java:9" {
		t.Fatalf("own channels told %q, want java:9", got)
	}
	// Now a Redisson client holds the lock, and relock waiters behind
	// a Redisson waiter: both are others.
	rdb.Del(ctx, f.queue, f.timeouts)
	rdb.HSet(ctx, f.name, "java:9", 1)
	rdb.PExpire(ctx, f.name, 10*time.Second)
	if v := lock("u:3", "0"); v > 0 {
		t.Fatalf("u:3 = %d, want to wait", v)
	} else if _, other := waitOf(v); !other {
		t.Fatal("u:3: a Redisson holder not reported")
	}
	rdb.Del(ctx, f.name)
	rdb.HSet(ctx, f.name, "u:9", 1, layout.TokenField, 5)
	rdb.PExpire(ctx, f.name, 10*time.Second)
	rdb.RPush(ctx, f.queue, "java:8")
	rdb.ZAdd(ctx, f.timeouts, redis.Z{Score: float64(time.Now().Add(time.Hour).UnixMilli()), Member: "java:8"})
	if v := lock("u:4", "0"); v > 0 {
		t.Fatalf("u:4 = %d, want to wait", v)
	} else if _, other := waitOf(v); !other {
		t.Fatal("u:4: a Redisson waiter ahead not reported")
	}
	// u:3, queued before the Redisson waiter, has only a relock holder
	// ahead of it.
	if v := lock("u:3", "0"); v > 0 {
		t.Fatalf("u:3 = %d, want to wait", v)
	} else if _, other := waitOf(v); other {
		t.Fatal("u:3: others reported where a relock client holds and nobody is ahead")
	}
	rdb.Del(ctx, f.name, f.queue, f.timeouts, f.alive)
}

// TestFairPassDeadHead: a release that hands the lock to its client's
// waiter names no heads to pass it on to when the next head is a dead
// relock waiter; the dead head is left for the next release, which purges
// it.
func TestFairPassDeadHead(t *testing.T) {
	fresh(t)
	f := newFairLock("s:fair:passdead")
	f.lock(t, "u:1", 5000)
	for _, o := range []string{"u:2", "u:3", "u:4"} {
		f.lock(t, o, 5000)
	}
	f.kill(t, "u:3")
	args := []any{"u:1", f.waiters, "publish", "0", 60000, counterOnly, "0", "8", "", "u:2", 7000}
	v := run(t, FairUnlock, f.keys(f.counter, f.channel), args...).([]any)
	if fmt.Sprint(v[1:]) != "[1 [] 0]" {
		t.Fatalf("release to u:2 = %v, want nothing named behind a dead head", v)
	}
	if q := f.queued(t); !strings.HasPrefix(q, "u:3 u:4") {
		t.Fatalf("queue %q, want the dead u:3 still first", q)
	}
	args = []any{"u:2", f.waiters, "publish", "0", 60000, counterOnly, "0", "8", "", "u:4", 7000}
	v = run(t, FairUnlock, f.keys(f.counter, f.channel), args...).([]any)
	if fmt.Sprint(v[1:]) != "[1 [] 0]" || rdb.HGet(context.Background(), f.name, "u:4").Val() != "1" {
		t.Fatalf("release to u:4 = %v: the dead u:3 was not purged", v)
	}
	f.unlock(t, "u:4")
	f.gone(t)
}

// TestFairNewOwnerJoins: a first attempt that says its owner cannot be
// queued yet joins at the tail without searching the queue for it, and a
// later attempt without the flag keeps the owner's place.
func TestFairNewOwnerJoins(t *testing.T) {
	fresh(t)
	ctx := context.Background()
	f := newFairLock("s:fair:new")
	attempt := func(owner, isNew string) int64 {
		t.Helper()
		return run(t, FairLock, f.keys(f.counter), 10000, owner, "0", 60000, 5000, f.waiters, "publish", counterOnly, "0", "", "", isNew).(int64)
	}
	searches := func() int64 {
		t.Helper()
		info := rdb.Info(ctx, "commandstats").Val()
		_, rest, ok := strings.Cut(info, "cmdstat_lpos:calls=")
		if !ok {
			return 0
		}
		n, _ := strconv.ParseInt(rest[:strings.IndexByte(rest, ',')], 10, 64)
		return n
	}
	if v := attempt("a", "1"); v <= 0 {
		t.Fatalf("first acquisition = %d, want a token", v)
	}
	before := searches()
	for _, o := range []string{"b", "c"} {
		if v := attempt(o, "1"); v > 0 {
			t.Fatalf("%s = %d while a holds it", o, v)
		}
	}
	if n := searches() - before; n != 0 {
		t.Fatalf("new owners' attempts searched the queue %d times, want 0", n)
	}
	if q := f.queued(t); q != "b c" {
		t.Fatalf("queue %q, want \"b c\"", q)
	}
	before = searches()
	attempt("b", "0")
	if n := searches() - before; n != 1 {
		t.Fatalf("a repeated attempt searched the queue %d times, want 1", n)
	}
	if q := f.queued(t); q != "b c" {
		t.Fatalf("queue %q after a repeated attempt, want \"b c\"", q)
	}
	for _, o := range []string{"b", "c"} {
		f.leave(t, o, "0")
	}
	f.unlock(t, "a")
	f.gone(t)
}

// TestFairClearMark: a relock waiter with only relock's waiters ahead of
// it is marked so in its liveness entry, and a new waiter behind a marked
// one learns it has no others ahead without a look at the queue, however
// long the queue; behind a Redisson waiter it is not marked, and once the
// Redisson waiter has gone, the next to join behind it looks and is.
func TestFairClearMark(t *testing.T) {
	fresh(t)
	ctx := context.Background()
	f := newFairLock("s:fair:clear")
	attempt := func(owner string) (other bool) {
		t.Helper()
		isNew := "1"
		if rdb.HExists(ctx, f.alive, owner).Val() {
			isNew = "0"
		}
		v := run(t, FairLock, f.keys(f.counter), 10000, owner, "0", 60000, 5000, f.waiters, "publish", counterOnly, "0", "", "", isNew).(int64)
		if v > 0 {
			t.Fatalf("%s = %d while the lock is held", owner, v)
		}
		_, other = waitOf(v)
		return other
	}
	marked := func(owner string) bool {
		return strings.HasSuffix(rdb.HGet(ctx, f.alive, owner).Val(), ":r")
	}
	looks := func() int64 {
		t.Helper()
		_, rest, ok := strings.Cut(rdb.Info(ctx, "commandstats").Val(), "cmdstat_lrange:calls=")
		if !ok {
			return 0
		}
		n, _ := strconv.ParseInt(rest[:strings.IndexByte(rest, ',')], 10, 64)
		return n
	}
	if v := f.lock(t, "h:1", 0); v <= 0 {
		t.Fatalf("first acquisition = %d", v)
	}
	before := looks()
	for i := range 20 {
		o := "w:" + strconv.Itoa(i)
		if attempt(o) || !marked(o) {
			t.Fatalf("%s behind %d relock waiters: others reported, or not marked", o, i)
		}
	}
	if n := looks() - before; n != 0 {
		t.Fatalf("new waiters behind marked ones read the queue %d times, want 0", n)
	}
	rdb.Del(ctx, f.name, f.queue, f.timeouts, f.alive)
	// Behind two relock waiters, a Redisson waiter joins: the next relock
	// waiter behind it has others ahead.
	if v := f.lock(t, "h:1", 0); v <= 0 {
		t.Fatalf("second acquisition = %d", v)
	}
	for _, o := range []string{"w:1", "w:2"} {
		if attempt(o) {
			t.Fatalf("%s: others reported", o)
		}
	}
	rdb.ZAdd(ctx, f.timeouts, redis.Z{Score: float64(time.Now().Add(time.Hour).UnixMilli()), Member: "java:1"})
	rdb.RPush(ctx, f.queue, "java:1")
	if !attempt("x:1") || marked("x:1") {
		t.Fatal("x:1 behind a Redisson waiter: no others reported, or marked")
	}
	// A marked waiter's refresh keeps its mark and reports no others.
	if attempt("w:2") || !marked("w:2") {
		t.Fatal("w:2's refresh reported others, or lost its mark")
	}
	// The Redisson waiter gives up (Redisson's script takes it out of both
	// keys): the next relock waiter looks, finds only relock's and is
	// marked.
	rdb.LRem(ctx, f.queue, 0, "java:1")
	rdb.ZRem(ctx, f.timeouts, "java:1")
	if attempt("y:1") {
		t.Fatal("y:1: others reported after the Redisson waiter left")
	}
	if !marked("y:1") {
		t.Fatal("y:1 not marked with only relock's waiters ahead")
	}
	rdb.Del(ctx, f.name, f.queue, f.timeouts, f.alive)
}

// TestFairPurgeEmptiesLiveness: a caller that joins behind a live waiter
// of another client (no liveness entry) after purging the only relock
// waiter, dead, whose entry was all the liveness hash held, leaves the
// hash it writes anew with a TTL: the purge deleted the hash, and the
// lifetime read before it is gone with it.
func TestFairPurgeEmptiesLiveness(t *testing.T) {
	fresh(t)
	ctx := context.Background()
	f := newFairLock("s:fair:emptied")
	f.lock(t, "a", 0)
	if v := f.lock(t, "b", 5000); v > 0 {
		t.Fatalf("b = %d while a holds the lock", v)
	}
	// A Redisson waiter behind b, alive by its score; a frees the lock
	// without a release (it expired), and b dies.
	now := rdb.Time(ctx).Val().UnixMilli()
	rdb.RPush(ctx, f.queue, "r")
	rdb.ZAdd(ctx, f.timeouts, redis.Z{Score: float64(now + 1000), Member: "r"})
	rdb.Del(ctx, f.name)
	f.kill(t, "b")
	if v := f.lock(t, "c", 5000); v > 0 {
		t.Fatalf("c = %d while r is first", v)
	}
	if q := f.queued(t); q != "r c" {
		t.Fatalf("queue %q, want \"r c\"", q)
	}
	if d := pttl(t, f.alive); d <= 0 {
		t.Fatalf("liveness hash TTL %v, want one", d)
	}
}
