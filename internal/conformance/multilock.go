package conformance

import (
	"errors"
	"testing"
	"time"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/testkit"
)

// MultiLock: all members held across slots and Clients, one lease for
// them, and everything released by its Unlock.
func MultiLock(t *testing.T) {
	testkit.ForEach(t, func(t *testing.T, top testkit.Topology) {
		c1, c2, other := top.NewClient(t), top.NewClient(t), top.NewClient(t)
		rdb := top.RDB(t)
		names := testkit.SlotNames(t, 3)
		ctx := testkit.CtxTimeout(t, 10*time.Second)
		ml := relock.Multi(c1.Mutex(names[0]), c2.Mutex(names[1]), c1.Mutex(names[2]))
		if want := names[0] + "," + names[1] + "," + names[2]; ml.Name() != want {
			t.Fatalf("Name() = %q, want %q", ml.Name(), want)
		}
		l, err := ml.Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		tokens := l.Tokens()
		if len(tokens) != 3 || l.Token() != tokens[0] || tokens[1] == 0 || tokens[2] == 0 {
			t.Fatalf("Token() %d, Tokens() %v", l.Token(), tokens)
		}
		for _, name := range names {
			if _, err := other.Mutex(name).TryLock(ctx); !errors.Is(err, relock.ErrNotAcquired) {
				t.Fatalf("TryLock of member %q: %v, want ErrNotAcquired", name, err)
			}
		}
		if err := l.Err(); err != nil {
			t.Fatalf("Err() = %v while held", err)
		}
		if err := l.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		testkit.WaitDone(t, l, time.Second)
		if !errors.Is(l.Err(), relock.ErrReleased) {
			t.Fatalf("Err() after Unlock = %v", l.Err())
		}
		if err := l.Unlock(ctx); !errors.Is(err, relock.ErrNotHeld) {
			t.Fatalf("second Unlock: %v, want ErrNotHeld", err)
		}
		testkit.NoKeys(t, rdb, names...)
		testkit.Idle(t, c1, c2)
	})
}
