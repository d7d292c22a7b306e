package watchdog

import (
	"errors"
	"testing"
	"time"
)

// TestBusy: Config.Busy is called when the watchdog goes from no entries
// to some, with the entry already counted, and not for further entries.
func TestBusy(t *testing.T) {
	var w *Watchdog
	var busy []int
	w = New(Config{Interval: time.Hour, Renew: (&renewer{calls: make(chan int, 10)}).renew, Busy: func() { busy = append(busy, w.Len()) }})
	defer w.Close(errors.New("closed"))
	a, b := &Entry{Key: "a", Lease: time.Hour}, &Entry{Key: "b", Lease: time.Hour}
	w.Add(a, DeadlineFor(w.Now(), a.Lease))
	w.Add(b, DeadlineFor(w.Now(), b.Lease))
	w.Remove(a)
	w.Remove(b)
	w.Add(a, DeadlineFor(w.Now(), a.Lease))
	if len(busy) != 2 || busy[0] != 1 || busy[1] != 1 {
		t.Fatalf("Busy saw %v, want [1 1]: once per start from no entries, with the entry counted", busy)
	}
}
