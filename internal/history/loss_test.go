package history

import (
	"testing"
	"time"
)

// after returns once the Recorder's clock has moved past its current
// reading, so that consecutive events get distinct times.
func after(r *Recorder) {
	t := r.now()
	for r.now() <= t {
		time.Sleep(time.Microsecond)
	}
}

func TestOutlivedLoss(t *testing.T) {
	r := New()
	a := r.Begin("w1", "x", 1)
	a.Signal()
	after(r)
	b := r.Begin("w2", "x", 2) // a was told, yet still works
	a.End()
	b.End()
	v := r.Check()
	if len(v) != 1 || v[0].Kind != KindOutlived || v[0].A.Who != "w1" || !v[0].A.Signalled {
		t.Fatalf("Check() = %v, want one outlived-loss of w1", v)
	}
	if Count(v, KindOutlived) != 1 || Count(v, KindOverlap) != 0 {
		t.Errorf("Count: %d outlived, %d overlaps", Count(v, KindOutlived), Count(v, KindOverlap))
	}
}

func TestLateLossIsOverlap(t *testing.T) {
	r := New()
	a := r.Begin("w1", "x", 1)
	b := r.Begin("w2", "x", 2) // granted again before a was told
	after(r)
	a.Lost()
	b.End()
	v := r.Check()
	if len(v) != 1 || v[0].Kind != KindOverlap {
		t.Fatalf("Check() = %v, want one overlap", v)
	}
	s := r.Summary()
	if s.LossBeforeNext != 0 || s.LossAfterNext != 1 || s.Lost != 1 {
		t.Fatalf("Summary() = %+v, want one loss signalled after the next hold", s)
	}
}

func TestLossBeforeNext(t *testing.T) {
	r := New()
	a := r.Begin("w1", "x", 1)
	a.Lost()
	a.Signal() // after the end: ignored
	after(r)
	b := r.Begin("w2", "x", 2)
	b.Signal()
	b.End() // told, and stopped before anyone else began
	r.Begin("w3", "x", 3).Lost()
	if v := r.Check(); len(v) != 0 {
		t.Fatalf("Check() = %v, want none", v)
	}
	s := r.Summary()
	if s.LossBeforeNext != 2 || s.LossAfterNext != 0 {
		t.Fatalf("Summary() = %+v, want two losses signalled before the next hold (the last has none)", s)
	}
	if info := b.Info(); !info.Signalled || info.Lost || info.SignalAt > info.End {
		t.Errorf("b = %+v, want signalled, ended by End", info)
	}
	if info := a.Info(); !info.Signalled || info.SignalAt != info.End {
		t.Errorf("a = %+v, want signalled when lost", info)
	}
}
