package history

import (
	"fmt"
	"testing"
)

func TestSharedHoldsMayOverlap(t *testing.T) {
	r := New()
	a := r.BeginShared("r1", "x", 0)
	b := r.BeginShared("r2", "x", 0) // a is still open
	a.End()
	b.End()
	r.Begin("w1", "x", 1).End()
	c := r.BeginShared("r3", "x", 1)
	d := r.BeginShared("r4", "x", 1)
	d.End()
	c.End()
	if v := r.Check(); len(v) != 0 {
		t.Fatalf("Check() = %v, want none: shared holds overlap each other only", v)
	}
	s := r.Summary()
	if s.Holds != 5 || s.Shared != 4 || len(s.Names) != 1 || s.Names[0].Shared != 4 || s.Peak != 2 {
		t.Fatalf("Summary() = %+v, want 5 holds, 4 shared, two at once at most", s)
	}
	if !c.Info().Shared || r.holds[2].Info().Shared {
		t.Errorf("Shared: %v for a shared hold, %v for an exclusive one", c.Info().Shared, r.holds[2].Info().Shared)
	}
}

func TestSharedAndExclusiveOverlap(t *testing.T) {
	tests := []struct {
		name  string
		first bool // the first hold is shared
		then  bool // the second hold is shared
		want  int  // overlaps
	}{
		{"exclusive then exclusive", false, false, 1},
		{"shared then exclusive", true, false, 1},
		{"exclusive then shared", false, true, 1},
		{"shared then shared", true, true, 0},
	}
	begin := func(r *Recorder, shared bool, who string, token uint64) *Hold {
		if shared {
			return r.BeginShared(who, "x", token)
		}
		return r.Begin(who, "x", token)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// Live: the second begins while the first is open.
			r := New()
			a := begin(r, tt.first, "a", 1)
			b := begin(r, tt.then, "b", 2)
			a.End()
			b.End()
			if v := r.Check(); len(v) != tt.want || Count(v, KindOverlap) != tt.want {
				t.Errorf("live: Check() = %v, want %d overlaps", v, tt.want)
			}
			// Swept: intervals that intersect, with timestamps from
			// elsewhere.
			r = New()
			a = begin(r, tt.first, "a", 1)
			a.End()
			b = begin(r, tt.then, "b", 2)
			b.End()
			r.mu.Lock()
			a.info.End = b.info.Begin + 1
			r.mu.Unlock()
			if v := r.Check(); len(v) != tt.want || Count(v, KindOverlap) != tt.want {
				t.Errorf("swept: Check() = %v, want %d overlaps", v, tt.want)
			}
		})
	}
}

func TestSharedSweepKeepsEarlierExclusive(t *testing.T) {
	// An exclusive hold open across two shared holds that overlap each
	// other overlaps both of them.
	r := New()
	w := r.Begin("w", "x", 1)
	r.BeginShared("r1", "x", 1).End()
	r.BeginShared("r2", "x", 1).End()
	w.End()
	if v := r.Check(); len(v) != 2 || Count(v, KindOverlap) != 2 {
		t.Fatalf("Check() = %v, want two overlaps", v)
	}
}

func TestSharedTokens(t *testing.T) {
	type hold struct {
		shared bool
		token  uint64
	}
	w := func(tok uint64) hold { return hold{false, tok} }
	rd := func(tok uint64) hold { return hold{true, tok} }
	tests := []struct {
		name  string
		holds []hold
		want  int
	}{
		{"readers before any writer", []hold{rd(0), rd(0), w(1), rd(1), rd(1), w(2)}, 0},
		{"reader sees the last writer's token", []hold{w(3), rd(3), w(4), rd(4)}, 0},
		{"reader below the last writer", []hold{w(3), rd(2)}, 1},
		{"reader finds no counter after a writer", []hold{w(3), rd(0)}, 1},
		{"writer not above a reader", []hold{rd(5), w(5)}, 1},
		{"writer below a reader", []hold{w(5), rd(5), w(4)}, 1},
		{"readers not ordered among themselves", []hold{w(5), rd(7), rd(5), rd(6)}, 0},
		{"writer above readers that saw other names' tokens", []hold{w(3), rd(7), rd(5), w(8)}, 0},
		{"writer not above an earlier reader", []hold{w(3), rd(7), w(6)}, 1},
		{"unfenced writer skipped", []hold{w(2), w(0), rd(2)}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := New()
			for i, h := range tt.holds {
				if h.shared {
					r.BeginShared(fmt.Sprint("r", i), "x", h.token).End()
				} else {
					r.Begin(fmt.Sprint("w", i), "x", h.token).End()
				}
			}
			v := r.Check()
			if len(v) != tt.want || Count(v, KindTokenBackwards) != tt.want {
				t.Fatalf("Check() = %v, want %d tokens backwards", v, tt.want)
			}
		})
	}
}

func TestSharedLossNext(t *testing.T) {
	// A reader told of its loss after another reader began, but before
	// the next writer, was told in time: readers may overlap.
	r := New()
	a := r.BeginShared("r1", "x", 0)
	r.BeginShared("r2", "x", 0).End()
	after(r)
	a.Lost()
	after(r)
	r.Begin("w1", "x", 1).End()
	// A reader told after the next writer began was not.
	b := r.BeginShared("r3", "x", 1)
	r.Begin("w2", "x", 2).End()
	after(r)
	b.Lost()
	s := r.Summary()
	if s.LossBeforeNext != 1 || s.LossAfterNext != 1 {
		t.Fatalf("Summary() = %+v, want one loss signalled before the next writer and one after", s)
	}
	v := r.Check()
	if len(v) != 1 || v[0].Kind != KindOverlap || v[0].A.Who != "r3" || v[0].B.Who != "w2" {
		t.Fatalf("Check() = %v, want one overlap of r3 by w2", v)
	}
}
