package watchdog

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// renewer answers every entry with the result set for its key.
type renewer struct {
	mu     sync.Mutex
	result map[string]Result
	rounds int
	calls  chan int // receives the batch size of each round
	block  chan struct{}
}

func (r *renewer) renew(ctx context.Context, batch []*Entry) []Result {
	if r.block != nil {
		select {
		case <-r.block:
		case <-ctx.Done():
			return make([]Result, len(batch))
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.rounds++
	out := make([]Result, len(batch))
	for i, e := range batch {
		out[i] = r.result[e.Key]
	}
	if r.calls != nil {
		select {
		case r.calls <- len(batch):
		default:
		}
	}
	return out
}

// lostData is the Config.Lost of the tests: entries carry a func(error).
func lostData(e *Entry, err error) { e.Data.(func(error))(err) }

func lostChan() (func(error), chan error) {
	ch := make(chan error, 1)
	return func(err error) { ch <- err }, ch
}

func TestRenewedHoldOutlivesItsLease(t *testing.T) {
	r := &renewer{result: map[string]Result{"a": Held}, calls: make(chan int, 100)}
	w := New(Config{Interval: 20 * time.Millisecond, Renew: r.renew, Lost: lostData})
	defer w.Close(errors.New("closed"))
	lost, ch := lostChan()
	e := &Entry{Key: "a", Lease: 60 * time.Millisecond, Data: lost}
	w.Add(e, DeadlineFor(w.Now(), e.Lease))
	for i := 0; i < 10; i++ { // ten rounds: 200ms, over three leases
		select {
		case <-r.calls:
		case err := <-ch:
			t.Fatalf("lost after %d rounds: %v", i, err)
		}
	}
	if w.Check(e) {
		t.Fatal("Check reports a renewed hold lost")
	}
}

func TestGoneHoldIsLost(t *testing.T) {
	r := &renewer{result: map[string]Result{"a": Gone}}
	w := New(Config{Interval: 10 * time.Millisecond, Renew: r.renew, Lost: lostData})
	defer w.Close(errors.New("closed"))
	lost, ch := lostChan()
	e := &Entry{Key: "a", Lease: time.Hour, Data: lost}
	w.Add(e, DeadlineFor(w.Now(), e.Lease))
	if err := <-ch; !errors.Is(err, ErrGone) {
		t.Fatalf("lost with %v, want ErrGone", err)
	}
	if w.Len() != 0 {
		t.Fatalf("Len = %d after loss", w.Len())
	}
}

func TestUnansweredRenewalLosesAtDeadline(t *testing.T) {
	r := &renewer{block: make(chan struct{})} // renewals never answer
	w := New(Config{Interval: 10 * time.Millisecond, Renew: r.renew, Lost: lostData})
	defer w.Close(errors.New("closed"))
	lost, ch := lostChan()
	lease := 50 * time.Millisecond
	e := &Entry{Key: "a", Lease: lease, Data: lost}
	sent := w.Now()
	w.Add(e, DeadlineFor(sent, lease))
	err := <-ch
	if !errors.Is(err, ErrDeadline) {
		t.Fatalf("lost with %v, want ErrDeadline", err)
	}
	if at := w.Now(); at < DeadlineFor(sent, lease) {
		t.Fatalf("lost %v before its deadline", time.Duration(DeadlineFor(sent, lease)-at))
	}
}

func TestCheckJudgesDeadlineItself(t *testing.T) {
	// An interval far longer than the lease: only Check can see the loss.
	w := New(Config{Interval: time.Hour, Renew: (&renewer{}).renew, Lost: lostData})
	defer w.Close(errors.New("closed"))
	lost, ch := lostChan()
	e := &Entry{Key: "a", Lease: time.Hour, Data: lost}
	w.Add(e, w.Now()-1) // already past
	if !w.Check(e) {
		t.Fatal("Check did not see a passed deadline")
	}
	if err := <-ch; !errors.Is(err, ErrDeadline) {
		t.Fatalf("lost with %v", err)
	}
	if w.Remove(e) {
		t.Fatal("Remove of a lost entry reports it watched")
	}
}

func TestShortEntryWakesTheLoop(t *testing.T) {
	w := New(Config{Interval: time.Hour, Renew: (&renewer{}).renew, Lost: lostData})
	defer w.Close(errors.New("closed"))
	lost, ch := lostChan()
	e := &Entry{Key: "a", Data: lost}
	w.Add(e, w.Now()+int64(20*time.Millisecond))
	if err := <-ch; !errors.Is(err, ErrDeadline) {
		t.Fatalf("lost with %v", err)
	}
}

func TestRemoveAndClose(t *testing.T) {
	w := New(Config{Interval: time.Hour, Renew: (&renewer{}).renew, Lost: lostData})
	lostA, chA := lostChan()
	lostB, chB := lostChan()
	a := &Entry{Key: "a", Lease: time.Hour, Data: lostA}
	b := &Entry{Key: "b", Lease: time.Hour, Data: lostB}
	w.Add(a, w.Now()+int64(time.Hour))
	w.Add(b, w.Now()+int64(time.Hour))
	if !w.Remove(a) {
		t.Fatal("Remove of a watched entry reports it unwatched")
	}
	closed := errors.New("closed")
	w.Close(closed)
	if err := <-chB; err != closed {
		t.Fatalf("Close lost b with %v", err)
	}
	select {
	case err := <-chA:
		t.Fatalf("removed entry lost with %v", err)
	default:
	}
}

func TestBatchHoldsEveryEntry(t *testing.T) {
	r := &renewer{result: map[string]Result{}, calls: make(chan int, 10)}
	w := New(Config{Interval: 10 * time.Millisecond, Renew: r.renew, Lost: lostData})
	defer w.Close(errors.New("closed"))
	for i := 0; i < 100; i++ {
		key := string(rune('a'+i%26)) + string(rune('0'+i/26))
		r.mu.Lock()
		r.result[key] = Held
		r.mu.Unlock()
		w.Add(&Entry{Key: key, Lease: time.Hour, Data: func(error) {}}, w.Now()+int64(time.Hour))
	}
	for n := range r.calls {
		if n == 100 {
			return // one call carried all hundred holds
		}
	}
}

// TestConfirm: a confirmation due renews its entry to the lease it names,
// outside the rounds, and moves the entry's deadline; one whose entry was
// removed before it was due is dropped unsent.
func TestConfirm(t *testing.T) {
	r := &renewer{result: map[string]Result{"a": Held, "b": Held}, calls: make(chan int, 10)}
	w := New(Config{Interval: time.Hour, Renew: r.renew, Lost: lostData})
	defer w.Close(errors.New("closed"))
	lost, _ := lostChan()
	a := &Entry{Key: "a", Data: lost} // a fixed lease: checked, never extended by rounds
	w.Add(a, DeadlineFor(w.Now(), time.Second))
	before := a.Deadline()
	b := &Entry{Key: "b", Data: lost}
	w.Add(b, DeadlineFor(w.Now(), time.Second))
	w.Confirm(b, time.Minute, 0)
	if n := <-r.calls; n != 1 {
		t.Fatalf("confirmation round of %d entries, want 1", n)
	}
	w.Remove(b)
	w.Confirm(a, time.Minute, 10*time.Millisecond)
	if n := <-r.calls; n != 1 {
		t.Fatalf("confirmation round of %d entries, want 1", n)
	}
	deadline := time.Now().Add(5 * time.Second)
	for a.Deadline() == before {
		if time.Now().After(deadline) {
			t.Fatal("a confirmed entry's deadline did not move")
		}
		time.Sleep(time.Millisecond)
	}
	if got := time.Duration(a.Deadline() - w.Now()); got < 30*time.Second {
		t.Fatalf("deadline %v ahead, want about the confirmed minute", got)
	}
	c := &Entry{Key: "c", Data: lost}
	w.Add(c, DeadlineFor(w.Now(), time.Second))
	w.Confirm(c, time.Minute, 50*time.Millisecond)
	w.Remove(c)
	select {
	case n := <-r.calls:
		t.Fatalf("a round of %d entries for a removed entry's confirmation", n)
	case <-time.After(200 * time.Millisecond):
	}
}

// TestUnconfirmed: an entry added unconfirmed is in no renewal (a renewal
// would find it gone) and not verified, yet lost at its deadline; once
// confirmed it is renewed with the others.
func TestUnconfirmed(t *testing.T) {
	r := &renewer{result: map[string]Result{"a": Gone, "b": Held}, calls: make(chan int, 100)}
	w := New(Config{Interval: 10 * time.Millisecond, Renew: r.renew, Lost: lostData})
	defer w.Close(errors.New("closed"))
	lostA, chA := lostChan()
	a := &Entry{Key: "a", Lease: time.Hour, Data: lostA}
	w.AddUnconfirmed(a, DeadlineFor(w.Now(), time.Hour))
	lostB, chB := lostChan()
	b := &Entry{Key: "b", Lease: time.Hour, Data: lostB}
	w.Add(b, DeadlineFor(w.Now(), b.Lease))
	for i := 0; i < 5; i++ {
		if n := <-r.calls; n != 1 {
			t.Fatalf("a round renewed %d entries, want only the confirmed one", n)
		}
	}
	if res := w.Verify(context.Background(), a); res != Unknown {
		t.Fatalf("Verify of an unconfirmed entry = %v, want Unknown", res)
	}
	select {
	case err := <-chA:
		t.Fatalf("the unconfirmed entry was lost: %v", err)
	default:
	}
	w.Confirmed(a, DeadlineFor(w.Now(), time.Hour))
	if err := <-chA; !errors.Is(err, ErrGone) { // renewed now, and found gone
		t.Fatalf("the confirmed entry lost with %v, want ErrGone", err)
	}

	lostC, chC := lostChan()
	c := &Entry{Key: "c", Lease: time.Hour, Data: lostC}
	w.AddUnconfirmed(c, DeadlineFor(w.Now(), 30*time.Millisecond))
	if err := <-chC; !errors.Is(err, ErrDeadline) {
		t.Fatalf("an unconfirmed entry past its deadline lost with %v, want ErrDeadline", err)
	}
	select {
	case err := <-chB:
		t.Fatalf("the confirmed entry was lost: %v", err)
	default:
	}
}

// TestGoneCrossingChange: a renewal that finds a hold gone while its
// holder is changing it (a release on its way) does not lose it, and
// its deadline stands; once the change is over, a renewal sent after it
// that finds the hold gone loses it.
func TestGoneCrossingChange(t *testing.T) {
	r := &renewer{result: map[string]Result{"a": Gone}}
	w := New(Config{Interval: time.Hour, Renew: r.renew, Lost: lostData})
	defer w.Close(errors.New("closed"))
	lost, ch := lostChan()
	e := &Entry{Key: "a", Lease: time.Hour, Data: lost}
	w.Add(e, DeadlineFor(w.Now(), e.Lease))
	before := e.Deadline()
	w.Changing(e)
	if res := w.Verify(context.Background(), e); res != Gone {
		t.Fatalf("Verify = %v, want Gone", res)
	}
	select {
	case err := <-ch:
		t.Fatalf("lost while its holder changed it: %v", err)
	default:
	}
	if w.Len() != 1 || e.Ended() || e.Deadline() != before {
		t.Fatalf("after a dropped finding: Len %d, ended %v, deadline moved %v", w.Len(), e.Ended(), e.Deadline() != before)
	}
	w.Changed(e)
	w.Verify(context.Background(), e)
	if err := <-ch; !errors.Is(err, ErrGone) {
		t.Fatalf("lost with %v, want ErrGone", err)
	}
}

// TestGoneBeforeRetaken: a round sent before the hold was taken again by
// its owner (Retaken) that finds it gone does not lose it; the next round
// does.
func TestGoneBeforeRetaken(t *testing.T) {
	var mu sync.Mutex
	rounds := 0
	started := make(chan struct{}, 1)
	answer := make(chan struct{})
	renew := func(ctx context.Context, batch []*Entry) []Result {
		select {
		case started <- struct{}{}:
		default:
		}
		<-answer
		mu.Lock()
		rounds++
		mu.Unlock()
		out := make([]Result, len(batch))
		for i := range out {
			out[i] = Gone
		}
		return out
	}
	lostIn := make(chan int, 1)
	w := New(Config{Interval: 10 * time.Millisecond, Renew: renew, Lost: func(e *Entry, err error) {
		mu.Lock()
		lostIn <- rounds
		mu.Unlock()
	}})
	defer w.Close(errors.New("closed"))
	e := &Entry{Key: "a", Lease: time.Hour}
	w.Add(e, DeadlineFor(w.Now(), e.Lease))
	<-started // the first round is on its way
	w.Retaken(e)
	close(answer)
	if n := <-lostIn; n < 2 {
		t.Fatalf("lost by round %d, sent before the hold was taken again", n)
	}
}
