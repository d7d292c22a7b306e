package relock_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/internal/testkit"
)

// tryBound is how long a Try call given a context that never ends may
// take before a test calls it hung: far longer than any bound relock
// keeps, only so that a hang fails the test instead of the run.
const tryBound = 30 * time.Second

// within runs f in a goroutine and returns its error, failing the test if
// f has not returned within bound.
func returnsWithin(t *testing.T, bound time.Duration, what string, f func() error) error {
	t.Helper()
	got := make(chan error, 1)
	go func() { got <- f() }()
	select {
	case err := <-got:
		return err
	case <-time.After(bound):
		t.Fatalf("%s did not return within %v", what, bound)
		return nil
	}
}

// TestNewRefusedAuth: against a server with requirepass, a client without
// the password (or with a wrong one) gets an error from New that carries
// the server's reply, instead of a Client whose calls wait forever.
func TestNewRefusedAuth(t *testing.T) {
	srv := redistest.Standalone(t)
	if _, err := srv.Do(context.Background(), "CONFIG", "SET", "requirepass", "secret"); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, password, reply string
	}{
		{"no password", "", "NOAUTH"},
		{"wrong password", "wrong", "WRONGPASS"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rdb := testkit.CloseLater(t, redis.NewClient(&redis.Options{Addr: srv.Addr, Password: tc.password}))
			c, err := relock.New(rdb)
			if err == nil {
				defer c.Close()
				lockErr := returnsWithin(t, tryBound, "TryLock", func() error {
					_, err := c.Mutex("b4").TryLock(context.Background())
					return err
				})
				t.Fatalf("New succeeded against a server that refuses the client; TryLock = %v", lockErr)
			}
			if !strings.Contains(err.Error(), tc.reply) || !strings.HasPrefix(err.Error(), "relock: ") {
				t.Fatalf("New = %v, want a relock error carrying %s", err, tc.reply)
			}
		})
	}
}

// TestPasswordChangedAfterNew: once the server's password changes and the
// Client's connections are closed, every call gets the server's refusal
// at once, even with a ctx that never ends: 64 concurrent TryLocks, whose
// pipelines fail on the connection's setup (WRONGPASS), each return an
// error that carries the server's reply. A client without a password gets
// NOAUTH, or, for a command longer than the server lets an unauthenticated
// client send, the connection closed.
func TestPasswordChangedAfterNew(t *testing.T) {
	for _, tc := range []struct {
		name, password string
		replies        []string
	}{
		{"client without password", "", []string{"NOAUTH", "unauthenticated", "EOF", "connection reset"}},
		{"client with the old password", "old", []string{"WRONGPASS"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			srv := redistest.Standalone(t)
			if tc.password != "" {
				if _, err := srv.Do(ctx, "CONFIG", "SET", "requirepass", tc.password); err != nil {
					t.Fatal(err)
				}
			}
			admin := testkit.CloseLater(t, redis.NewClient(&redis.Options{Addr: srv.Addr, Password: tc.password}))
			rdb := testkit.CloseLater(t, redis.NewClient(&redis.Options{Addr: srv.Addr, Password: tc.password}))
			c := testkit.NewClient(t, rdb)
			held, err := c.Mutex("held").TryLock(ctx) // renewed by the watchdog meanwhile
			if err != nil {
				t.Fatal(err)
			}
			defer held.Unlock(ctx)
			if err := admin.ConfigSet(ctx, "requirepass", "new").Err(); err != nil {
				t.Fatal(err)
			}
			if err := admin.Do(ctx, "CLIENT", "KILL", "TYPE", "normal", "SKIPME", "yes").Err(); err != nil {
				t.Fatal(err)
			}
			const calls = 64
			errs := make(chan error, calls)
			for i := range calls {
				go func() {
					_, err := c.Mutex("n" + string(rune('a'+i%26)) + string(rune('a'+i/26))).TryLock(ctx)
					errs <- err
				}()
			}
			deadline := time.After(tryBound)
			for range calls {
				select {
				case err := <-errs:
					if err == nil || !slices.ContainsFunc(tc.replies, func(r string) bool { return strings.Contains(err.Error(), r) }) {
						t.Errorf("TryLock = %v, want one of %q", err, tc.replies)
					}
				case <-deadline:
					t.Fatalf("TryLock calls did not return within %v", tryBound)
				}
			}
		})
	}
}

// TestTryLockWhileServerBusy: while another client's script keeps the
// server busy, a TryLock with a ctx that never ends returns the server's
// BUSY at once instead of sending again until the script ends, also on a
// Client made meanwhile, whose replica sync asks the server first.
func TestTryLockWhileServerBusy(t *testing.T) {
	ctx := context.Background()
	srv := redistest.Standalone(t)
	if _, err := srv.Do(ctx, "CONFIG", "SET", "lua-time-limit", "10"); err != nil {
		t.Fatal(err)
	}
	busy := testkit.CloseLater(t, srv.Client())
	done := make(chan struct{})
	go func() {
		defer close(done)
		busy.Eval(ctx, "while true do end", nil) // ends with SCRIPT KILL
	}()
	defer func() {
		for {
			if _, err := srv.Do(ctx, "SCRIPT", "KILL"); err != nil && strings.Contains(err.Error(), "NOTBUSY") {
				break
			}
			select {
			case <-done:
				return
			case <-time.After(10 * time.Millisecond):
			}
		}
		<-done
	}()
	testkit.Eventually(t, 5*time.Second, "the server to answer BUSY", func() bool {
		_, err := srv.Do(ctx, "PING")
		return err != nil && strings.HasPrefix(err.Error(), "BUSY")
	})
	// Made now, the Client has not learnt the server's replicas yet: its
	// first lock call asks, and hears BUSY.
	c := testkit.NewClient(t, testkit.CloseLater(t, srv.Client()))
	for _, tc := range []struct {
		name string
		try  func() error
	}{
		{"Mutex", func() error { _, err := c.Mutex("busy").TryLock(ctx); return err }},
		{"FairMutex", func() error { _, err := c.FairMutex("busy-fair").TryLock(ctx); return err }},
	} {
		err := returnsWithin(t, tryBound, tc.name+".TryLock", tc.try)
		if err == nil || !strings.Contains(err.Error(), "BUSY") {
			t.Errorf("%s.TryLock = %v, want the server's BUSY", tc.name, err)
		}
	}
}
