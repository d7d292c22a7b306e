package relock_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/conformance"
	"github.com/relock-go/relock/internal/layout"
	"github.com/relock-go/relock/internal/testkit"
)

// electionKey is the key of an election's lock.
func electionKey(name string) string { return layout.Companion(layout.Election, name) }

func TestElectionCampaignResign(t *testing.T) { conformance.ElectionCampaignResign(t) }

func TestElectionObserve(t *testing.T) { conformance.ElectionObserve(t) }

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
			if got := testkit.NextLeader(t, ch); got.Value != v || got.Term != l.Term() {
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

func TestElectionObserveReconnect(t *testing.T) { conformance.ElectionObserveReconnect(t) }

func TestElectionLoss(t *testing.T) { conformance.ElectionLoss(t) }

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
		if got := testkit.NextLeader(t, e.Observe(octx)); got.Value != "v" {
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
