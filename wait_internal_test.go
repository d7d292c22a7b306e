package relock

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/relock-go/relock/internal/wait"
)

// TestWriterTurns: the first writer has the turn at once; the others wait
// for it, in order, each let through by its gate when the one before
// leaves; one that leaves while waiting never has it; one handed the turn
// hands it on as it leaves, whether its gate let it through yet or not;
// the last to leave frees the lock's line for the next.
func TestWriterTurns(t *testing.T) {
	var turns writerTurns
	opened := func(g chan struct{}) bool {
		select {
		case <-g:
			return true
		default:
			return false
		}
	}
	if g := turns.take("q"); g != nil {
		t.Fatal("the first writer waits for the turn")
	}
	b, c, d := turns.take("q"), turns.take("q"), turns.take("q")
	if b == nil || c == nil || d == nil {
		t.Fatal("a writer has the turn while another has it")
	}
	if other := turns.take("other"); other != nil {
		t.Fatal("a writer of another lock waits for this one's turn")
	}
	turns.leave("q", nil) // the first: b has it
	if !opened(b) || opened(c) || opened(d) {
		t.Fatal("the turn did not go to the oldest waiting writer alone")
	}
	turns.leave("q", c) // gone while waiting
	turns.leave("q", b) // d has it
	turns.leave("q", d) // handed the turn, without going through its gate
	if got := turns.take("q"); got != nil {
		t.Fatal("a writer waits for a turn that nobody has")
	}
	turns.leave("q", nil)
	turns.leave("other", nil)
	if len(turns.m) != 0 {
		t.Fatalf("lines left: %v", turns.m)
	}
}

// spinCall is a call whose attempts take got from attempt n on (0:
// never), and which records how it ended.
type spinCall struct {
	from     int
	attempts int
	ended    []bool
}

func (s *spinCall) Attempt(context.Context, bool) (wait.Result[bool], error) {
	s.attempts++
	return wait.Result[bool]{Got: s.from > 0 && s.attempts >= s.from, Retry: time.Millisecond}, nil
}

func (*spinCall) Accept(*wait.Grant) bool { return false }
func (*spinCall) Join()                   {}
func (s *spinCall) End(queued bool)       { s.ended = append(s.ended, queued) }

// TestSpinRunsTheWaitContract: a spinning call attempts by its backoff
// until an attempt takes what it waits for, and is ended as one that has
// it; a call whose ctx ends returns ctx's error, named by its operation,
// and is ended as one that may be queued, so that it leaves its queue.
func TestSpinRunsTheWaitContract(t *testing.T) {
	c := &Client{closing: make(chan struct{})}
	b := &backoff{min: time.Microsecond, max: 10 * time.Microsecond}
	first := wait.Result[bool]{Retry: time.Millisecond}

	q := &spinCall{from: 3}
	got, err := spin(context.Background(), c, "lock", "l", b, first, q)
	if !got || err != nil || q.attempts != 3 {
		t.Fatalf("spin = %v, %v after %d attempts; want true after 3", got, err, q.attempts)
	}
	if len(q.ended) != 1 || q.ended[0] {
		t.Fatalf("ended %v, want once, not queued", q.ended)
	}

	q = &spinCall{}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	got, err = spin(ctx, c, "lock", "l", b, first, q)
	if got || !errors.Is(err, context.Canceled) || err.Error() != `relock: lock "l": context canceled` {
		t.Fatalf("spin = %v, %v; want the call's error wrapping context.Canceled", got, err)
	}
	if len(q.ended) != 1 || !q.ended[0] {
		t.Fatalf("ended %v, want once, queued", q.ended)
	}
	if n := c.stats.Waits.Load(); n != 2 {
		t.Fatalf("%d waits counted, want 2", n)
	}
}
