package scripts

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/relock-go/relock/internal/layout"
)

func TestSyncHeaders(t *testing.T) {
	fresh(t)
	for _, s := range SynchronizerScripts {
		header := s.Source()[:strings.Index(s.Source(), "\n\n")]
		for _, want := range []string{"-- " + s.Name() + ".lua:", "KEYS[", "ARGV[", "Returns"} {
			if !strings.Contains(header, want) {
				t.Errorf("%s.lua header lacks %q", s.Name(), want)
			}
		}
	}
}

// TestSemaphoreHandOut: a Release may hand k of its n permits to its
// client's own waiting calls when the client is the only subscriber of
// the channel: only n-k are added and published, the reply is twice the
// count plus 1, and a retried request answers the same. With another
// subscriber, or when handing would leave fewer than none available, all
// n are added and the reply is even.
func TestSemaphoreHandOut(t *testing.T) {
	fresh(t)
	ctx := context.Background()
	name, ch := "s:semhand", layout.Companion(layout.SemaphoreChannel, "s:semhand")
	marker := func(id string) string { return layout.Marker(layout.SemaphoreRequest, "s:semhand", id) }
	release := func(id string, n, k int) int64 {
		t.Helper()
		return run(t, SemRelease, []string{name, marker(id)}, n, "publish", 60000, ch, k, "numsub").(int64)
	}
	count := func() string { return rdb.Get(ctx, name).Val() }
	client := listening(t, ch) // the releasing client's own subscription

	// All handed: nothing added, nothing published, no key made.
	if v := release("all", 2, 2); v != 1 {
		t.Fatalf("release of 2 handing 2 = %d, want 2*0+1", v)
	}
	if n := rdb.Exists(ctx, name).Val(); n != 0 {
		t.Fatalf("the count %q was written with every permit handed", count())
	}
	if v := release("all", 2, 2); v != 1 {
		t.Fatalf("retried release = %d, want the first answer 1", v)
	}
	// Some handed: the rest added and published.
	if v := release("some", 3, 1); v != 2*2+1 || count() != "2" {
		t.Fatalf("release of 3 handing 1 = %d, count %s; want 2*2+1, 2", v, count())
	}
	if p := heard(t, client); p != "2" {
		t.Fatalf("channel heard %q, want 2", p)
	}
	// A semaphore shrunk below none while its permits were out: nothing
	// is handed that would leave fewer than none available.
	rdb.Set(ctx, name, -2, 0)
	if v := release("short", 1, 1); v != 2*-1 || count() != "-1" {
		t.Fatalf("release of 1 handing 1 at -2 = %d, count %s; want 2*-1, -1", v, count())
	}
	if p := heard(t, client); p != "-1" {
		t.Fatalf("channel heard %q, want -1", p)
	}
	if v := release("even", 2, 1); v != 2*0+1 || count() != "0" {
		t.Fatalf("release of 2 handing 1 at -1 = %d, count %s; want 2*0+1, 0", v, count())
	}
	if p := heard(t, client); p != "0" {
		t.Fatalf("channel heard %q, want 0", p)
	}
	rdb.Set(ctx, name, 2, 0)
	// Another subscriber (another client, or Redisson): nothing handed.
	listening(t, ch)
	if v := release("other", 2, 2); v != 2*4 || count() != "4" {
		t.Fatalf("release with another listener = %d, count %s; want 2*4, 4", v, count())
	}
	if p := heard(t, client); p != "4" {
		t.Fatalf("channel heard %q, want 4", p)
	}
	if v := release("other", 2, 2); v != 2*4 {
		t.Fatalf("retried release = %d, want 2*4", v)
	}
	// Without k, the reply is the count, as it always was.
	if v := release("plain", 1, 0); v != 5 {
		t.Fatalf("plain release = %d, want 5", v)
	}
}

func TestSemaphoreScripts(t *testing.T) {
	fresh(t)
	ctx := context.Background()
	name, ch := "s:sem", layout.Companion(layout.SemaphoreChannel, "s:sem")
	marker := func(id string) string { return layout.Marker(layout.SemaphoreRequest, "s:sem", id) }
	if v := run(t, SemTrySetPermits, []string{name, marker("set")}, 3, "publish", 60000, ch); v != int64(1) {
		t.Fatalf("trysetpermits = %v", v)
	}
	if v := run(t, SemTrySetPermits, []string{name, marker("set")}, 3, "publish", 60000, ch); v != int64(1) {
		t.Fatalf("retried trysetpermits = %v, want the first answer 1", v)
	}
	if v := run(t, SemTrySetPermits, []string{name, marker("set2")}, 5, "publish", 60000, ch); v != int64(0) {
		t.Fatalf("second trysetpermits = %v", v)
	}
	acquire := func(id string, n int, stale ...string) int64 {
		return run(t, SemAcquire, append([]string{name, marker(id)}, stale...), n, 60000).(int64)
	}
	if v := acquire("a", 2); v != 1 {
		t.Fatalf("acquire 2 of 3 = %d", v)
	}
	if v := acquire("a", 2); v != 1 || rdb.Get(ctx, name).Val() != "1" {
		t.Fatalf("retried acquire = %d, permits %s: applied twice", v, rdb.Get(ctx, name).Val())
	}
	if v := acquire("b", 2); v != 0 {
		t.Fatalf("acquire 2 of 1 = %d", v)
	}
	// Undo gives back an applied acquisition once, and makes an unapplied
	// one a no-op even if it arrives later.
	undo := func(id string, n int) int64 {
		return run(t, SemUndo, []string{name, marker(id)}, n, "publish", 60000, ch).(int64)
	}
	if v := undo("a", 2); v != 1 || rdb.Get(ctx, name).Val() != "3" {
		t.Fatalf("undo = %d, permits %s", v, rdb.Get(ctx, name).Val())
	}
	if v := undo("a", 2); v != 0 || rdb.Get(ctx, name).Val() != "3" {
		t.Fatalf("second undo = %d, permits %s", v, rdb.Get(ctx, name).Val())
	}
	if v := undo("late", 1); v != 0 {
		t.Fatalf("undo of an unapplied request = %d", v)
	}
	if v := acquire("late", 1); v != 0 || rdb.Get(ctx, name).Val() != "3" {
		t.Fatalf("a request arriving after its undo = %d, permits %s", v, rdb.Get(ctx, name).Val())
	}
	// Release is applied once per request, and deletes answered markers.
	release := func(id string, n int, stale ...string) int64 {
		return run(t, SemRelease, append([]string{name, marker(id)}, stale...), n, "publish", 60000, ch).(int64)
	}
	if v := release("r", 2, marker("set"), marker("a")); v != 5 {
		t.Fatalf("release = %d, want 5", v)
	}
	if v := release("r", 2); v != 5 {
		t.Fatalf("retried release = %d, want 5", v)
	}
	if n := rdb.Exists(ctx, marker("set"), marker("a")).Val(); n != 0 {
		t.Fatalf("%d answered markers left", n)
	}
	if ttl := rdb.PTTL(ctx, marker("r")).Val(); ttl <= 0 || ttl > time.Minute {
		t.Fatalf("marker TTL %v", ttl)
	}
	drain := func(id string) int64 { return run(t, SemDrain, []string{name, marker(id)}, 60000).(int64) }
	if v := drain("d"); v != 5 {
		t.Fatalf("drain = %d", v)
	}
	if v := drain("d"); v != 5 {
		t.Fatalf("retried drain = %d, want the first answer", v)
	}
	if v := drain("d2"); v != 0 || rdb.Get(ctx, name).Val() != "0" {
		t.Fatalf("drain of none = %d, permits %s", v, rdb.Get(ctx, name).Val())
	}
}

func TestPermitScripts(t *testing.T) {
	fresh(t)
	ctx := context.Background()
	ch := layout.Companion(layout.SemaphoreChannel, "s:psem")
	keys := []string{"s:psem", layout.PermitTimeouts("s:psem"), ch, layout.Companion(layout.PermitQueue, "s:psem")}
	rdb.Set(ctx, keys[0], 2, 0)
	acquire := func(id string, lease int) int64 {
		return run(t, PermitAcquire, keys[:3], id, lease, "publish", "", 2000, "0").(int64)
	}
	release := func(id string) any {
		return run(t, PermitRelease, keys, id, "publish", "numsub", "c0ffee", clientGrants("c0ffee"), 2000, "1", "")
	}
	a, b, c := "\x00\x01aaaaaaaaaaaaaa", "\xff\xfebbbbbbbbbbbbbb", "cccccccccccccccc"
	if v := acquire(a, 60000); v != 0 {
		t.Fatalf("acquire a = %d", v)
	}
	if v := acquire(a, 60000); v != 0 || rdb.Get(ctx, keys[0]).Val() != "1" {
		t.Fatalf("retried acquire = %d, free %s", v, rdb.Get(ctx, keys[0]).Val())
	}
	if v := acquire(b, 200); v != 0 {
		t.Fatalf("acquire b = %d", v)
	}
	v := acquire(c, 60000)
	if v <= 0 || v > 200 {
		t.Fatalf("acquire with none free = %d, want the earliest expiry (b's, <= 200ms)", v)
	}
	// b expires by the server's clock: the next call reclaims it, publishes
	// the free count and takes it.
	ps := rdb.Subscribe(ctx, ch)
	defer ps.Close()
	if _, err := ps.Receive(ctx); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Duration(v+5) * time.Millisecond) // the passing of time is what is tested
	if v := run(t, PermitAvailable, keys[:2], "publish", ch); v != int64(1) {
		t.Fatalf("available after b's expiry = %v", v)
	}
	if msg, err := ps.ReceiveMessage(ctx); err != nil || msg.Payload != "1" {
		t.Fatalf("reclaim message %v, %v", msg, err)
	}
	if v := acquire(c, 60000); v != 0 {
		t.Fatalf("acquire c after reclaim = %d", v)
	}
	if v := release(b); v != int64(0) {
		t.Fatalf("release of a reclaimed permit = %v", v)
	}
	// Renewal extends, never shortens, and sees released permits gone.
	renew := func(lease ...string) string {
		args := []any{}
		for i, l := range lease {
			args = append(args, []string{a, c, b}[i], l)
		}
		return fmt.Sprint(run(t, PermitRenew, []string{keys[1], keys[1], keys[1]}[:len(lease)], args...))
	}
	if got := renew("120000", "0", "60000"); got != "[1 1 0]" {
		t.Fatalf("renew = %s", got)
	}
	if s := rdb.ZScore(ctx, keys[1], a).Val() - rdb.ZScore(ctx, keys[1], c).Val(); s < 50000 {
		t.Fatalf("a not extended: %v ms ahead of c", s)
	}
	if got := renew("1000"); got != "[1]" || rdb.ZScore(ctx, keys[1], a).Val()-rdb.ZScore(ctx, keys[1], c).Val() < 50000 {
		t.Fatalf("renew with a shorter lease shortened the expiry")
	}
	if v := run(t, PermitUpdateLease, keys[:2], a, 100, "publish", ch); v != int64(1) {
		t.Fatalf("update lease = %v", v)
	}
	if v := run(t, PermitUpdateLease, keys[:2], b, 100, "publish", ch); v != int64(0) {
		t.Fatalf("update lease of an unknown permit = %v", v)
	}
	time.Sleep(110 * time.Millisecond)
	if got := renew("60000"); got != "[0]" {
		t.Fatalf("renew of an expired permit = %s, want [0]", got)
	}
	if v := release(a); v != int64(2) {
		t.Fatalf("release of an expired, unreclaimed permit = %v, want 2", v)
	}
	if v := release(c); v != int64(1) {
		t.Fatalf("release = %v", v)
	}
	if free := rdb.Get(ctx, keys[0]).Val(); free != "2" || rdb.Exists(ctx, keys[1]).Val() != 0 {
		t.Fatalf("free %s after every release, zset exists %d", free, rdb.Exists(ctx, keys[1]).Val())
	}
	// Redisson's permits without a lease never expire and give no hint.
	rdb.Set(ctx, keys[0], 0, 0)
	rdb.ZAdd(ctx, keys[1], redis.Z{Score: 922337203685477, Member: "java"})
	if v := acquire(a, 1000); v != -1 {
		t.Fatalf("acquire against a permit without lease = %d, want -1", v)
	}
}

func TestLatchScripts(t *testing.T) {
	fresh(t)
	ctx := context.Background()
	keys := func(id string) []string {
		return []string{"s:latch", layout.Marker(layout.LatchRequest, "s:latch", id)}
	}
	ch := layout.LatchChannel("s:latch", false)
	ps := rdb.Subscribe(ctx, ch)
	defer ps.Close()
	if _, err := ps.Receive(ctx); err != nil {
		t.Fatal(err)
	}
	if v := run(t, LatchCountDown, keys("early"), "publish", 60000, ch); v != int64(-1) {
		t.Fatalf("countdown of an unset latch = %v", v)
	}
	if v := run(t, LatchTrySetCount, keys("s"), 2, "publish", 60000, ch); v != int64(1) {
		t.Fatalf("trysetcount = %v", v)
	}
	if v := run(t, LatchTrySetCount, keys("s2"), 5, "publish", 60000, ch); v != int64(0) {
		t.Fatalf("second trysetcount = %v", v)
	}
	if msg, err := ps.ReceiveMessage(ctx); err != nil || msg.Payload != "1" {
		t.Fatalf("new count message %v, %v", msg, err)
	}
	if v := run(t, LatchCountDown, keys("a"), "publish", 60000, ch); v != int64(1) {
		t.Fatalf("countdown = %v", v)
	}
	if v := run(t, LatchCountDown, keys("a"), "publish", 60000, ch); v != int64(1) {
		t.Fatalf("retried countdown = %v: applied twice", v)
	}
	if v := run(t, LatchCountDown, append(keys("b"), keys("a")[1], keys("s")[1]), "publish", 60000, ch); v != int64(0) {
		t.Fatalf("last countdown = %v", v)
	}
	if msg, err := ps.ReceiveMessage(ctx); err != nil || msg.Payload != "0" {
		t.Fatalf("zero message %v, %v", msg, err)
	}
	if n := rdb.Exists(ctx, "s:latch", keys("a")[1], keys("s")[1]).Val(); n != 0 {
		t.Fatalf("%d keys left: the latch or answered markers", n)
	}
	if v := run(t, LatchTrySetCount, keys("again"), 1, "publish", 60000, ch); v != int64(1) {
		t.Fatalf("trysetcount after zero = %v", v)
	}
}
