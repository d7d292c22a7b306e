package relock_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/internal/testkit"
)

// TestElectionErrorsNameTheElection: the errors of Campaign and Resign
// name the call and the election, not the lock behind it.
func TestElectionErrorsNameTheElection(t *testing.T) {
	t.Parallel()
	ctx := testkit.CtxTimeout(t, 20*time.Second)
	user := aclUser(t, []*redistest.Server{testkit.Standalone}, "~*", "&*", "+@all")
	rdb := testkit.CloseLater(t, redis.NewClient(&redis.Options{Addr: testkit.Standalone.Addr, Username: user, Password: "pw"}))
	a := testkit.NewClient(t, rdb, relock.WithWatchdogTimeout(time.Second))
	b := testkit.NewClient(t, testkit.CloseLater(t, testkit.Standalone.Client()))
	name := testkit.LockName(t)

	leader, err := a.Election(name).Campaign(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	cctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	_, err = b.Election(name).Campaign(cctx, "b")
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Campaign = %v, want context.DeadlineExceeded", err)
	}
	if want := "relock: campaign " + strconv.Quote(name) + ": "; !strings.HasPrefix(err.Error(), want) || strings.Contains(err.Error(), "relock_election") {
		t.Fatalf("Campaign = %q, want it to begin %q and name no internal key", err, want)
	}

	// A Resign the server refuses (the user may touch only the election's
	// lock, which renewals need, not its log) names the election too, and
	// the leadership is no longer renewed: it ends within its lease.
	lock := "relock_election:{" + name + "}"
	if _, err := testkit.Standalone.Do(ctx, "ACL", "SETUSER", user, "resetkeys", "~"+lock); err != nil {
		t.Fatal(err)
	}
	err = leader.Resign(ctx)
	if want := "relock: resign " + strconv.Quote(name) + ": "; !errors.Is(err, relock.ErrNoPermission) ||
		!strings.HasPrefix(err.Error(), want) || strings.Contains(err.Error(), "relock_election") ||
		!strings.Contains(err.Error(), "no longer renewed") {
		t.Fatalf("Resign = %q, want a refusal beginning %q that names no internal key and says the hold is no longer renewed", err, want)
	}
	select {
	case <-leader.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the leadership was not ended after a refused Resign")
	}
	if !errors.Is(leader.Err(), relock.ErrLockLost) {
		t.Fatalf("Err = %v, want ErrLockLost", leader.Err())
	}
	lb, err := b.Election(name).Campaign(ctx, "b")
	if err != nil {
		t.Fatalf("Campaign after the leader's lock expired: %v", err)
	}
	if err := lb.Resign(ctx); err != nil {
		t.Fatal(err)
	}
}
