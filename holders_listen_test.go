package relock_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/layout"
	"github.com/relock-go/relock/internal/testkit"
)

// TestForceUnlockTellsHolderOnly: on one server, a Client that only holds
// (no call of it waits) listens on its grant channel while it holds, so it
// hears at once of a ForceUnlock by another Client, long before its
// watchdog's next renewal (40s after the Client was made).
func TestForceUnlockTellsHolderOnly(t *testing.T) {
	top := testkit.Topologies()[0] // standalone; a cluster's holders hear at their renewals
	for _, hold := range []string{"mutex", "fair", "rw write", "rw read"} {
		t.Run(strings.ReplaceAll(hold, " ", "_"), func(t *testing.T) {
			t.Parallel()
			a := top.NewClient(t, relock.WithWatchdogTimeout(2*time.Minute))
			b := top.NewClient(t)
			rdb := top.RDB(t)
			ctx := testkit.CtxTimeout(t, 30*time.Second)
			held := testkit.LockName(t)

			l, force := holdToForce(t, ctx, a, b, hold, held)
			holderListens(t, ctx, rdb, held)

			if ok, err := force(ctx); err != nil || !ok {
				t.Fatalf("ForceUnlock = %v, %v", ok, err)
			}
			select {
			case <-l.Done():
			case <-time.After(10 * time.Second):
				t.Fatal("the holder was not told of the ForceUnlock; it would hear at its next renewal, 40s after its Client was made")
			}
			if !errors.Is(l.Err(), relock.ErrLockLost) {
				t.Fatalf("Err = %v, want ErrLockLost", l.Err())
			}
		})
	}
}

// holderListens returns the grant channel of the Client whose owner holds
// held (one server), once the server counts one subscriber of it.
func holderListens(t *testing.T, ctx context.Context, rdb redis.UniversalClient, held string) string {
	t.Helper()
	var uuid string
	for f := range rdb.HGetAll(ctx, held).Val() {
		if id, _, ok := strings.Cut(f, ":"); ok && len(id) == 36 {
			uuid = id
		}
	}
	if uuid == "" {
		t.Fatalf("no owner in %q", held)
	}
	channel := layout.Grants(uuid, held, false)
	testkit.Eventually(t, 10*time.Second, "the holder's Client to listen on its grant channel", func() bool {
		return rdb.PubSubNumSub(ctx, channel).Val()[channel] == 1
	})
	return channel
}

// TestHolderListensWhileHolding: a Client's grant channel stays
// subscribed for its holds only while it holds: the subscription goes
// after the last hold is released, comes back with the next hold, and
// goes with Close while a hold is still held.
func TestHolderListensWhileHolding(t *testing.T) {
	top := testkit.Topologies()[0]
	a := top.NewClient(t)
	rdb := top.RDB(t)
	ctx := testkit.CtxTimeout(t, 30*time.Second)
	held := testkit.LockName(t)
	m := a.Mutex(held)
	l, err := m.Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	channel := holderListens(t, ctx, rdb, held)
	if err := l.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 10*time.Second, "the grant channel to be left after the last hold", func() bool {
		return rdb.PubSubNumSub(ctx, channel).Val()[channel] == 0
	})
	if _, err := m.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	holderListens(t, ctx, rdb, held)
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 10*time.Second, "the grant channel to be left with Close", func() bool {
		return rdb.PubSubNumSub(ctx, channel).Val()[channel] == 0
	})
}
