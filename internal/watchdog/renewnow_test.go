package watchdog

import (
	"errors"
	"testing"
	"time"
)

// TestRenewOutOfTurn: RenewKey renews at once the entries of its key only,
// and a renewal that finds them gone loses them; RenewAll renews every
// entry at once. The periodic rounds are an hour apart, so only the
// out-of-turn renewals can run within the test.
func TestRenewOutOfTurn(t *testing.T) {
	r := &renewer{result: map[string]Result{"a": Gone, "b": Held}, calls: make(chan int, 10)}
	w := New(Config{Interval: time.Hour, Renew: r.renew, Lost: lostData})
	defer w.Close(errors.New("closed"))
	lostA, chA := lostChan()
	lostB, chB := lostChan()
	a := &Entry{Key: "a", Lease: 2 * time.Hour, Data: lostA}
	b := &Entry{Key: "b", Lease: 2 * time.Hour, Data: lostB}
	w.Add(a, DeadlineFor(w.Now(), a.Lease))
	w.Add(b, DeadlineFor(w.Now(), b.Lease))

	w.RenewKey("a")
	select {
	case n := <-r.calls:
		if n != 1 {
			t.Fatalf("RenewKey renewed %d entries, want the key's 1", n)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("RenewKey renewed nothing")
	}
	select {
	case err := <-chA:
		if !errors.Is(err, ErrGone) {
			t.Fatalf("lost with %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the entry found gone was not lost")
	}

	r.mu.Lock()
	r.result["b"] = Gone
	r.mu.Unlock()
	w.RenewAll()
	select {
	case err := <-chB:
		if !errors.Is(err, ErrGone) {
			t.Fatalf("lost with %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("RenewAll did not renew every entry")
	}
}
