package systest

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/layout"
	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/internal/testkit"
)

// TestHolderOnlyToldOfRestart: after a restart of a server without
// persistence a Client that only holds (no call of it waits) hears at once
// that its lock is gone: it listens on its grant channel while it holds,
// and the reconnect of that subscription has the watchdog renew every
// hold. Its next periodic renewal is 40s after the Client was made, well
// past the bound.
func TestHolderOnlyToldOfRestart(t *testing.T) {
	srv := redistest.Standalone(t)
	rdb := testkit.CloseLater(t, srv.Client())
	a := testkit.Deployment{Addr: srv.Addr}.Open(t, relock.WithWatchdogTimeout(2*time.Minute))
	ctx := testkit.CtxTimeout(t, 60*time.Second)
	held := testkit.LockName(t)
	l, err := a.Mutex(held).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
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

	if err := srv.Restart(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-l.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the holder was not told of the restart; it would hear at its next renewal, 40s after its Client was made")
	}
	if !errors.Is(l.Err(), relock.ErrLockLost) {
		t.Fatalf("Err = %v, want ErrLockLost", l.Err())
	}
}
