package testkit

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/relock-go/relock/internal/redistest"
)

// Replicas returns how many replicas master lists, and how many of
// them are online and have acknowledged some offset, that is answer WAIT:
// a replica that has just synchronised with its master starts to only
// after its first heartbeat.
func Replicas(t testing.TB, master *redistest.Server) (listed, acking int) {
	t.Helper()
	v, err := master.Do(context.Background(), "INFO", "replication")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(v.(string), "\n") {
		line = strings.TrimSpace(line)
		if !strings.HasPrefix(line, "slave") || !strings.Contains(line, "state=") {
			continue
		}
		listed++
		if strings.Contains(line, "state=online") && !strings.Contains(line+",", ",offset=0,") {
			acking++
		}
	}
	return listed, acking
}

// WaitReplicasOnline waits until master has n replicas and all of them answer
// WAIT.
func WaitReplicasOnline(t testing.TB, master *redistest.Server, n int) {
	t.Helper()
	Eventually(t, 30*time.Second, strconv.Itoa(n)+" replicas acknowledging", func() bool {
		listed, acking := Replicas(t, master)
		return listed == n && acking == n
	})
}
