package relock_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/testkit"
)

// crossing is a go-redis hook that makes one watchdog renewal of a hold
// cross one release of it on the wire, as it may when the two are sent
// at once: the renewal waits until the release has run on the server, so
// that it finds the hold gone, and the release's reply waits until the
// renewal has been answered and then for afterRelease (the Client has
// judged the renewal's answer by then), so that Unlock learns its outcome
// last. Only script calls naming name in their arguments count; the first
// renewal after arm is held, and the first other script call after that
// is the release. A call the server refuses with NOSCRIPT has not run:
// its retry by EVAL takes its place.
type crossing struct {
	name         string
	afterRelease func() // run before the release's reply is returned
	afterRenewal func() // run before the renewal's reply is returned

	renewal   atomic.Int32  // 1 armed, 2 held back, 3 answered
	releasing atomic.Bool   // the next other script call is the release
	held      chan struct{} // closed once a renewal is held back
	ran       chan struct{} // closed once the release has run
	renewed   chan struct{} // closed once the held renewal has been answered
}

func newCrossing(name string) *crossing {
	return &crossing{name: name, held: make(chan struct{}), ran: make(chan struct{}), renewed: make(chan struct{})}
}

// arm holds back the next renewal.
func (x *crossing) arm() { x.renewal.Store(1) }

// renewalScripts are the watchdog's renewal scripts.
var renewalScripts = []string{"renew.lua", "rw_renew.lua", "permit_renew.lua"}

// kind tells whether cmd is a script call naming x.name, and whether it
// is a renewal.
func (x *crossing) kind(cmd redis.Cmder) (script, renewal bool) {
	args := cmd.Args()
	if len(args) < 3 {
		return false, false
	}
	op, body := strings.ToLower(fmt.Sprint(args[0])), fmt.Sprint(args[1])
	if op != "evalsha" && op != "eval" {
		return false, false
	}
	for _, a := range args[3:] {
		if s, ok := a.(string); ok && strings.Contains(s, x.name) {
			script = true
		}
	}
	for _, f := range renewalScripts {
		if op == "evalsha" && body == testkit.ScriptSHA(f) || op == "eval" && strings.HasPrefix(body, "-- "+f) {
			renewal = true
		}
	}
	return script, script && renewal
}

// unrun reports whether the server refused the calls with NOSCRIPT: err
// is what the hook's next returned (a single command's own error is set
// only after the hooks).
func unrun(cmds []redis.Cmder, err error) bool {
	if err != nil && strings.HasPrefix(err.Error(), "NOSCRIPT") {
		return true
	}
	for _, cmd := range cmds {
		if err := cmd.Err(); err != nil && strings.HasPrefix(err.Error(), "NOSCRIPT") {
			return true
		}
	}
	return false
}

// wait waits for ch, failing rather than hanging if it never closes.
func wait(ch <-chan struct{}) {
	select {
	case <-ch:
	case <-time.After(5 * time.Second):
	}
}

func (x *crossing) process(cmds []redis.Cmder, next func() error) error {
	renewal, release := false, false
	for _, cmd := range cmds {
		script, isRenewal := x.kind(cmd)
		renewal = renewal || isRenewal
		release = release || script && !isRenewal
	}
	switch {
	case renewal && x.renewal.CompareAndSwap(1, 2):
		x.releasing.Store(true)
		close(x.held)
		fallthrough
	case renewal && x.renewal.Load() == 2:
		wait(x.ran)
		err := next()
		if unrun(cmds, err) {
			return err
		}
		x.renewal.Store(3)
		close(x.renewed)
		if x.afterRenewal != nil {
			x.afterRenewal()
		}
		return err
	case release && x.releasing.Load():
		err := next()
		if unrun(cmds, err) || !x.releasing.CompareAndSwap(true, false) {
			return err
		}
		close(x.ran)
		wait(x.renewed)
		if x.afterRelease != nil {
			x.afterRelease()
		}
		return err
	}
	return next()
}

func (x *crossing) DialHook(next redis.DialHook) redis.DialHook { return next }

func (x *crossing) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		return x.process([]redis.Cmder{cmd}, func() error { return next(ctx, cmd) })
	}
}

func (x *crossing) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		return x.process(cmds, func() error { return next(ctx, cmds) })
	}
}

// hold is a hold the tests end: a Lease or a Permit.
type hold interface {
	Done() <-chan struct{}
	Err() error
}

// judged waits until h has ended or a bound has passed: a Client judges a
// renewal's answer within moments.
func judged(h hold) {
	select {
	case <-h.Done():
	case <-time.After(200 * time.Millisecond):
	}
}

// TestReleaseCrossesRenewal: a watchdog renewal that reaches Redis just
// after the hold's own release, and so finds it gone, does not count the
// hold lost: Unlock (or Release) returns nil, Err says ErrReleased, and
// Stats.Lost stays 0. The reentrant case is a Mutex held by a WithOwner
// context, whose leases share one watched hold.
func TestReleaseCrossesRenewal(t *testing.T) {
	type kind struct {
		name string
		take func(ctx context.Context, c *relock.Client, name string) (hold, func(context.Context) error, error)
	}
	lease := func(l *relock.Lease, err error) (hold, func(context.Context) error, error) {
		if err != nil {
			return nil, nil, err
		}
		return l, l.Unlock, nil
	}
	kinds := []kind{
		{"Mutex", func(ctx context.Context, c *relock.Client, n string) (hold, func(context.Context) error, error) {
			return lease(c.Mutex(n).Lock(ctx))
		}},
		{"Mutex reentrant", func(ctx context.Context, c *relock.Client, n string) (hold, func(context.Context) error, error) {
			return lease(c.Mutex(n).Lock(relock.WithOwner(ctx)))
		}},
		{"FairMutex", func(ctx context.Context, c *relock.Client, n string) (hold, func(context.Context) error, error) {
			return lease(c.FairMutex(n).Lock(ctx))
		}},
		{"RWMutex write", func(ctx context.Context, c *relock.Client, n string) (hold, func(context.Context) error, error) {
			return lease(c.RWMutex(n).Lock(ctx))
		}},
		{"RWMutex read", func(ctx context.Context, c *relock.Client, n string) (hold, func(context.Context) error, error) {
			return lease(c.RWMutex(n).RLock(ctx))
		}},
		{"Permit", func(ctx context.Context, c *relock.Client, n string) (hold, func(context.Context) error, error) {
			ps := c.PermitSemaphore(n)
			if _, err := ps.TrySetPermits(ctx, 1); err != nil {
				return nil, nil, err
			}
			p, err := ps.Acquire(ctx)
			if err != nil {
				return nil, nil, err
			}
			return p, p.Release, nil
		}},
	}
	for _, k := range kinds {
		t.Run(k.name, func(t *testing.T) {
			t.Parallel()
			ctx := testkit.CtxTimeout(t, 20*time.Second)
			name := testkit.LockName(t)
			rdb := testkit.CloseLater(t, testkit.Standalone.Client())
			x := newCrossing(name)
			rdb.AddHook(x)
			c := testkit.NewClient(t, rdb, relock.WithWatchdogTimeout(time.Second))
			h, release, err := k.take(ctx, c, name)
			if err != nil {
				t.Fatal(err)
			}
			x.afterRelease = func() { judged(h) }
			x.arm()
			select {
			case <-x.held:
			case <-ctx.Done():
				t.Fatal("no renewal of the hold")
			}
			if err := release(ctx); err != nil {
				t.Fatalf("release: %v", err)
			}
			if err := h.Err(); !errors.Is(err, relock.ErrReleased) {
				t.Errorf("Err after a release that returned nil = %v, want ErrReleased", err)
			}
			if s := c.Stats(); s.Lost != 0 {
				t.Errorf("Stats.Lost = %d, want 0", s.Lost)
			}
		})
	}
}

// TestReentryCrossesRenewal: a reentrant owner's last hold is released
// while another Lock call of the owner takes the lock afresh, and a
// renewal of the owner's hold reaches Redis between the two, finding it
// gone. The new lease joins the owner's watched hold before the release
// has left it; the renewal's answer, judged after both, speaks of the
// hold before the new lease and must not end it.
func TestReentryCrossesRenewal(t *testing.T) {
	ctx := testkit.CtxTimeout(t, 20*time.Second)
	owner := relock.WithOwner(ctx)
	name := testkit.LockName(t)
	rdb := testkit.CloseLater(t, testkit.Standalone.Client())
	x := newCrossing(name)
	rdb.AddHook(x)
	c := testkit.NewClient(t, rdb, relock.WithWatchdogTimeout(time.Second))
	m := c.Mutex(name)
	first, err := m.Lock(owner)
	if err != nil {
		t.Fatal(err)
	}
	var second *relock.Lease
	var secondErr error
	x.afterRelease = func() { second, secondErr = m.Lock(owner) }
	unlocked := make(chan struct{})
	x.afterRenewal = func() { <-unlocked }
	x.arm()
	select {
	case <-x.held:
	case <-ctx.Done():
		t.Fatal("no renewal of the hold")
	}
	err = first.Unlock(ctx)
	close(unlocked)
	if err != nil {
		t.Fatalf("Unlock: %v", err)
	}
	if secondErr != nil {
		t.Fatalf("second Lock: %v", secondErr)
	}
	judged(second)
	if err := second.Err(); err != nil {
		t.Errorf("Err of a lease taken after the renewal reached Redis = %v, want nil", err)
	}
	if err := first.Err(); !errors.Is(err, relock.ErrReleased) {
		t.Errorf("Err after an Unlock that returned nil = %v, want ErrReleased", err)
	}
	if s := c.Stats(); s.Lost != 0 {
		t.Errorf("Stats.Lost = %d, want 0", s.Lost)
	}
	if held, err := m.IsLocked(ctx); err != nil || !held {
		t.Fatalf("IsLocked = %v, %v with the second lease held", held, err)
	}
	if err := second.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}
