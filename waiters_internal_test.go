package relock

import "testing"

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
	if claimed, _ := r.remove("l", a); !claimed {
		t.Fatal("remove did not report the claim")
	}
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
	if _, unwanted := r.remove("l", b); unwanted != l {
		t.Fatalf("remove returned %v, want the lease handed and not taken", unwanted)
	}
	if n := r.n.Load(); n != 0 {
		t.Fatalf("%d waiters left", n)
	}
}
