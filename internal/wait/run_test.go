package wait_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/relock-go/relock/internal/wait"
)

// wantReady checks what Ready reports at the point when names.
func wantReady(t *testing.T, r *wait.Run, want bool, when string) {
	t.Helper()
	if got := r.Ready(); got != want {
		t.Fatalf("Ready = %v %s, want %v", got, when, want)
	}
}

// take takes the next token of a Mutex's run and checks it and whether
// its switch asks for the next block.
func take(t *testing.T, r *wait.Run, token uint64, ask bool) {
	t.Helper()
	wantReady(t, r, true, "before a Take")
	if got, gotAsk := r.Take(); got != token || gotAsk != ask {
		t.Fatalf("Take = %d, ask %v; want %d, ask %v", got, gotAsk, token, ask)
	}
}

// takeHead passes a FairMutex's run to owner, the first of its heads,
// and checks the token and whether its switch asks for heads.
func takeHead(t *testing.T, r *wait.Run, owner string, token uint64, ask bool) {
	t.Helper()
	if next := r.Next(); next != owner {
		t.Fatalf("Next = %q, want %q", next, owner)
	}
	got, gotAsk, ok := r.TakeHead(owner)
	if !ok || got != token || gotAsk != ask {
		t.Fatalf("TakeHead(%q) = %d, ask %v, ok %v; want %d, ask %v, ok", owner, got, gotAsk, ok, token, ask)
	}
}

// TestRunTakesBlocks: a Mutex's run takes its tokens in order, asks for
// the next block once when less than half of the current one is left,
// keeps to the current block while it lasts, then moves to the block an
// answer reserved.
func TestRunTakesBlocks(t *testing.T) {
	r := wait.NewRun(10, 8)
	for tok := uint64(10); tok <= 13; tok++ {
		take(t, r, tok, false)
	}
	take(t, r, 14, true) // 3 left of 8
	take(t, r, 15, false)
	r.Answer(14, true, wait.Answer{Permit: true, Block: 100})
	r.Answer(15, false, wait.Answer{Permit: true}) // keeps the block queued
	take(t, r, 16, false)                          // the current block first
	take(t, r, 17, false)
	take(t, r, 100, false) // then the queued one, in full
	for tok := uint64(101); tok <= 103; tok++ {
		take(t, r, tok, false)
	}
	take(t, r, 104, true)
}

// TestRunAskAgainAfterNoNews: a switch that asked for a block and has no
// news to tell lets the next switch ask.
func TestRunAskAgainAfterNoNews(t *testing.T) {
	r := wait.NewRun(1, 4)
	take(t, r, 1, false)
	take(t, r, 2, false)
	take(t, r, 3, true)
	r.NoNews(3, true)
	take(t, r, 4, true)
}

// TestRunPermission: whether a Mutex's run may pass on after its
// answers. It may not with no token left and no block queued, whatever
// the answers allow (a block comes only with an answer that allows it); a stop answer ends it with tokens left, and no later
// answer, however new, starts it again; only the newest switch answered
// tells, an older one answered later says nothing.
func TestRunPermission(t *testing.T) {
	type answer struct {
		token               uint64
		asked, stop, permit bool
		block               uint64
		ready               bool // after the answer
	}
	for _, tc := range []struct {
		name    string
		size    uint64 // the block's, from token 1
		taken   int    // switches sent before the answers
		ready   bool   // before the answers
		answers []answer
	}{
		{"runs out", 2, 2, false, []answer{
			{token: 2, asked: true, permit: true, ready: false}, // no block reserved
		}},
		{"block of a forbidding answer", 2, 2, false, []answer{
			{token: 1, permit: false, block: 50, ready: false},
			{token: 2, asked: true, permit: true, ready: false}, // 50 not queued
		}},
		{"stop", 8, 2, true, []answer{
			{token: 1, stop: true, ready: false},
			{token: 2, permit: true, ready: false},
		}},
		{"newest answer", 8, 3, true, []answer{
			{token: 2, permit: false, ready: false},
			{token: 1, permit: true, ready: false},
			{token: 3, permit: true, ready: true},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := wait.NewRun(1, tc.size)
			for range tc.taken {
				r.Take()
			}
			wantReady(t, r, tc.ready, "before the answers")
			for _, a := range tc.answers {
				r.Answer(a.token, a.asked, wait.Answer{Stop: a.stop, Permit: a.permit, Block: a.block})
				wantReady(t, r, a.ready, fmt.Sprintf("after the answer %+v", a))
			}
		})
	}
}

// TestHeadsRunPassesInOrder: a FairMutex's run passes only to the first
// of its heads, in order, and asks Redis to name them again once refill
// or fewer are left, once while that switch is on its way.
func TestHeadsRunPassesInOrder(t *testing.T) {
	r := wait.NewHeadsRun(50, []string{"a", "b", "c", "d", "e"}, 2)
	if _, _, ok := r.TakeHead("b"); ok {
		t.Fatal("passed to b before a")
	}
	takeHead(t, r, "a", 50, false)
	if _, _, ok := r.TakeHead("a"); ok {
		t.Fatal("passed to a twice")
	}
	takeHead(t, r, "b", 51, false)
	takeHead(t, r, "c", 52, true) // 2 left
	takeHead(t, r, "d", 53, false)
	takeHead(t, r, "e", 54, false)
	if next := r.Next(); next != "" {
		t.Fatalf("Next = %q with no heads left", next)
	}
	if _, _, ok := r.TakeHead("f"); ok {
		t.Fatal("passed to a waiter not named")
	}

	few := wait.NewHeadsRun(7, []string{"a"}, 2)
	takeHead(t, few, "a", 7, true)
}

// TestHeadsRunAnswers: an asking switch's answer replaces the heads, less
// those the run passed the lock to whose switches are not answered yet;
// an answer that does not ask, or comes after a newer one, keeps them.
func TestHeadsRunAnswers(t *testing.T) {
	r := wait.NewHeadsRun(50, []string{"a", "b", "c", "d"}, 2)
	takeHead(t, r, "a", 50, false)
	takeHead(t, r, "b", 51, true)
	// Switch 51 reached Redis before 50: a is still queued there.
	r.AnswerHeads(51, true, wait.Answer{Heads: []string{"a", "c", "x", "y"}, Block: 100})
	takeHead(t, r, "c", 100, true)
	r.AnswerHeads(50, false, wait.Answer{})
	takeHead(t, r, "x", 101, false)
	r.AnswerHeads(101, false, wait.Answer{}) // does not ask: heads kept
	takeHead(t, r, "y", 102, false)
	r.AnswerHeads(100, true, wait.Answer{Heads: []string{"z"}, Block: 300}) // older than 101
	if next := r.Next(); next != "" {
		t.Fatalf("Next = %q with no heads left", next)
	}

	// An asking switch answered after a newer one leaves the heads.
	r = wait.NewHeadsRun(50, []string{"a", "b", "c", "d", "e"}, 3)
	takeHead(t, r, "a", 50, false)
	takeHead(t, r, "b", 51, true)
	takeHead(t, r, "c", 52, false)
	r.AnswerHeads(52, false, wait.Answer{})
	r.AnswerHeads(50, false, wait.Answer{})
	r.AnswerHeads(51, true, wait.Answer{Heads: []string{"x"}, Block: 200})
	takeHead(t, r, "d", 53, true)
}

// TestHeadsRunNoNewsForgets: a pass that has no news to tell is off the
// run's log: the waiter, named again, is passed the lock again.
func TestHeadsRunNoNewsForgets(t *testing.T) {
	r := wait.NewHeadsRun(50, []string{"a", "b"}, 0)
	takeHead(t, r, "a", 50, false)
	r.NoNews(50, false) // a had gone before its switch was sent
	takeHead(t, r, "b", 51, true)
	r.AnswerHeads(51, true, wait.Answer{Heads: []string{"a", "c"}, Block: 60})
	takeHead(t, r, "a", 60, false)
}

// TestHeadsRunStops: a stop answer ends a FairMutex's run, and no later
// answer naming heads starts it again.
func TestHeadsRunStops(t *testing.T) {
	r := wait.NewHeadsRun(50, []string{"a", "b", "c", "d"}, 1)
	takeHead(t, r, "a", 50, false)
	takeHead(t, r, "b", 51, false)
	r.AnswerHeads(50, false, wait.Answer{Stop: true})
	if next := r.Next(); next != "" {
		t.Fatalf("Next = %q after a stop answer", next)
	}
	if _, _, ok := r.TakeHead("c"); ok {
		t.Fatal("passed after a stop answer")
	}
	r.AnswerHeads(51, true, wait.Answer{Heads: []string{"c", "d"}, Block: 60})
	if next := r.Next(); next != "" {
		t.Fatalf("Next = %q: an answer undid a stop", next)
	}
}

// TestRunSettled: Settled returns at once with no switch pending, waits
// for the last pending one, and gives up with ctx.
func TestRunSettled(t *testing.T) {
	ended, cancel := context.WithCancel(context.Background())
	cancel()
	r := wait.NewRun(1, 8)
	if err := r.Settled(ended); err != nil {
		t.Fatalf("Settled with none pending = %v, want nil at once", err)
	}

	const n = 4
	for tok := uint64(1); tok <= n; tok++ {
		r.Take()
	}
	settled := make(chan error, 1)
	go func() { settled <- r.Settled(context.Background()) }()
	answered := make(chan struct{})
	for tok := uint64(1); tok < n; tok++ {
		go func() {
			defer func() { answered <- struct{}{} }()
			r.Answer(tok, false, wait.Answer{Permit: true})
		}()
	}
	for range n - 1 {
		<-answered
	}
	if err := r.Settled(ended); !errors.Is(err, context.Canceled) {
		t.Fatalf("Settled with one switch pending = %v, want %v", err, context.Canceled)
	}
	select {
	case err := <-settled:
		t.Fatalf("Settled returned %v with one switch pending", err)
	default:
	}
	r.NoNews(n, false)
	if err := <-settled; err != nil {
		t.Fatalf("Settled = %v after the last answer", err)
	}
	if err := r.Settled(ended); err != nil {
		t.Fatalf("Settled after the last answer = %v, want nil", err)
	}

	// A new switch makes it wait again, until ctx ends.
	r.Take()
	ctx, stop := context.WithCancel(context.Background())
	go func() { settled <- r.Settled(ctx) }()
	stop()
	if err := <-settled; !errors.Is(err, context.Canceled) {
		t.Fatalf("Settled as ctx ends = %v, want %v", err, context.Canceled)
	}
}

// TestRunOurs: Ours tells the tokens the run passed after from.
func TestRunOurs(t *testing.T) {
	r := wait.NewRun(10, 8)
	for range 3 {
		r.Take()
	}
	var ours []uint64
	for tok := uint64(5); tok <= 20; tok++ {
		if r.Ours(tok, 10) {
			ours = append(ours, tok)
		}
	}
	if want := []uint64{11, 12}; !slices.Equal(ours, want) {
		t.Fatalf("ours after 10 = %v, want %v", ours, want)
	}

	h := wait.NewHeadsRun(50, []string{"a", "b"}, 0)
	takeHead(t, h, "a", 50, false)
	if h.Ours(51, 50) || !h.Ours(50, 49) {
		t.Fatal("a heads run's Ours is wrong")
	}
}

// TestRunPassAllocatesNothing: a pass in a run with a switch on its way
// takes its token and records its answer without allocating.
func TestRunPassAllocatesNothing(t *testing.T) {
	r := wait.NewRun(1, 1<<40)
	r.Take() // on its way throughout
	allocs := testing.AllocsPerRun(100, func() {
		if r.Ready() {
			tok, ask := r.Take()
			r.Answer(tok, ask, wait.Answer{Permit: true})
		}
	})
	if allocs != 0 {
		t.Fatalf("a pass allocates %v times", allocs)
	}
}
