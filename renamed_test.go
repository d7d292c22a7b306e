package relock_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/internal/testkit"
)

// TestNewRefusesRenamedCommands: on a server that lacks a command relock
// needs (rename-command ... ""), New fails with ErrUnsupportedServer
// naming it, instead of a Client whose every call fails (EVAL, EVALSHA),
// or whose releases fail after their writes (PUBLISH). Where the check's
// own EVAL runs, nothing is written.
func TestNewRefusesRenamedCommands(t *testing.T) {
	for _, tc := range []struct {
		command      string
		writeNothing bool
	}{
		{"EVAL", true},
		{"EVALSHA", false}, // the check's EVAL ran, and made the Client known for its TTL
		{"PUBLISH", true},
	} {
		t.Run(tc.command, func(t *testing.T) {
			t.Parallel()
			srv := redistest.Standalone(t, redistest.Options{Args: []string{"rename-command " + tc.command + ` ""`}})
			rdb := testkit.CloseLater(t, srv.Client())
			c, err := relock.New(rdb)
			if err == nil {
				c.Close()
				t.Fatalf("New succeeded on a server without %s", tc.command)
			}
			if !errors.Is(err, relock.ErrUnsupportedServer) || !strings.Contains(err.Error(), " "+tc.command+" ") {
				t.Fatalf("New = %v, want ErrUnsupportedServer naming %s", err, tc.command)
			}
			keys, kerr := rdb.Keys(context.Background(), "*").Result()
			if kerr != nil {
				t.Fatal(kerr)
			}
			if tc.writeNothing && len(keys) > 0 {
				t.Fatalf("the failed New wrote %v", keys)
			}
		})
	}
}
