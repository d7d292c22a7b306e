package history

import (
	"fmt"
	"sync"
	"testing"
)

func TestCountedWithinCapacity(t *testing.T) {
	r := New()
	a := r.BeginCounted("w1", "s", 2)
	b := r.BeginCounted("w2", "s", 2) // two of two permits
	a.End()
	c := r.BeginCounted("w3", "s", 2) // a's permit
	b.End()
	c.End()
	if v := r.Check(); len(v) != 0 {
		t.Fatalf("Check() = %v, want none: never more than two holds at once", v)
	}
	s := r.Summary()
	if s.Holds != 3 || s.Counted != 3 || s.Shared != 0 || s.Handoffs != 0 {
		t.Fatalf("Summary() = %+v, want 3 counted holds and no handoffs", s)
	}
	if ns := s.Names[0]; ns.Capacity != 2 || ns.LastToken != 0 || ns.Holds != 3 || ns.Peak != 2 || s.Peak != 2 {
		t.Errorf("summary of s = %+v, want capacity 2, no token, two holds at once at most", ns)
	}
	if info := c.Info(); info.Capacity != 2 || info.Token != 0 || info.Shared {
		t.Errorf("Info() = %+v, want a counted hold of capacity 2", info)
	}
}

func TestCountedOverCapacityLive(t *testing.T) {
	r := New()
	a := r.BeginCounted("w1", "s", 2)
	b := r.BeginCounted("w2", "s", 2)
	c := r.BeginCounted("w3", "s", 2) // a and b still hold both permits
	for _, h := range []*Hold{a, b, c} {
		h.End()
	}
	v := r.Check()
	if len(v) != 1 || v[0].Kind != KindOverCapacity || v[0].Name != "s" {
		t.Fatalf("Check() = %v, want one over-capacity on s", v)
	}
	if v[0].B.Who != "w3" || v[0].A.Who != "w1" || len(v[0].With) != 2 || v[0].With[1].Who != "w2" {
		t.Errorf("over-capacity %+v, want w3 over w1 and w2", v[0])
	}
	// Checking again, with the sweep, reports the over-grant once.
	if v := r.Check(); len(v) != 1 {
		t.Errorf("second Check() = %v, want the same single over-capacity", v)
	}
}

func TestCountedCapacityOne(t *testing.T) {
	// A semaphore of one permit is a mutex without tokens.
	r := New()
	a := r.BeginCounted("w1", "s", 1)
	r.BeginCounted("w2", "s", 1).End()
	a.End()
	r.BeginCounted("w3", "s", 1).End()
	v := r.Check()
	if len(v) != 1 || v[0].Kind != KindOverCapacity || v[0].B.Who != "w2" {
		t.Fatalf("Check() = %v, want one over-capacity by w2", v)
	}
}

func TestCountedSweep(t *testing.T) {
	// Holds recorded one after the other, whose intervals are then made
	// to intersect as if their timestamps came from elsewhere: the sweep
	// finds a third hold beginning while two were in progress, and only
	// that.
	tests := []struct {
		name string
		ends []int // which earlier holds to stretch past the third's Begin
		want int
	}{
		{"two of two", []int{1}, 0},
		{"three of two", []int{0, 1}, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := New()
			var hs []*Hold
			for i := range 3 {
				h := r.BeginCounted(fmt.Sprint("w", i), "s", 2)
				h.End()
				after(r)
				hs = append(hs, h)
			}
			r.mu.Lock()
			for _, i := range tt.ends {
				hs[i].info.End = hs[2].info.Begin + 1
			}
			r.mu.Unlock()
			v := r.Check()
			if len(v) != tt.want || Count(v, KindOverCapacity) != tt.want {
				t.Fatalf("Check() = %v, want %d over-capacity", v, tt.want)
			}
		})
	}
}

func TestCountedOutlived(t *testing.T) {
	r := New()
	a := r.BeginCounted("w1", "s", 2)
	b := r.BeginCounted("w2", "s", 2)
	a.Signal()
	after(r)
	c := r.BeginCounted("w3", "s", 2) // a was told, yet still works
	a.End()
	b.End()
	c.End()
	v := r.Check()
	if len(v) != 1 || v[0].Kind != KindOutlived || v[0].A.Who != "w1" || v[0].B.Who != "w3" {
		t.Fatalf("Check() = %v, want one outlived-loss of w1, no over-capacity", v)
	}
	if s := r.Summary(); s.LossBeforeNext != 1 || s.LossAfterNext != 0 {
		t.Errorf("Summary() = %+v, want one loss signalled before the next hold", s)
	}
}

func TestCountedOverCapacityAndOutlived(t *testing.T) {
	// A hold told of its loss goes on while two that were not hold both
	// permits: the fourth hold is an over-grant, and the told one
	// outlived its loss.
	r := New()
	a := r.BeginCounted("w1", "s", 2)
	a.Signal()
	b := r.BeginCounted("w2", "s", 2)
	c := r.BeginCounted("w3", "s", 2)
	after(r)
	d := r.BeginCounted("w4", "s", 2)
	for _, h := range []*Hold{a, b, c, d} {
		h.End()
	}
	v := r.Check()
	if Count(v, KindOverCapacity) != 1 || Count(v, KindOutlived) != 2 || len(v) != 3 {
		// c fits with b, a having been told, and d does not; a outlived
		// its loss past both.
		t.Fatalf("Check() = %v, want one over-capacity and two outlived", v)
	}
	for _, x := range v {
		if x.Kind == KindOverCapacity && x.B.Who == "w4" && (len(x.With) != 2 || x.With[0].Who != "w2") {
			t.Errorf("over-capacity of w4 = %v, want over w2 and w3 (w1 was told)", x)
		}
	}
}

func TestCountedLossAfterNext(t *testing.T) {
	r := New()
	a := r.BeginCounted("w1", "s", 2)
	b := r.BeginCounted("w2", "s", 2)
	c := r.BeginCounted("w3", "s", 2) // a's permit granted again before a knew
	after(r)
	a.Lost()
	b.End()
	c.End()
	if v := r.Check(); len(v) != 1 || v[0].Kind != KindOverCapacity {
		t.Fatalf("Check() = %v, want one over-capacity", v)
	}
	s := r.Summary()
	if s.Lost != 1 || s.LossAfterNext != 1 || s.LossBeforeNext != 0 {
		t.Fatalf("Summary() = %+v, want one loss signalled after the next hold", s)
	}
}

func TestCountedLossNext(t *testing.T) {
	// The next hold of a lost counted hold is the first that needed its
	// permit, not merely the first that began after it.
	tests := []struct {
		name       string
		run        func(r *Recorder)
		before, af int
	}{
		{"told, then its permit taken", func(r *Recorder) {
			a := r.BeginCounted("w1", "s", 2)
			b := r.BeginCounted("w2", "s", 2)
			a.Lost()
			after(r)
			r.BeginCounted("w3", "s", 2).End() // needs a's permit: b holds the other
			b.End()
		}, 1, 0},
		{"never needed: a free permit remained", func(r *Recorder) {
			a := r.BeginCounted("w1", "s", 3)
			r.BeginCounted("w2", "s", 3).End()
			r.BeginCounted("w3", "s", 3).End()
			after(r)
			a.Lost()
		}, 0, 0},
		{"told after holds that had a free permit", func(r *Recorder) {
			a := r.BeginCounted("w1", "s", 2)
			r.BeginCounted("w2", "s", 2).End() // the other permit
			b := r.BeginCounted("w3", "s", 2)  // the other permit again
			after(r)
			a.Signal()
			after(r)
			r.BeginCounted("w4", "s", 2).End() // a's permit, after a was told
			a.End()
			b.End()
		}, 1, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := New()
			tt.run(r)
			s := r.Summary()
			if s.LossBeforeNext != tt.before || s.LossAfterNext != tt.af {
				t.Fatalf("Summary() = %+v, want %d losses signalled before the next hold, %d after", s, tt.before, tt.af)
			}
		})
	}
}

func TestCountedNoTokens(t *testing.T) {
	// Counted holds have no token to check, however they interleave.
	r := New()
	for i := range 50 {
		r.BeginCounted(fmt.Sprint("w", i), "s", 3).End()
	}
	if v := r.Check(); len(v) != 0 || Count(v, KindTokenBackwards) != 0 {
		t.Fatalf("Check() = %v, want none", v)
	}
}

func TestCountedMixedPanics(t *testing.T) {
	tests := []struct {
		name string
		run  func(r *Recorder)
	}{
		{"no permits", func(r *Recorder) { r.BeginCounted("w", "s", 0) }},
		{"another capacity", func(r *Recorder) { r.BeginCounted("w", "s", 2); r.BeginCounted("w", "s", 3) }},
		{"exclusive on a counted name", func(r *Recorder) { r.BeginCounted("w", "s", 2); r.Begin("w", "s", 1) }},
		{"shared on a counted name", func(r *Recorder) { r.BeginCounted("w", "s", 2); r.BeginShared("w", "s", 0) }},
		{"counted on a lock's name", func(r *Recorder) { r.Begin("w", "s", 1); r.BeginCounted("w", "s", 2) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			defer func() {
				if recover() == nil {
					t.Error("no panic")
				}
			}()
			tt.run(New())
		})
	}
}

// TestConcurrentCountedSemaphore records holds taken under a channel
// semaphore of three slots from many goroutines: a correct semaphore
// gives a clean history.
func TestConcurrentCountedSemaphore(t *testing.T) {
	r := New()
	slots := make(chan struct{}, 3)
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 200 {
				slots <- struct{}{}
				r.BeginCounted(fmt.Sprint("w", w), "s", 3).End()
				<-slots
			}
		}()
	}
	wg.Wait()
	if v := r.Check(); len(v) != 0 {
		t.Fatalf("Check() = %v, want none", v)
	}
	if s := r.Summary(); s.Counted != 1600 {
		t.Errorf("Summary().Counted = %d, want 1600", s.Counted)
	}
}

// TestConcurrentCountedOverGrant has four goroutines hold a semaphore of
// three permits at once: exactly the last to begin is an over-grant.
func TestConcurrentCountedOverGrant(t *testing.T) {
	r := New()
	var wg, begun sync.WaitGroup
	release := make(chan struct{})
	begun.Add(4)
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			h := r.BeginCounted(fmt.Sprint("w", w), "s", 3)
			begun.Done()
			<-release
			h.End()
		}()
	}
	begun.Wait()
	close(release)
	wg.Wait()
	v := r.Check()
	if len(v) != 1 || v[0].Kind != KindOverCapacity || v[0].B.Seq != 4 || len(v[0].With) != 3 {
		t.Fatalf("Check() = %v, want one over-capacity by the fourth hold", v)
	}
	if s := r.Summary(); s.Peak != 4 {
		t.Errorf("Summary().Peak = %d, want 4", s.Peak)
	}
}
