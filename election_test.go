package relock_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/layout"
	"github.com/relock-go/relock/internal/testkit"
)

// electionKey is the key of an election's lock.
func electionKey(name string) string { return layout.Companion(layout.Election, name) }

// TestElectionCampaignResign: one leader at a time; Leader reports its
// value, term, host and process; Proclaim changes the value in the same
// term; Resign hands leadership to the waiting campaigner, whose term is
// greater; after the last Resign no lock is left and Leader says none.
func TestElectionCampaignResign(t *testing.T) {
	testkit.ForEach(t, func(t *testing.T, top testkit.Topology) {
		ctx := testkit.CtxTimeout(t, 20*time.Second)
		a := top.NewClient(t, relock.WithClientName("node-a"))
		b := top.NewClient(t)
		name := testkit.LockName(t)
		ea, eb := a.Election(name), b.Election(name)

		la, err := ea.Campaign(ctx, "10.0.0.1:80")
		if err != nil {
			t.Fatal(err)
		}
		got, err := eb.Leader(ctx)
		if err != nil {
			t.Fatal(err)
		}
		host, _ := os.Hostname()
		if got.Value != "10.0.0.1:80" || got.Term != la.Term() || got.Host != host || got.PID != os.Getpid() ||
			got.Client != "node-a" || got.Holder == "" || got.Since.IsZero() {
			t.Fatalf("Leader = %+v; want value 10.0.0.1:80, term %d, host %s, pid %d, client node-a", got, la.Term(), host, os.Getpid())
		}

		won := make(chan *relock.Leadership, 1)
		go func() {
			lb, err := eb.Campaign(ctx, "10.0.0.2:80")
			if err != nil {
				t.Error(err)
			}
			won <- lb
		}()
		testkit.Eventually(t, 10*time.Second, "the second campaigner to wait", func() bool { return b.Stats().Asleep == 1 })

		if err := la.Proclaim(ctx, "10.0.0.1:81"); err != nil {
			t.Fatal(err)
		}
		if got, err := eb.Leader(ctx); err != nil || got.Value != "10.0.0.1:81" || got.Term != la.Term() {
			t.Fatalf("after Proclaim: Leader = %+v, %v; want 10.0.0.1:81 in term %d", got, err, la.Term())
		}
		select {
		case lb := <-won:
			t.Fatalf("second campaigner elected while the first leads: %+v", lb)
		default:
		}

		if err := la.Resign(ctx); err != nil {
			t.Fatal(err)
		}
		if err := la.Err(); !errors.Is(err, relock.ErrReleased) {
			t.Fatalf("resigned leadership: Err = %v; want ErrReleased", err)
		}
		if err := la.Resign(ctx); !errors.Is(err, relock.ErrNotHeld) {
			t.Fatalf("second Resign: %v; want ErrNotHeld", err)
		}
		if err := la.Proclaim(ctx, "x"); !errors.Is(err, relock.ErrNotHeld) {
			t.Fatalf("Proclaim after Resign: %v; want ErrNotHeld", err)
		}
		lb := <-won
		if lb == nil {
			t.FailNow()
		}
		if lb.Term() <= la.Term() {
			t.Fatalf("new term %d not greater than %d", lb.Term(), la.Term())
		}
		if got, err := ea.Leader(ctx); err != nil || got.Value != "10.0.0.2:80" || got.Term != lb.Term() {
			t.Fatalf("Leader = %+v, %v; want 10.0.0.2:80 in term %d", got, err, lb.Term())
		}
		if err := lb.Resign(ctx); err != nil {
			t.Fatal(err)
		}
		if _, err := ea.Leader(ctx); !errors.Is(err, relock.ErrNoLeader) {
			t.Fatalf("Leader after the last Resign: %v; want ErrNoLeader", err)
		}
		for _, k := range testkit.KeysOf(t, top.RDB(t), name) {
			if _, log := layout.NameOf(layout.ElectionLog, k); !log {
				t.Errorf("key %q left after the last Resign", k)
			}
		}
	})
}

// recv receives the next value of an Observe channel within a bound.
func recv(t *testing.T, ch <-chan relock.Leader) relock.Leader {
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

// describe renders a Leader as "term:value", or "term:-" for none.
func describe(l relock.Leader) string {
	if l.Holder == "" {
		return fmt.Sprintf("%d:-", l.Term)
	}
	return fmt.Sprintf("%d:%s", l.Term, l.Value)
}

// TestElectionObserve: an observer in another Client sees every change in
// order and once: each value of a burst of Proclaims, a resignation, the
// next leader, and the end of a term whose lock expired; an observer that
// comes later starts from the current leader.
func TestElectionObserve(t *testing.T) {
	testkit.ForEach(t, func(t *testing.T, top testkit.Topology) {
		ctx := testkit.CtxTimeout(t, 30*time.Second)
		a, b, o := top.NewClient(t), top.NewClient(t), top.NewClient(t)
		name := testkit.LockName(t)
		la, err := a.Election(name).Campaign(ctx, "v0")
		if err != nil {
			t.Fatal(err)
		}
		octx, stop := context.WithCancel(ctx)
		defer stop()
		ch := o.Election(name).Observe(octx)
		want := []string{fmt.Sprintf("%d:v0", la.Term())}
		if got := describe(recv(t, ch)); got != want[0] {
			t.Fatalf("observer starts with %s; want %s", got, want[0])
		}
		for i := 1; i <= 100; i++ {
			v := fmt.Sprintf("v%d", i)
			if err := la.Proclaim(ctx, v); err != nil {
				t.Fatal(err)
			}
			want = append(want, fmt.Sprintf("%d:%s", la.Term(), v))
		}
		if err := la.Resign(ctx); err != nil {
			t.Fatal(err)
		}
		want = append(want, fmt.Sprintf("%d:-", la.Term()))
		// A fixed lease long enough for the late observer to find the
		// leader before it expires.
		lb, err := b.Election(name).Campaign(ctx, "w", relock.WithLease(2*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, fmt.Sprintf("%d:w", lb.Term()))
		late := o.Election(name).Observe(octx)
		if got := describe(recv(t, late)); got != want[len(want)-1] {
			t.Fatalf("late observer starts with %s; want %s", got, want[len(want)-1])
		}
		<-lb.Done() // the lock expires, unrenewed
		want = append(want, fmt.Sprintf("%d:-", lb.Term()))
		for i, w := range want[1:] {
			if got := describe(recv(t, ch)); got != w {
				t.Fatalf("change %d observed as %s; want %s (all: %v)", i, got, w, want)
			}
		}
		if got := describe(recv(t, late)); got != want[len(want)-1] {
			t.Fatalf("late observer then sees %s; want %s", got, want[len(want)-1])
		}
		stop()
		for range ch {
			t.Fatal("a change observed twice or after the last")
		}
		for range late {
		}
		testkit.Eventually(t, 10*time.Second, "the observers to unsubscribe", func() bool { return o.Stats().Channels == 0 })
	})
}

// TestElectionValueBytes: values are bytes: one that is not UTF-8 comes
// back from Leader and Observe as it was given, by Campaign and by
// Proclaim, and the record keeps a "value" string that readers of the
// older form (the command line's, older releases) can parse.
func TestElectionValueBytes(t *testing.T) {
	testkit.ForEach(t, func(t *testing.T, top testkit.Topology) {
		ctx := testkit.CtxTimeout(t, 20*time.Second)
		rdb := top.RDB(t)
		a, o := top.NewClient(t), top.NewClient(t)
		name := testkit.LockName(t)
		values := []string{"\x96\x01\xff\xfe", "", "plain", "\xc3\x28 \u00e9 \x00", "\xed\xa0\x80"}
		l, err := a.Election(name).Campaign(ctx, values[0])
		if err != nil {
			t.Fatal(err)
		}
		octx, stop := context.WithCancel(ctx)
		defer stop()
		ch := o.Election(name).Observe(octx)
		for i, v := range values {
			if i > 0 {
				if err := l.Proclaim(ctx, v); err != nil {
					t.Fatal(err)
				}
			}
			if got := l.Value(); got != v {
				t.Fatalf("Leadership.Value = %q, want %q", got, v)
			}
			if got, err := o.Election(name).Leader(ctx); err != nil || got.Value != v {
				t.Fatalf("Leader = %q, %v; want %q", got.Value, err, v)
			}
			if got := recv(t, ch); got.Value != v || got.Term != l.Term() {
				t.Fatalf("observed %q in term %d, want %q in term %d", got.Value, got.Term, v, l.Term())
			}
			var rec struct {
				Value *string `json:"value"`
			}
			raw := rdb.HGet(ctx, electionKey(name), layout.LeaderField).Val()
			if err := json.Unmarshal([]byte(raw), &rec); err != nil || rec.Value == nil {
				t.Fatalf("record %q: no \"value\" string (%v)", raw, err)
			}
			if utf8.ValidString(v) && *rec.Value != v {
				t.Fatalf("record %q: \"value\" %q, want %q as before", raw, *rec.Value, v)
			}
		}
		if err := l.Resign(ctx); err != nil {
			t.Fatal(err)
		}
	})
}

// TestElectionObserveReconnect: changes made while the observer's pub/sub
// connection is being replaced are read from the log on reconnecting, in
// order.
func TestElectionObserveReconnect(t *testing.T) {
	ctx := testkit.CtxTimeout(t, 30*time.Second)
	rdb := testkit.CloseLater(t, testkit.Standalone.Client())
	a, o := testkit.NewClient(t, testkit.CloseLater(t, testkit.Standalone.Client())), testkit.NewClient(t, rdb)
	name := testkit.LockName(t)
	la, err := a.Election(name).Campaign(ctx, "v0")
	if err != nil {
		t.Fatal(err)
	}
	octx, stop := context.WithCancel(ctx)
	defer stop()
	ch := o.Election(name).Observe(octx)
	if got := describe(recv(t, ch)); got != fmt.Sprintf("%d:v0", la.Term()) {
		t.Fatalf("observed %s first", got)
	}
	if err := rdb.ClientKillByFilter(ctx, "TYPE", "pubsub").Err(); err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= 20; i++ {
		if err := la.Proclaim(ctx, fmt.Sprintf("v%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	for i := 1; i <= 20; i++ {
		if got, want := describe(recv(t, ch)), fmt.Sprintf("%d:v%d", la.Term(), i); got != want {
			t.Fatalf("after the reconnect observed %s; want %s", got, want)
		}
	}
	if err := la.Resign(ctx); err != nil {
		t.Fatal(err)
	}
	if got := describe(recv(t, ch)); got != fmt.Sprintf("%d:-", la.Term()) {
		t.Fatalf("observed %s after Resign", got)
	}
}

// TestElectionLoss: a leader whose lock is deleted is told by Done and Err
// (ErrLockLost); Proclaim and Resign then report ErrNotHeld; the next
// campaigner is elected with a greater term.
func TestElectionLoss(t *testing.T) {
	testkit.ForEach(t, func(t *testing.T, top testkit.Topology) {
		ctx := testkit.CtxTimeout(t, 20*time.Second)
		c := top.NewClient(t, relock.WithWatchdogTimeout(600*time.Millisecond))
		name := testkit.LockName(t)
		e := c.Election(name)
		l, err := e.Campaign(ctx, "v")
		if err != nil {
			t.Fatal(err)
		}
		if err := top.RDB(t).Del(ctx, electionKey(name)).Err(); err != nil {
			t.Fatal(err)
		}
		waitLeadership(t, l)
		if err := l.Err(); !errors.Is(err, relock.ErrLockLost) {
			t.Fatalf("Err = %v; want ErrLockLost", err)
		}
		if err := l.Proclaim(ctx, "w"); !errors.Is(err, relock.ErrNotHeld) {
			t.Fatalf("Proclaim of a lost leadership: %v; want ErrNotHeld", err)
		}
		if err := l.Resign(ctx); !errors.Is(err, relock.ErrNotHeld) {
			t.Fatalf("Resign of a lost leadership: %v; want ErrNotHeld", err)
		}
		l2, err := e.Campaign(ctx, "w")
		if err != nil {
			t.Fatal(err)
		}
		if l2.Term() <= l.Term() {
			t.Fatalf("term %d after %d", l2.Term(), l.Term())
		}
		if err := l2.Resign(ctx); err != nil {
			t.Fatal(err)
		}
	})
}

func waitLeadership(t *testing.T, l *relock.Leadership) {
	t.Helper()
	select {
	case <-l.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("leadership not ended within 10s")
	}
}

// TestElectionCampaignCancelled: a campaign whose ctx ends returns its
// error and leaves no key, subscription or waiter behind; a second
// Campaign of the same owner context waits rather than re-entering.
func TestElectionCampaignCancelled(t *testing.T) {
	ctx := testkit.CtxTimeout(t, 20*time.Second)
	rdb := testkit.CloseLater(t, testkit.Standalone.Client())
	c := testkit.NewClient(t, rdb)
	name := testkit.LockName(t)
	e := c.Election(name)
	owner := relock.WithOwner(ctx)
	l, err := e.Campaign(owner, "a")
	if err != nil {
		t.Fatal(err)
	}
	cctx, cancel := context.WithTimeout(owner, 300*time.Millisecond)
	defer cancel()
	if l2, err := e.Campaign(cctx, "b"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("second Campaign of one owner: %v, %v; want it to wait until ctx ends", l2, err)
	}
	if err := l.Resign(ctx); err != nil {
		t.Fatal(err)
	}
	for _, k := range testkit.KeysOf(t, rdb, name) {
		if _, log := layout.NameOf(layout.ElectionLog, k); !log {
			t.Errorf("key %q left", k)
		}
	}
	testkit.Eventually(t, 10*time.Second, "no subscription left", func() bool { return c.Stats().Channels == 0 })
	if s := c.Stats(); s.Asleep != 0 || s.Held != 0 {
		t.Fatalf("Stats after: %+v", s)
	}
}

// TestElectionDeadCampaigner: a waiting campaigner whose Client is cut
// off from Redis, as one whose process was killed, holds up the
// campaigner behind it for its own Client's watchdog timeout at most, and
// not for the longer timeout of the campaigner behind it, when the leader
// resigns.
func TestElectionDeadCampaigner(t *testing.T) {
	testkit.ForEach(t, func(t *testing.T, top testkit.Topology) {
		const short = 100 * time.Millisecond
		rdb := top.RDB(t)
		a, b := top.NewClient(t), top.NewClient(t)
		cut := &cutOff{}
		drdb := top.RDB(t)
		drdb.AddHook(cut)
		d := testkit.NewClient(t, drdb, relock.WithWatchdogTimeout(short), relock.WithoutReplicaSync())
		name := testkit.LockName(t)
		ctx := testkit.CtxTimeout(t, 20*time.Second)
		queued := func(n int64) {
			t.Helper()
			testkit.Eventually(t, 5*time.Second, fmt.Sprintf("%d campaigners queued", n), func() bool {
				return rdb.LLen(ctx, layout.Companion(layout.FairQueue, electionKey(name))).Val() == n
			})
		}
		la, err := a.Election(name).Campaign(ctx, "a")
		if err != nil {
			t.Fatal(err)
		}
		dctx, dcancel := context.WithCancel(ctx)
		dead := make(chan struct{})
		go func() {
			defer close(dead)
			_, _ = d.Election(name).Campaign(dctx, "d")
		}()
		defer func() { dcancel(); <-dead }()
		queued(1)
		won := make(chan *relock.Leadership, 1)
		go func() {
			lb, err := b.Election(name).Campaign(ctx, "b")
			if err != nil {
				t.Error(err)
			}
			won <- lb
		}()
		queued(2)
		cut.on.Store(true)
		if err := la.Resign(ctx); err != nil {
			t.Fatal(err)
		}
		// b's own watchdog timeout is 30s, and it tries every 2s at least:
		// a bound of ten times the dead campaigner's timeout tells which
		// one holds b up.
		start := time.Now()
		var lb *relock.Leadership
		select {
		case lb = <-won:
		case <-time.After(10 * short):
			lb = <-won
			t.Errorf("the campaigner behind one dead for %v elected after %v, want within %v",
				short, time.Since(start).Round(time.Millisecond), 10*short)
		}
		if lb == nil {
			t.FailNow()
		}
		if err := lb.Resign(ctx); err != nil {
			t.Fatal(err)
		}
	})
}

// TestElectionNameLimit: an election's name may be MaxNameLen bytes long,
// like every lock's, whatever keys it is kept in; one byte more is
// refused with ErrInvalidName, naming the length of the name given.
func TestElectionNameLimit(t *testing.T) {
	testkit.ForEach(t, func(t *testing.T, top testkit.Topology) {
		ctx := testkit.CtxTimeout(t, 10*time.Second)
		c := top.NewClient(t)
		name := testkit.LockName(t)
		name += strings.Repeat("n", relock.MaxNameLen-len(name))
		e := c.Election(name)
		l, err := e.Campaign(ctx, "v")
		if err != nil {
			t.Fatalf("Campaign with a name of %d bytes: %v", len(name), err)
		}
		if got, err := e.Leader(ctx); err != nil || got.Value != "v" || got.Term != l.Term() {
			t.Fatalf("Leader = %+v, %v", got, err)
		}
		octx, stop := context.WithCancel(ctx)
		defer stop()
		if got := recv(t, e.Observe(octx)); got.Value != "v" {
			t.Fatalf("observed %+v", got)
		}
		if err := l.Resign(ctx); err != nil {
			t.Fatal(err)
		}
		long := c.Election(name + "n")
		_, err = long.Campaign(ctx, "v")
		if !errors.Is(err, relock.ErrInvalidName) || !strings.Contains(err.Error(), fmt.Sprintf(" %d bytes", relock.MaxNameLen+1)) {
			t.Fatalf("Campaign with a name of %d bytes: %v; want ErrInvalidName naming %d bytes", relock.MaxNameLen+1, err, relock.MaxNameLen+1)
		}
	})
}

// TestElectionBadInput: invalid names, a value over MaxValueLen and a
// closed Client are refused with typed errors, leaving no key.
func TestElectionBadInput(t *testing.T) {
	ctx := testkit.CtxTimeout(t, 10*time.Second)
	rdb := testkit.CloseLater(t, testkit.Standalone.Client())
	c := testkit.NewClient(t, rdb)
	for _, name := range []string{"", "a}b", strings.Repeat("n", relock.MaxNameLen+1)} {
		e := c.Election(name)
		if _, err := e.Campaign(ctx, "v"); !errors.Is(err, relock.ErrInvalidName) {
			t.Errorf("Campaign(%.20q): %v; want ErrInvalidName", name, err)
		}
		if _, err := e.Leader(ctx); !errors.Is(err, relock.ErrInvalidName) {
			t.Errorf("Leader(%.20q): %v; want ErrInvalidName", name, err)
		}
		if _, ok := <-e.Observe(ctx); ok {
			t.Errorf("Observe(%.20q) sent a value", name)
		}
	}
	name := testkit.LockName(t)
	if _, err := c.Election(name).Campaign(ctx, strings.Repeat("v", relock.MaxValueLen+1)); !errors.Is(err, relock.ErrInvalidValue) {
		t.Errorf("Campaign with a long value: %v; want ErrInvalidValue", err)
	}
	if keys := testkit.KeysOf(t, rdb, name); len(keys) != 0 {
		t.Errorf("keys left by refused calls: %v", keys)
	}
	l, err := c.Election(name).Campaign(ctx, "v")
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Proclaim(ctx, strings.Repeat("v", relock.MaxValueLen+1)); !errors.Is(err, relock.ErrInvalidValue) {
		t.Errorf("Proclaim of a long value: %v; want ErrInvalidValue", err)
	}
	if got, err := c.Election(name).Leader(ctx); err != nil || got.Value != "v" {
		t.Errorf("Leader after a refused Proclaim: %+v, %v", got, err)
	}
	_ = c.Close()
	if !errors.Is(l.Err(), relock.ErrLockLost) {
		t.Errorf("leadership after Close: %v; want ErrLockLost", l.Err())
	}
	if _, err := c.Election(name).Campaign(ctx, "v"); !errors.Is(err, relock.ErrClosed) {
		t.Errorf("Campaign on a closed Client: %v; want ErrClosed", err)
	}
	if _, ok := <-c.Election(name).Observe(ctx); ok {
		t.Error("Observe on a closed Client sent a value")
	}
}
