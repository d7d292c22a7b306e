package redistest

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
)

// TestRequireMessage checks that a missing binary names the command that
// installs the chosen server, and that Start fails with it too.
func TestRequireMessage(t *testing.T) {
	for _, tc := range []struct {
		server string
		want   string
	}{
		{"", "redis-server not found: install it with: sudo apt-get install -y redis-server redis-sentinel redis-tools"},
		{"redis", "redis-server not found: install it with: sudo apt-get install -y redis-server redis-sentinel redis-tools"},
		{"valkey", "valkey-server not found: install it with: sudo apt-get install -y -t bookworm-backports valkey-server valkey-tools"},
	} {
		t.Run("server="+tc.server, func(t *testing.T) {
			t.Setenv("PATH", t.TempDir())
			t.Setenv(ServerEnv, tc.server)
			err := Require()
			if err == nil {
				t.Fatal("Require succeeded with an empty PATH")
			}
			if err.Error() != tc.want {
				t.Fatalf("Require() = %q, want %q", err, tc.want)
			}
			if !errors.Is(err, ErrNoRedis) {
				t.Fatal("error does not match ErrNoRedis")
			}
			if _, err := Start(Options{}); !errors.Is(err, ErrNoRedis) {
				t.Fatalf("Start with an empty PATH: %v", err)
			}
			if _, err := StartCluster(3, 0); !errors.Is(err, ErrNoRedis) {
				t.Fatalf("StartCluster with an empty PATH: %v", err)
			}
		})
	}
}

// TestRequireUnknownServer checks that a server name the package does not
// know fails, rather than running the tests on Redis.
func TestRequireUnknownServer(t *testing.T) {
	t.Setenv(ServerEnv, "keydb")
	err := Require()
	if err == nil || !strings.Contains(err.Error(), `RELOCK_TEST_SERVER="keydb"`) {
		t.Fatalf("Require() = %v, want an error naming the unknown server", err)
	}
	if errors.Is(err, ErrNoRedis) {
		t.Fatal("an unknown server reads as a missing binary")
	}
	if _, err := Start(Options{}); err == nil {
		t.Fatal("Start succeeded with an unknown server")
	}
}

// TestStartsChosenServer checks that the servers started are the ones
// ServerEnv chooses: Valkey reports valkey_version in INFO server (next to
// the redis_version it keeps for compatibility), Redis does not. Run it
// with RELOCK_TEST_SERVER=valkey to check the Valkey side.
func TestStartsChosenServer(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	valkey := os.Getenv(ServerEnv) == "valkey"
	check := func(what string, s *Server) {
		t.Helper()
		v, err := s.Do(ctx, "INFO", "server")
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if got := strings.Contains(v.(string), "valkey_version:"); got != valkey {
			t.Fatalf("%s: valkey_version in INFO server is %v, want %v (%s=%q)", what, got, valkey, ServerEnv, os.Getenv(ServerEnv))
		}
	}
	check("standalone", Standalone(t))
	sen := NewSentinel(t)
	for _, s := range sen.Sentinels {
		check("sentinel "+s.Addr, s)
	}
	c := NewCluster(t, 3, 0)
	for _, s := range c.Nodes {
		check("cluster node "+s.Addr, s)
	}
}
