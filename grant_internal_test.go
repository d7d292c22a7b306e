package relock

import "testing"

// TestHandoffLeavesNoStaleOutcome: a release claims a waiter just as the
// waiter wakes for another reason, and hands it nil (the lock was not
// passed on) before the waiter marks itself awake. The waiter then
// attempts by itself; the nil must not survive to be read as the outcome
// of the next release that claims it, which would let the waiter attempt
// while that release passes it the lock.
func TestHandoffLeavesNoStaleOutcome(t *testing.T) {
	c := &Client{local: make(map[string][]*localWaiter), byOwner: make(map[string]*localWaiter)}
	w := &localWaiter{owner: "o:1", handed: make(chan *Lease, 1)}
	c.enqueue("l", w)
	defer c.unregister("l", w)

	c.sleep(w, true)
	if got := c.claim("l"); got != w {
		t.Fatalf("claim = %p, want the sleeping waiter %p", got, w)
	}
	// The waiter has woken (a message, its timer) and is about to mark
	// itself awake when the release reports that it did not pass the lock.
	if !c.deliver(w, nil) {
		t.Fatal("deliver to a registered waiter failed")
	}
	if !c.sleep(w, false) {
		t.Fatal("waking an unclaimed waiter failed")
	}
	select {
	case l := <-w.handed:
		t.Fatalf("a stale outcome %v is left for the waiter's next sleep", l)
	default:
	}

	// The next release claims it and hands it a lease: the waiter finds
	// that outcome, and only that one.
	c.sleep(w, true)
	if got := c.claim("l"); got != w {
		t.Fatal("the waiter cannot be claimed again")
	}
	next := &Lease{owner: w.owner}
	if !c.deliver(w, next) {
		t.Fatal("deliver of a lease failed")
	}
	if l := <-w.handed; l != next {
		t.Fatalf("handed %v, want the lease", l)
	}
	if c.sleep(w, false) {
		t.Fatal("a waiter handed a lease may wake to attempt")
	}
}
