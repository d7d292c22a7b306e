package relock_test

import (
	"testing"
	"time"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/internal/scripts"
	"github.com/relock-go/relock/internal/testkit"
)

// TestRenewalAfterScriptFlush: a renewal the server refuses with
// NOSCRIPT (its script cache was flushed) runs again by EVAL in the same
// round, and the hold stays held.
func TestRenewalAfterScriptFlush(t *testing.T) {
	t.Parallel()
	ms := redistest.NewMasters(t, 1) // a server of its own: the flush touches no other test
	rdb := testkit.Direct(t, ms)[0]
	c := testkit.NewClient(t, rdb, relock.WithWatchdogTimeout(300*time.Millisecond))
	ctx := testkit.CtxTimeout(t, 10*time.Second)
	l, err := c.Mutex(testkit.LockName(t)).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := rdb.ScriptFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 5*time.Second, "a renewal sent by EVAL", func() bool {
		loaded, err := rdb.ScriptExists(ctx, scripts.Renew.SHA()).Result()
		return err == nil && len(loaded) == 1 && loaded[0]
	})
	if err := l.Err(); err != nil {
		t.Fatalf("the hold was lost after a renewal met NOSCRIPT: %v", err)
	}
	if err := l.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}
