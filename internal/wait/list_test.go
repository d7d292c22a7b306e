package wait

import (
	"testing"
	"time"
)

// lease stands for what a release passes.
type lease struct{ _ int }

// TestHandoffLeavesNoStaleOutcome: a release claims a waiter just as the
// waiter wakes for another reason, and tells it to attempt (the lock was
// not passed on) before the waiter marks itself awake. The waiter then
// attempts by itself; that outcome must not survive to be read as the
// outcome of the next release that claims it, which would let the waiter
// attempt while that release passes it the lock.
func TestHandoffLeavesNoStaleOutcome(t *testing.T) {
	var r List
	w := NewWaiter("o:1", true)
	r.add("l", w)
	defer r.remove("l", w)

	var buf [1]*Waiter
	r.sleep(w)
	if ws := r.Claim("l", buf[:], nil); len(ws) != 1 || ws[0] != w {
		t.Fatalf("claim = %v, want the sleeping waiter %p", ws, w)
	}
	// The waiter has woken (a message, its timer) and is about to mark
	// itself awake when the release reports that it did not pass the lock.
	r.Settle([]*Waiter{w}, -1, nil, true)
	if !r.rise(w) {
		t.Fatal("waking an unclaimed waiter failed")
	}
	select {
	case l := <-w.outcome:
		t.Fatalf("a stale outcome %v is left for the waiter's next sleep", l)
	default:
	}

	// The next release claims it and hands it a lease: the waiter finds
	// that outcome, and only that one.
	r.sleep(w)
	if ws := r.Claim("l", buf[:], nil); len(ws) != 1 {
		t.Fatal("the waiter cannot be claimed again")
	}
	next := &lease{}
	if !r.Settle([]*Waiter{w}, 0, next, false) {
		t.Fatal("handing a lease failed")
	}
	if l := <-w.outcome; l != next {
		t.Fatalf("handed %v, want the lease", l)
	}
	if r.rise(w) {
		t.Fatal("a waiter handed a lease may wake to attempt")
	}
}

// TestWaiterGoneReleasesWhatItIsHanded: a waiter that returns while a
// release has claimed it is gone: settle reports that the lease was not
// delivered, and a lease handed just before it left is returned to the
// caller of remove to release.
func TestWaiterGoneReleasesWhatItIsHanded(t *testing.T) {
	var r List
	var buf [2]*Waiter
	a, b := NewWaiter("o:1", true), NewWaiter("o:2", true)
	r.add("l", a)
	r.add("l", b)
	r.sleep(a)
	r.sleep(b)
	ws := r.Claim("l", buf[:], nil)
	if len(ws) != 2 || ws[0] != a {
		t.Fatalf("claim = %v, want both, oldest first", ws)
	}
	r.remove("l", a)
	if r.Settle(ws, 0, &lease{}, false) {
		t.Fatal("a lease was delivered to a waiter that has gone")
	}
	// b was not chosen and had not woken: it sleeps on, claimable again.
	got := r.Claim("l", buf[:1], nil)
	if len(got) != 1 || got[0] != b {
		t.Fatalf("claim after settle = %v, want the other waiter", got)
	}
	l := &lease{}
	if !r.Settle(got, 0, l, false) {
		t.Fatal("handing a lease failed")
	}
	if unwanted := r.remove("l", b); unwanted != l {
		t.Fatalf("remove returned %v, want the lease handed and not taken", unwanted)
	}
	if n := r.Len(); n != 0 {
		t.Fatalf("%d waiters left", n)
	}
}

// TestNewsWaitsForItsWaiter: a grant told to a call before it has added
// its waiter (it arrived between the reply to the attempt that queued the
// call and the call's sleep) reaches the waiter when it is added; news no
// waiter takes is dropped after mailLife.
func TestNewsWaitsForItsWaiter(t *testing.T) {
	var r List
	g := &Grant{Token: 7}
	r.Grant("o:1", g)
	w := NewWaiter("o:1", true)
	r.add("l", w)
	defer r.remove("l", w)
	select {
	case <-w.news:
	default:
		t.Fatal("a waiter added after its grant came is not woken")
	}
	if got, _, _ := r.news(w); got != g {
		t.Fatalf("took grant %v, want %v", got, g)
	}
	if len(r.mail) != 0 {
		t.Fatalf("%d news kept after the waiter took its own", len(r.mail))
	}

	r.Wake("o:2", time.Second) // its call returned: nobody takes it
	r.mail["o:2"].at = time.Now().Add(-2 * mailLife)
	r.pruned = time.Time{}
	r.Wake("o:3", time.Second)
	if _, kept := r.mail["o:2"]; kept || len(r.mail) != 1 {
		t.Fatalf("news kept: %v; want only the recent one", r.mail)
	}
}

// TestQuietUntilTurned: a waiter that waits for its turn is quiet: a
// fellow call's wake passes it by, and news for its owner is kept, not
// given. Once it has its turn (turned) the news reaches it, and it joins
// its Client's run when the run's holder is joinable.
func TestQuietUntilTurned(t *testing.T) {
	var r List
	w := NewWaiter("o:1", true)
	w.quiet = true
	r.add("l", w)
	defer r.remove("l", w)
	other := NewWaiter("o:2", true)
	r.add("l", other)
	defer r.remove("l", other)

	r.wakeOther("l", other, 0)
	r.Wake("o:1", 0)
	select {
	case <-w.news:
		t.Fatal("a quiet waiter was woken")
	default:
	}

	holder := &lease{}
	r.SetRun("l", holder)
	if in := r.turned("l", w, func(h Hold) bool { return h == holder }); !in {
		t.Fatal("a waiter with its turn did not join the joinable run")
	}
	select {
	case <-w.news:
	default:
		t.Fatal("the news kept for the owner did not reach its waiter once it had its turn")
	}
	if _, _, now := r.news(w); !now {
		t.Fatal("the kept wake was lost")
	}
	r.EndRun("l", holder)
	if _, _, now := r.news(w); !now {
		t.Fatal("the end of the run did not wake the waiter that joined it")
	}
}
