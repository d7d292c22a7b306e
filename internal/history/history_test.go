package history

import (
	"fmt"
	"sync"
	"testing"
	"time"
)

func TestCleanHistoryPasses(t *testing.T) {
	r := New()
	for i := 1; i <= 100; i++ {
		for _, name := range []string{"a", "b"} {
			h := r.Begin(fmt.Sprintf("w%d", i%4), name, uint64(i))
			h.End()
		}
	}
	if v := r.Check(); len(v) != 0 {
		t.Fatalf("Check() = %v, want no violations", v)
	}
	if got := r.Holds(); got != 200 {
		t.Errorf("Holds() = %d, want 200", got)
	}
	s := r.Summary()
	if s.Holds != 200 || s.Open != 0 || s.Lost != 0 || len(s.Names) != 2 || s.Peak != 1 {
		t.Fatalf("Summary() = %+v", s)
	}
	for _, ns := range s.Names {
		if ns.Holds != 100 || ns.LastToken != 100 || ns.Handoffs != 99 {
			t.Errorf("summary of %q = %+v, want 100 holds, last token 100, 99 handoffs", ns.Name, ns)
		}
	}
	if s.Handoffs != 198 || s.P50 < 0 || s.P99 < s.P50 {
		t.Errorf("handoffs %d, p50 %v, p99 %v", s.Handoffs, s.P50, s.P99)
	}
}

func TestOverlapDetectedLive(t *testing.T) {
	r := New()
	a := r.Begin("w1", "x", 1)
	b := r.Begin("w2", "x", 2) // a is still open
	a.End()
	b.End()
	v := r.Check()
	if len(v) != 1 || v[0].Kind != KindOverlap || v[0].Name != "x" {
		t.Fatalf("Check() = %v, want one overlap on x", v)
	}
	if v[0].A.Who != "w1" || v[0].B.Who != "w2" {
		t.Errorf("overlap between %v and %v, want w1 then w2", v[0].A, v[0].B)
	}
	// Checking again reports the same pair once.
	if v := r.Check(); len(v) != 1 {
		t.Errorf("second Check() = %v, want the same single overlap", v)
	}
}

func TestOverlapOfOpenHold(t *testing.T) {
	r := New()
	r.Begin("w1", "x", 0) // never ended
	r.Begin("w2", "x", 0).End()
	if v := r.Check(); len(v) != 1 || v[0].Kind != KindOverlap || !v[0].A.Open() {
		t.Fatalf("Check() = %v, want one overlap with an open hold", v)
	}
	if s := r.Summary(); s.Open != 1 {
		t.Errorf("Summary().Open = %d, want 1", s.Open)
	}
}

func TestNoOverlapAcrossNames(t *testing.T) {
	r := New()
	a := r.Begin("w1", "x", 1)
	b := r.Begin("w2", "y", 1)
	a.End()
	b.End()
	if v := r.Check(); len(v) != 0 {
		t.Fatalf("Check() = %v, want none: different names", v)
	}
}

func TestIntervalSweepFindsOverlap(t *testing.T) {
	// Holds whose intervals intersect, fed in by hand as if their
	// timestamps came from elsewhere, are found by the sweep.
	r := New()
	a := r.Begin("w1", "x", 1)
	a.End()
	b := r.Begin("w2", "x", 2)
	b.End()
	r.mu.Lock()
	a.info.End = b.info.Begin + time.Millisecond
	r.mu.Unlock()
	v := r.Check()
	if len(v) != 1 || v[0].Kind != KindOverlap {
		t.Fatalf("Check() = %v, want one overlap", v)
	}
}

func TestTokenBackwards(t *testing.T) {
	tests := []struct {
		name   string
		tokens []uint64
		want   int
	}{
		{"increasing", []uint64{1, 2, 5, 9}, 0},
		{"repeated", []uint64{1, 2, 2, 3}, 1},
		{"backwards", []uint64{3, 4, 1, 5}, 1},
		{"unfenced holds are skipped", []uint64{1, 0, 2, 0, 3}, 0},
		{"backwards across an unfenced hold", []uint64{4, 0, 2}, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := New()
			for i, tok := range tt.tokens {
				r.Begin(fmt.Sprint("w", i), "x", tok).End()
			}
			v := r.Check()
			if len(v) != tt.want {
				t.Fatalf("Check() = %v, want %d violations", v, tt.want)
			}
			for _, x := range v {
				if x.Kind != KindTokenBackwards {
					t.Errorf("violation %v, want %s", x, KindTokenBackwards)
				}
			}
		})
	}
}

func TestLostEndsHold(t *testing.T) {
	r := New()
	a := r.Begin("w1", "x", 1)
	a.Lost()
	a.End() // ignored: the hold already ended
	r.Begin("w2", "x", 2).End()
	if v := r.Check(); len(v) != 0 {
		t.Fatalf("Check() = %v, want none: the first hold was lost before the second began", v)
	}
	if info := a.Info(); !info.Lost || info.Open() {
		t.Errorf("Info() = %+v, want a lost, ended hold", info)
	}
	if s := r.Summary(); s.Lost != 1 {
		t.Errorf("Summary().Lost = %d, want 1", s.Lost)
	}
}

// TestConcurrentMutex records holds taken under a sync.Mutex from many
// goroutines: a correct lock gives a clean history.
func TestConcurrentMutex(t *testing.T) {
	r := New()
	var (
		mu    sync.Mutex
		token uint64
		wg    sync.WaitGroup
	)
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 200 {
				mu.Lock()
				token++
				h := r.Begin(fmt.Sprint("w", w), "x", token)
				h.End()
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if v := r.Check(); len(v) != 0 {
		t.Fatalf("Check() = %v, want none", v)
	}
	if r.Holds() != 1600 {
		t.Errorf("Holds() = %d, want 1600", r.Holds())
	}
}

// TestConcurrentNoLock records holds from goroutines that take no lock at
// all; they are bound to overlap, and the live counter must see it.
func TestConcurrentNoLock(t *testing.T) {
	r := New()
	var wg sync.WaitGroup
	start := make(chan struct{})
	holds := make(chan *Hold, 2)
	for w := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			holds <- r.Begin(fmt.Sprint("w", w), "x", 0)
		}()
	}
	close(start)
	wg.Wait()
	close(holds)
	for h := range holds {
		h.End()
	}
	if v := r.Check(); len(v) != 1 || v[0].Kind != KindOverlap {
		t.Fatalf("Check() = %v, want exactly one overlap", v)
	}
}

func TestPercentile(t *testing.T) {
	ds := make([]time.Duration, 100)
	for i := range ds {
		ds[i] = time.Duration(i+1) * time.Millisecond
	}
	tests := []struct {
		name string
		p    float64
		want time.Duration
	}{
		{"p50", 50, 50 * time.Millisecond},
		{"p99", 99, 99 * time.Millisecond},
		{"p100", 100, 100 * time.Millisecond},
		{"p1", 1, time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Percentile(ds, tt.p); got != tt.want {
				t.Errorf("Percentile(%v) = %v, want %v", tt.p, got, tt.want)
			}
		})
	}
	if got := Percentile(nil, 50); got != 0 {
		t.Errorf("Percentile(nil) = %v, want 0", got)
	}
}

// TestAdd: holds reported from elsewhere with their own times are checked
// like begun ones: an overlap of intervals, and a token that goes back.
func TestAdd(t *testing.T) {
	r := New()
	ms := time.Millisecond
	r.Add("p1", "x", 1, 0, 10*ms, false)
	r.Add("p2", "x", 2, 11*ms, 20*ms, true)
	if v := r.Check(); len(v) != 0 {
		t.Fatalf("disjoint holds: %v", v)
	}
	r.Add("p3", "x", 3, 19*ms, 30*ms, false)
	v := r.Check()
	if len(v) != 1 || v[0].Kind != KindOverlap || v[0].A.Who != "p2" || v[0].B.Who != "p3" {
		t.Fatalf("overlapping holds: %v; want one overlap of p2 and p3", v)
	}
	r.Add("p4", "x", 2, 40*ms, 50*ms, false)
	if v := r.Check(); len(v) != 2 || v[1].Kind != KindTokenBackwards {
		t.Fatalf("token 2 after 3: %v; want a backwards token", v)
	}
}
