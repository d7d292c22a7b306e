package gocronlock_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/gocronlock"
	"github.com/relock-go/relock/internal/redistest"
)

// electionName returns a name for the test's election of its own: a run
// of the test with -count does not find the leader an earlier one left.
func electionName(t *testing.T) string {
	return fmt.Sprintf("%s:%d", t.Name(), time.Now().UnixNano())
}

// newElector returns an Elector campaigning with value on the election
// name, with a Client of its own, closed when the test ends.
func newElector(t *testing.T, name, value string) *gocronlock.Elector {
	t.Helper()
	e, err := gocronlock.NewElector(newClient(t).Election(name), value)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.Close() })
	return e
}

// observer follows an election.
type observer struct {
	ch <-chan relock.Leader
}

// observe follows the election name from a Client of its own until the
// test ends.
func observe(t *testing.T, name string) *observer {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	ch := newClient(t).Election(name).Observe(ctx)
	t.Cleanup(func() {
		cancel()
		for range ch {
		}
	})
	return &observer{ch: ch}
}

// waitLeader returns the first leader observed for which ok holds.
func (o *observer) waitLeader(t *testing.T, what string, ok func(relock.Leader) bool) relock.Leader {
	t.Helper()
	for {
		select {
		case l, open := <-o.ch:
			if !open {
				t.Fatalf("%s: the observer ended", what)
			}
			if l.Holder != "" && ok(l) {
				return l
			}
		case <-time.After(within):
			t.Fatalf("%s: not within %v", what, within)
		}
	}
}

// waitLeading returns once e leads. The election announces a new leader
// just before its Campaign returns to the Elector, which has no signal of
// its own for it: this polls IsLeader, after the announcement, for the
// moment between the two.
func waitLeading(t *testing.T, e *gocronlock.Elector) {
	t.Helper()
	deadline := time.Now().Add(within)
	for e.IsLeader(context.Background()) != nil {
		if time.Now().After(deadline) {
			t.Fatalf("the Elector does not lead within %v: %v", within, e.IsLeader(context.Background()))
		}
		time.Sleep(time.Millisecond)
	}
}

// TestElectorLeadsAndHandsOver checks that one of two Electors leads, that
// Close resigns, and that the other leads then.
func TestElectorLeadsAndHandsOver(t *testing.T) {
	ctx := context.Background()
	name := electionName(t)
	o := observe(t, name)
	electors := map[string]*gocronlock.Elector{"a": newElector(t, name, "a"), "b": newElector(t, name, "b")}
	first := o.waitLeader(t, "a leader", func(relock.Leader) bool { return true })
	leader := electors[first.Value]
	other := "a"
	if first.Value == "a" {
		other = "b"
	}
	waitLeading(t, leader)
	if l := leader.Leadership(); l == nil || l.Term() != first.Term {
		t.Fatalf("Leadership of the leader: %v, want term %d", l, first.Term)
	}
	if err := electors[other].IsLeader(ctx); !errors.Is(err, gocronlock.ErrNotLeader) {
		t.Fatalf("IsLeader of the other: %v, want ErrNotLeader", err)
	}
	if l := electors[other].Leadership(); l != nil {
		t.Fatalf("Leadership of the other: term %d, want nil", l.Term())
	}

	if err := leader.Close(); err != nil {
		t.Fatalf("Close of the leader: %v", err)
	}
	if err := leader.IsLeader(ctx); !errors.Is(err, gocronlock.ErrNotLeader) || !errors.Is(err, relock.ErrReleased) {
		t.Errorf("IsLeader after Close: %v, want ErrNotLeader and ErrReleased", err)
	}
	next := o.waitLeader(t, "the next leader", func(l relock.Leader) bool { return l.Value == other })
	if next.Term <= first.Term {
		t.Errorf("term of the next leader %d, after %d", next.Term, first.Term)
	}
	waitLeading(t, electors[other])
	if err := electors[other].Close(); err != nil {
		t.Error(err)
	}
}

// TestElectorSeesLossAtOnce pauses the server past the leader's lease:
// IsLeader reports the loss as soon as the leadership's local deadline has
// passed, before the lock expires in Redis, and once the server is back
// the Elector campaigns again.
func TestElectorSeesLossAtOnce(t *testing.T) {
	ctx := context.Background()
	srv := redistest.Standalone(t)
	octx, cancel := context.WithCancel(ctx)
	defer cancel()
	name := electionName(t)
	o := &observer{ch: newClientAt(t, srv.Addr).Election(name).Observe(octx)}
	c := newClientAt(t, srv.Addr, relock.WithWatchdogTimeout(300*time.Millisecond))
	e, err := gocronlock.NewElector(c.Election(name), "a")
	if err != nil {
		t.Fatal(err)
	}
	first := o.waitLeader(t, "a leader", func(relock.Leader) bool { return true })
	waitLeading(t, e)
	l := e.Leadership()
	if l == nil {
		t.Fatal("no leadership after the election")
	}
	if err := srv.Pause(); err != nil {
		t.Fatal(err)
	}
	<-l.Done()
	err = e.IsLeader(ctx)
	if resume := srv.Resume(); resume != nil {
		t.Fatal(resume)
	}
	if !errors.Is(err, gocronlock.ErrNotLeader) || !errors.Is(err, relock.ErrLockLost) {
		t.Errorf("IsLeader once the leadership ended: %v, want ErrNotLeader and ErrLockLost", err)
	}
	again := o.waitLeader(t, "a new term", func(l relock.Leader) bool { return l.Term > first.Term })
	if again.Value != "a" {
		t.Errorf("new leader %q, want a", again.Value)
	}
	waitLeading(t, e)
	if err := e.Close(); err != nil {
		t.Error(err)
	}
	cancel()
	for range o.ch {
	}
}

// TestElectorClientClosed checks that an Elector whose Client is closed
// stops leading and campaigning, and says why.
func TestElectorClientClosed(t *testing.T) {
	name := electionName(t)
	o := observe(t, name)
	c := newClient(t)
	e, err := gocronlock.NewElector(c.Election(name), "a")
	if err != nil {
		t.Fatal(err)
	}
	o.waitLeader(t, "a leader", func(relock.Leader) bool { return true })
	waitLeading(t, e)
	l := e.Leadership()
	if l == nil {
		t.Fatal("no leadership after the election")
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	<-l.Done()
	if err := e.Close(); err != nil {
		t.Errorf("Close after the Client's: %v", err)
	}
	if err := e.IsLeader(context.Background()); !errors.Is(err, gocronlock.ErrNotLeader) || !errors.Is(err, relock.ErrClosed) {
		t.Errorf("IsLeader after the Client's Close: %v, want ErrNotLeader and ErrClosed", err)
	}
}

// TestElectorInvalid checks the errors of a bad value and a bad name.
func TestElectorInvalid(t *testing.T) {
	c := newClient(t)
	if _, err := gocronlock.NewElector(c.Election("ok"), strings.Repeat("x", relock.MaxValueLen+1)); !errors.Is(err, relock.ErrInvalidValue) {
		t.Errorf("NewElector with a value too long: %v, want ErrInvalidValue", err)
	}
	if _, err := gocronlock.NewElector(nil, "a"); !errors.Is(err, relock.ErrInvalidOption) {
		t.Errorf("NewElector(nil): %v, want ErrInvalidOption", err)
	}
	e, err := gocronlock.NewElector(c.Election(""), "a")
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	if err := e.IsLeader(context.Background()); !errors.Is(err, gocronlock.ErrNotLeader) || !errors.Is(err, relock.ErrInvalidName) {
		t.Errorf("IsLeader of an election without a name: %v, want ErrNotLeader and ErrInvalidName", err)
	}
}
