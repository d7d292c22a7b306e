package wait_test

import (
	"context"
	"errors"
	"runtime"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/relock-go/relock/internal/wait"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// hold stands for what a call gets or a release passes: a lease.
type hold struct{ token uint64 }

// call is a waiting call whose attempts take what took returns, counted;
// its grants are accepted with accept. It records how it ended.
type call struct {
	took     func(n int) *hold // what attempt n (from 1) takes
	accept   func(g *wait.Grant) *hold
	attempts int
	ended    chan bool // End's queued
}

func newCall(took func(n int) *hold) *call {
	return &call{took: took, ended: make(chan bool, 1)}
}

func (c *call) Attempt(context.Context, bool) (wait.Result[*hold], error) {
	c.attempts++
	return wait.Result[*hold]{Got: c.took(c.attempts), Retry: time.Millisecond}, nil
}

func (c *call) Accept(g *wait.Grant) *hold {
	if c.accept == nil {
		return nil
	}
	return c.accept(g)
}

func (c *call) Join() {}

func (c *call) End(queued bool) { c.ended <- queued }

// never is an attempt that takes nothing.
func never(int) *hold { return nil }

// newEnv returns an Env for calls that subscribe to nothing (no hub).
func newEnv() *wait.Env {
	return &wait.Env{
		List:     &wait.List{},
		Closing:  make(chan struct{}),
		Closed:   errors.New("closed"),
		Stats:    &wait.Stats{},
		GrantTTL: time.Hour,
		Unwanted: func(wait.Hold) {},
		Now:      func() int64 { return time.Now().UnixNano() },
	}
}

// outcome is what a Loop returned.
type outcome struct {
	got *hold
	err error
}

// run runs Loop for c in the background and returns where its outcome
// comes.
func run(ctx context.Context, env *wait.Env, wt wait.Wait, c *call, first wait.Result[*hold]) <-chan outcome {
	out := make(chan outcome, 1)
	go func() {
		got, err := wait.Loop(ctx, env, wt, c, first)
		out <- outcome{got, err}
	}()
	return out
}

// await returns the outcome of a Loop within a bound that only keeps a
// failing test from hanging.
func await(t *testing.T, out <-chan outcome) outcome {
	t.Helper()
	select {
	case o := <-out:
		return o
	case <-time.After(10 * time.Second):
		t.Fatal("the loop did not return")
		return outcome{}
	}
}

// until polls cond, which no signal reports (a waiter's sleep), within a
// bound that only keeps a failing test from hanging.
func until(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		runtime.Gosched()
	}
}

// TestLoopReturnsWhatAnAttemptGot: the loop returns what the call's
// attempt took, as got, and ends the call as one that holds it.
func TestLoopReturnsWhatAnAttemptGot(t *testing.T) {
	want := &hold{token: 3}
	c := newCall(func(n int) *hold {
		if n == 3 {
			return want
		}
		return nil
	})
	env := newEnv()
	w := wait.NewWaiter("o:1", false)
	o := await(t, run(context.Background(), env, wait.Wait{Op: "lock", Name: "l", Local: "l", Waiter: w, Joined: true}, c, wait.Result[*hold]{Retry: time.Millisecond}))
	if o.err != nil || o.got != want {
		t.Fatalf("loop = %+v, want got %p", o, want)
	}
	if c.attempts != 3 {
		t.Fatalf("%d attempts, want 3", c.attempts)
	}
	if queued := <-c.ended; queued {
		t.Fatal("a call that got what it waits for was ended as queued")
	}
	if env.List.Len() != 0 {
		t.Fatal("the waiter stayed in its list")
	}
}

// TestLoopReturnsWhatAReleasePassed: a release of the Client that claims
// the sleeping call and passes it a hold ends the loop with it, as got,
// without an attempt.
func TestLoopReturnsWhatAReleasePassed(t *testing.T) {
	c := newCall(never)
	env := newEnv()
	w := wait.NewWaiter("o:1", true)
	out := run(context.Background(), env, wait.Wait{Op: "lock", Name: "l", Local: "l", Waiter: w, Joined: true}, c, wait.Result[*hold]{Retry: time.Hour})
	var buf [1]*wait.Waiter
	var ws []*wait.Waiter
	until(t, "the waiter to sleep", func() bool {
		ws = env.List.Claim("l", buf[:], nil)
		return len(ws) == 1
	})
	want := &hold{token: 9}
	if !env.List.Settle(ws, 0, want, false) {
		t.Fatal("the pass was not delivered")
	}
	o := await(t, out)
	if o.err != nil || o.got != want {
		t.Fatalf("loop = %+v, want got %p", o, want)
	}
	if c.attempts != 0 {
		t.Fatalf("%d attempts after a pass, want none", c.attempts)
	}
	if queued := <-c.ended; queued {
		t.Fatal("a call passed what it waits for was ended as queued")
	}
}

// TestLoopAcceptsGrants: a grant to the call's owner is offered to the
// call; one it accepts ends the loop as got, one it refuses (it may have
// run out) makes it attempt.
func TestLoopAcceptsGrants(t *testing.T) {
	for _, refuse := range []bool{false, true} {
		name := "accepted"
		if refuse {
			name = "refused"
		}
		t.Run(name, func(t *testing.T) {
			granted, took := &hold{token: 5}, &hold{token: 6}
			c := newCall(func(int) *hold { return took })
			c.accept = func(g *wait.Grant) *hold {
				if refuse || g.Token != 5 {
					return nil
				}
				return granted
			}
			env := newEnv()
			// The grant comes before the waiter is added: it waits for it.
			env.List.Grant("o:1", &wait.Grant{Token: 5, TTL: time.Second})
			w := wait.NewWaiter("o:1", false)
			o := await(t, run(context.Background(), env, wait.Wait{Op: "lock", Name: "l", Local: "l", Waiter: w, Joined: true}, c, wait.Result[*hold]{Retry: time.Hour}))
			want, attempts := granted, 0
			if refuse {
				want, attempts = took, 1
			}
			if o.err != nil || o.got != want {
				t.Fatalf("loop = %+v, want got %p", o, want)
			}
			if c.attempts != attempts {
				t.Fatalf("%d attempts, want %d", c.attempts, attempts)
			}
			<-c.ended
		})
	}
}

// TestLoopEndsAQueuedCall: a call whose ctx ends returns ctx's error,
// named by its operation, and is ended as one that may be queued.
func TestLoopEndsAQueuedCall(t *testing.T) {
	c := newCall(never)
	env := newEnv()
	ctx, cancel := context.WithCancel(context.Background())
	w := wait.NewWaiter("o:1", true)
	out := run(ctx, env, wait.Wait{Op: "lock", Name: "l", Local: "l", Waiter: w, Joined: true}, c, wait.Result[*hold]{Retry: time.Hour})
	cancel()
	o := await(t, out)
	if !errors.Is(o.err, context.Canceled) || o.err.Error() != `relock: lock "l": context canceled` {
		t.Fatalf("loop error = %v, want the call's, wrapping context.Canceled", o.err)
	}
	if o.got != nil {
		t.Fatalf("loop = %+v, want nothing", o)
	}
	if queued := <-c.ended; !queued {
		t.Fatal("a queued call that gave up was not ended as queued")
	}
}

// TestLoopWaitsForItsGate: a call with a gate neither attempts nor
// listens before the gate lets it through; a release of the Client may
// pass it what it waits for meanwhile, and it then returns without ever
// going through.
func TestLoopWaitsForItsGate(t *testing.T) {
	t.Run("through", func(t *testing.T) {
		want := &hold{token: 1}
		c := newCall(func(int) *hold { return want })
		env := newEnv()
		gate := make(chan struct{}, 1)
		w := wait.NewWaiter("o:1", true)
		out := run(context.Background(), env, wait.Wait{Op: "lock", Name: "l", Local: "l", Waiter: w, Gate: gate}, c, wait.Result[*hold]{Retry: time.Millisecond})
		until(t, "the call to wait for its gate", func() bool { return env.Stats.Asleep.Load() == 1 })
		if c.attempts != 0 {
			t.Fatalf("%d attempts before the gate, want none", c.attempts)
		}
		gate <- struct{}{}
		o := await(t, out)
		if o.err != nil || o.got != want {
			t.Fatalf("loop = %+v, want got %p", o, want)
		}
		<-c.ended
	})
	t.Run("passed", func(t *testing.T) {
		c := newCall(never)
		env := newEnv()
		w := wait.NewWaiter("o:1", true)
		out := run(context.Background(), env, wait.Wait{Op: "lock", Name: "l", Local: "l", Waiter: w, Gate: make(chan struct{})}, c, wait.Result[*hold]{Retry: time.Millisecond})
		var buf [1]*wait.Waiter
		var ws []*wait.Waiter
		until(t, "the call to wait for its gate", func() bool {
			ws = env.List.Claim("l", buf[:], nil)
			return len(ws) == 1
		})
		want := &hold{token: 2}
		env.List.Settle(ws, 0, want, false)
		o := await(t, out)
		if o.err != nil || o.got != want || c.attempts != 0 {
			t.Fatalf("loop = %+v after %d attempts, want got %p and none", o, c.attempts, want)
		}
		if queued := <-c.ended; queued {
			t.Fatal("a call passed what it waits for was ended as queued")
		}
	})
}
