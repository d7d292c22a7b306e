package conformance

import (
	"context"
	"errors"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/layout"
	"github.com/relock-go/relock/internal/testkit"
)

// ElectionCampaignResign: one leader at a time; Leader reports its
// value, term, host and process; Proclaim changes the value in the same
// term; Resign hands leadership to the waiting campaigner, whose term is
// greater; after the last Resign no lock is left and Leader says none.
func ElectionCampaignResign(t *testing.T) {
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

// ElectionObserve: an observer in another Client sees every change in
// order and once: each value of a burst of Proclaims, a resignation, the
// next leader, and the end of a term whose lock expired; an observer that
// comes later starts from the current leader.
func ElectionObserve(t *testing.T) {
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
		if got := describe(testkit.NextLeader(t, ch)); got != want[0] {
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
		if got := describe(testkit.NextLeader(t, late)); got != want[len(want)-1] {
			t.Fatalf("late observer starts with %s; want %s", got, want[len(want)-1])
		}
		<-lb.Done() // the lock expires, unrenewed
		want = append(want, fmt.Sprintf("%d:-", lb.Term()))
		for i, w := range want[1:] {
			if got := describe(testkit.NextLeader(t, ch)); got != w {
				t.Fatalf("change %d observed as %s; want %s (all: %v)", i, got, w, want)
			}
		}
		if got := describe(testkit.NextLeader(t, late)); got != want[len(want)-1] {
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

// ElectionObserveReconnect: changes made while the observer's pub/sub
// connection is being replaced are read from the log on reconnecting, in
// order.
func ElectionObserveReconnect(t *testing.T) {
	ctx := testkit.CtxTimeout(t, 30*time.Second)
	rdb := testkit.CloseLater(t, testkit.Standalone.Client())
	top := testkit.Topologies()[0]
	a, o := top.NewClient(t), top.NewClient(t)
	name := testkit.LockName(t)
	la, err := a.Election(name).Campaign(ctx, "v0")
	if err != nil {
		t.Fatal(err)
	}
	octx, stop := context.WithCancel(ctx)
	defer stop()
	ch := o.Election(name).Observe(octx)
	if got := describe(testkit.NextLeader(t, ch)); got != fmt.Sprintf("%d:v0", la.Term()) {
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
		if got, want := describe(testkit.NextLeader(t, ch)), fmt.Sprintf("%d:v%d", la.Term(), i); got != want {
			t.Fatalf("after the reconnect observed %s; want %s", got, want)
		}
	}
	if err := la.Resign(ctx); err != nil {
		t.Fatal(err)
	}
	if got := describe(testkit.NextLeader(t, ch)); got != fmt.Sprintf("%d:-", la.Term()) {
		t.Fatalf("observed %s after Resign", got)
	}
}

// ElectionLoss: a leader whose lock is deleted is told by Done and Err
// (ErrLockLost); Proclaim and Resign then report ErrNotHeld; the next
// campaigner is elected with a greater term.
func ElectionLoss(t *testing.T) {
	testkit.ForEach(t, func(t *testing.T, top testkit.Topology) {
		ctx := testkit.CtxTimeout(t, 20*time.Second)
		c := top.NewClient(t, relock.WithWatchdogTimeout(600*time.Millisecond))
		name := testkit.LockName(t)
		e := c.Election(name)
		l, err := e.Campaign(ctx, "v")
		if err != nil {
			t.Fatal(err)
		}
		if err := top.RDB(t).Del(ctx, layout.Companion(layout.Election, name)).Err(); err != nil {
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

// describe renders a Leader as "term:value", or "term:-" for none.
func describe(l relock.Leader) string {
	if l.Holder == "" {
		return fmt.Sprintf("%d:-", l.Term)
	}
	return fmt.Sprintf("%d:%s", l.Term, l.Value)
}

func waitLeadership(t *testing.T, l *relock.Leadership) {
	t.Helper()
	select {
	case <-l.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("leadership not ended within 10s")
	}
}
