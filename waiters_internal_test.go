package relock

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/relock-go/relock/internal/layout"
	"github.com/relock-go/relock/internal/scripts"
)

// TestHandoffLeavesNoStaleOutcome: a release claims a waiter just as the
// waiter wakes for another reason, and tells it to attempt (the lock was
// not passed on) before the waiter marks itself awake. The waiter then
// attempts by itself; that outcome must not survive to be read as the
// outcome of the next release that claims it, which would let the waiter
// attempt while that release passes it the lock.
func TestHandoffLeavesNoStaleOutcome(t *testing.T) {
	var r waiters
	w := newWaiter("o:1", lockConfig{}, false)
	r.add("l", w)
	defer r.remove("l", w)

	var buf [1]*waiter
	r.sleep(w)
	if ws := r.claim("l", buf[:]); len(ws) != 1 || ws[0] != w {
		t.Fatalf("claim = %v, want the sleeping waiter %p", ws, w)
	}
	// The waiter has woken (a message, its timer) and is about to mark
	// itself awake when the release reports that it did not pass the lock.
	r.settle([]*waiter{w}, -1, nil, true)
	if !r.wake(w) {
		t.Fatal("waking an unclaimed waiter failed")
	}
	select {
	case l := <-w.handed:
		t.Fatalf("a stale outcome %v is left for the waiter's next sleep", l)
	default:
	}

	// The next release claims it and hands it a lease: the waiter finds
	// that outcome, and only that one.
	r.sleep(w)
	if ws := r.claim("l", buf[:]); len(ws) != 1 {
		t.Fatal("the waiter cannot be claimed again")
	}
	next := &Lease{field: w.owner}
	if !r.settle([]*waiter{w}, 0, next, false) {
		t.Fatal("handing a lease failed")
	}
	if l := <-w.handed; l != next {
		t.Fatalf("handed %v, want the lease", l)
	}
	if r.wake(w) {
		t.Fatal("a waiter handed a lease may wake to attempt")
	}
}

// TestWaiterGoneReleasesWhatItIsHanded: a waiter that returns while a
// release has claimed it is gone: settle reports that the lease was not
// delivered, and a lease handed just before it left is returned to the
// caller of remove to release.
func TestWaiterGoneReleasesWhatItIsHanded(t *testing.T) {
	var r waiters
	var buf [2]*waiter
	a, b := newWaiter("o:1", lockConfig{}, false), newWaiter("o:2", lockConfig{}, false)
	r.add("l", a)
	r.add("l", b)
	r.sleep(a)
	r.sleep(b)
	ws := r.claim("l", buf[:])
	if len(ws) != 2 || ws[0] != a {
		t.Fatalf("claim = %v, want both, oldest first", ws)
	}
	r.remove("l", a)
	if r.settle(ws, 0, &Lease{}, false) {
		t.Fatal("a lease was delivered to a waiter that has gone")
	}
	// b was not chosen and had not woken: it sleeps on, claimable again.
	got := r.claim("l", buf[:1])
	if len(got) != 1 || got[0] != b {
		t.Fatalf("claim after settle = %v, want the other waiter", got)
	}
	l := &Lease{}
	if !r.settle(got, 0, l, false) {
		t.Fatal("handing a lease failed")
	}
	if unwanted := r.remove("l", b); unwanted != l {
		t.Fatalf("remove returned %v, want the lease handed and not taken", unwanted)
	}
	if n := r.n.Load(); n != 0 {
		t.Fatalf("%d waiters left", n)
	}
}

// TestNewsWaitsForItsWaiter: a grant told to a call before it has added
// its waiter (it arrived between the reply to the attempt that queued the
// call and the call's sleep) reaches the waiter when it is added; news no
// waiter takes is dropped after mailLife.
func TestNewsWaitsForItsWaiter(t *testing.T) {
	var r waiters
	g := &grant{token: 7}
	r.tell("o:1", g, 0)
	w := newWaiter("o:1", lockConfig{}, false)
	r.add("l", w)
	defer r.remove("l", w)
	select {
	case <-w.news:
	default:
		t.Fatal("a waiter added after its grant came is not woken")
	}
	if got, _, _ := r.takeNews(w); got != g {
		t.Fatalf("took grant %v, want %v", got, g)
	}
	if len(r.mail) != 0 {
		t.Fatalf("%d news kept after the waiter took its own", len(r.mail))
	}

	r.tell("o:2", nil, time.Second) // its call returned: nobody takes it
	r.mail["o:2"].at = time.Now().Add(-2 * mailLife)
	r.pruned = time.Time{}
	r.tell("o:3", nil, time.Second)
	if _, kept := r.mail["o:2"]; kept || len(r.mail) != 1 {
		t.Fatalf("news kept: %v; want only the recent one", r.mail)
	}
}

// TestScriptConstants: what the scripts write in instead of taking as an
// argument matches the Go side.
func TestScriptConstants(t *testing.T) {
	for _, c := range []struct {
		s    *scripts.Script
		want string
	}{
		{scripts.Lock, fmt.Sprintf("local grant_ttl = %d\n", grantTTL.Milliseconds())},
		{scripts.Unlock, fmt.Sprintf("local grant_ttl = %d\n", grantTTL.Milliseconds())},
		{scripts.Unlock, fmt.Sprintf("local k = %d\n", chainBlock)},
		{scripts.RWWriteUnlock, fmt.Sprintf("local k = %d\n", chainBlock)},
		{scripts.RWReadUnlock, fmt.Sprintf("local k = %d\n", chainBlock)},
		{scripts.Unlock, fmt.Sprintf("local unlock_message = '%s'\n", msgUnlock)},
		{scripts.Abandon, fmt.Sprintf("redis.call(ARGV[3], ARGV[2], '%s')", msgUnlock)},
		{scripts.ForceUnlock, fmt.Sprintf("redis.call(ARGV[2], ARGV[1], '%s')", msgUnlock)},
		{scripts.FairUnlock, fmt.Sprintf("'fn', '', '%s')", msgUnlock)},
		{scripts.RWReadUnlock, fmt.Sprintf("free(queue, grantee, token, subs, '%s')", msgUnlock)},
		{scripts.RWWriteUnlock, fmt.Sprintf("free(queue, grantee, token, subs, '%s')", msgReadUnlock)},
		{scripts.RWWriteUnlock, fmt.Sprintf("announce('%s', queue)", msgReadUnlock)},
		{scripts.RWForceUnlock, fmt.Sprintf("redis.call(ARGV[2], ARGV[1], '%s')", msgReadUnlock)},
		{scripts.Lock, fmt.Sprintf("local token_field = '%s'\n", layout.TokenField)},
		{scripts.Lock, fmt.Sprintf("local since_field = '%s'\n", layout.SinceField)},
		{scripts.Lock, fmt.Sprintf("local queued_field = '%s'\n", layout.QueuedField)},
		{scripts.Unlock, fmt.Sprintf("local queued_field = '%s'\n", layout.QueuedField)},
	} {
		if !strings.Contains(c.s.Source(), c.want) {
			t.Errorf("%s.lua lacks %q", c.s.Name(), c.want)
		}
	}
}
