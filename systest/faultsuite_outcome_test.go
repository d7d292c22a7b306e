package systest

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/relock-go/relock/internal/history"
	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/internal/testkit"
)

// outcome condenses a workload's history and counters.
type outcome struct {
	Holds, Lost, LossBeforeNext, LossAfterNext int
	Reads                                      int // of the holds, shared ones
	Peak                                       int // the most holds of one name in progress at once
	// DoubleGrants counts the holds that another hold of the same name
	// began during (each counted once however many began); Overlaps counts
	// the overlapping pairs. For a semaphore both count its over-grants:
	// the holds that began while as many others were in progress as it
	// has permits, none told of a loss. Crowded counts, for a semaphore,
	// the holds those were in progress during (each once): the holds whose
	// permits may have been granted again, as DoubleGrants counts for a
	// lock.
	DoubleGrants, Overlaps, Outlived, TokensBackwards, Crowded int
	// Stale counts leases already lost when Lock returned them.
	LockErrs, UnlockErrs, Stranded, Stale int64
	Violations                            []history.Violation
}

func (w *workload) outcome() outcome {
	v := w.rec.Check()
	s := w.rec.Summary()
	granted := make(map[int]bool) // holds granted again, by Seq
	crowded := make(map[int]bool) // holds in progress at an over-grant, by Seq
	for _, x := range v {
		switch x.Kind {
		case history.KindOverlap:
			granted[x.A.Seq] = true
		case history.KindOverCapacity:
			for _, a := range x.With {
				crowded[a.Seq] = true
			}
		}
	}
	over := history.Count(v, history.KindOverCapacity)
	return outcome{
		DoubleGrants:    len(granted) + over,
		Holds:           s.Holds,
		Reads:           s.Shared,
		Peak:            s.Peak,
		Lost:            s.Lost,
		LossBeforeNext:  s.LossBeforeNext,
		LossAfterNext:   s.LossAfterNext,
		Overlaps:        history.Count(v, history.KindOverlap) + over,
		Crowded:         len(crowded),
		Outlived:        history.Count(v, history.KindOutlived),
		TokensBackwards: history.Count(v, history.KindTokenBackwards),
		LockErrs:        w.lockErrs.Load(),
		UnlockErrs:      w.unlockErrs.Load(),
		Stranded:        w.stranded.Load(),
		Stale:           w.stale.Load(),
		Violations:      v,
	}
}

// add sums outcomes of several rounds.
func (o *outcome) add(p outcome) {
	o.Holds += p.Holds
	o.Reads += p.Reads
	o.Peak = max(o.Peak, p.Peak)
	o.Lost += p.Lost
	o.LossBeforeNext += p.LossBeforeNext
	o.LossAfterNext += p.LossAfterNext
	o.DoubleGrants += p.DoubleGrants
	o.Overlaps += p.Overlaps
	o.Crowded += p.Crowded
	o.Outlived += p.Outlived
	o.TokensBackwards += p.TokensBackwards
	o.LockErrs += p.LockErrs
	o.UnlockErrs += p.UnlockErrs
	o.Stranded += p.Stranded
	o.Stale += p.Stale
	o.Violations = append(o.Violations, p.Violations...)
}

// report logs the outcome as a SAFETY line, with the first errors seen.
func (o outcome) report(t testing.TB, scenario string, runs int, kv ...any) {
	t.Helper()
	testkit.Safety(t, scenario, append([]any{"runs", runs, "holds", o.Holds, "double_grants", o.DoubleGrants, "overlap_pairs", o.Overlaps,
		"tokens_backwards", o.TokensBackwards, "lost", o.Lost, "loss_before_next", o.LossBeforeNext,
		"loss_after_next", o.LossAfterNext, "outlived", o.Outlived, "stranded", o.Stranded, "stale_leases", o.Stale,
		"lock_errors", o.LockErrs, "unlock_errors", o.UnlockErrs}, kv...)...)
	for i, v := range o.Violations {
		if i == 5 {
			t.Logf("... %d more", len(o.Violations)-i)
			break
		}
		t.Logf("%s: %v", scenario, v)
	}
}

// requireSafe fails the test on any breach of mutual exclusion that the
// lock itself is responsible for: overlapping holds (a semaphore's
// over-grants), tokens going backwards, a loss signalled after the next
// grant, a stranded waiter.
// (Outlived holds are the workers' own lateness in reacting to a signal
// that came in time.)
func (o outcome) requireSafe(t testing.TB, scenario string) {
	t.Helper()
	if o.Overlaps+o.TokensBackwards+o.LossAfterNext > 0 || o.Stranded > 0 {
		t.Errorf("%s: %d double grants, %d tokens backwards, %d losses signalled after the next grant, %d stranded waiters",
			scenario, o.DoubleGrants, o.TokensBackwards, o.LossAfterNext, o.Stranded)
		for i, v := range o.Violations {
			if i == 5 {
				break
			}
			t.Log(v)
		}
	}
}

// infoFields returns the fields of INFO section on s.
func infoFields(ctx context.Context, s *redistest.Server, section string) (map[string]string, error) {
	v, err := s.Do(ctx, "INFO", section)
	if err != nil {
		return nil, err
	}
	return parseInfo(fmt.Sprint(v)), nil
}

// parseInfo splits "key:value" lines.
func parseInfo(s string) map[string]string {
	m := make(map[string]string)
	for _, line := range strings.Split(s, "\n") {
		if k, v, ok := strings.Cut(strings.TrimSpace(line), ":"); ok {
			m[k] = v
		}
	}
	return m
}

// containsLine reports whether s has line among its lines.
func containsLine(s, line string) bool {
	for _, l := range strings.Split(s, "\n") {
		if strings.TrimSpace(l) == line {
			return true
		}
	}
	return false
}
