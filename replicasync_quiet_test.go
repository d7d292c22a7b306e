package relock_test

import (
	"strings"
	"testing"
	"time"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/testkit"
)

// TestReplicaSyncProbeQuiet: a server that refuses INFO and WAIT (here by
// ACL, as embedded and managed servers do) and shows no replica is no news
// to a Client that did not ask for replica sync: it logs no warning and
// locks. A Client that asked for replica sync is warned.
func TestReplicaSyncProbeQuiet(t *testing.T) {
	ctx := testkit.CtxTimeout(t, 10*time.Second)
	rules := []string{"~*", "&*", "+@all", "-info", "-wait"}
	for _, tc := range []struct {
		name string
		opts []relock.Option
		warn bool
	}{
		{"default", nil, false},
		{"asked for", []relock.Option{relock.WithReplicaSync(relock.ReplicaSync{Fallback: true})}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var sink rsSink
			c := testkit.NewClient(t, aclClient(t, testkit.Standalone, rules...), append(tc.opts, sink.logger())...)
			l, err := c.Mutex(testkit.LockName(t)).Lock(ctx)
			if err != nil {
				t.Fatalf("Lock: %v", err)
			}
			if err := l.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
			c.Close() // the probe runs in the background: wait for it
			warned := strings.Contains(sink.String(), "level=WARN")
			if warned != tc.warn {
				t.Fatalf("warned = %v, want %v; log:\n%s", warned, tc.warn, sink.String())
			}
		})
	}
}
