package relock_test

import (
	"os"
	"testing"

	"github.com/relock-go/relock/internal/testkit"
)

// The behaviour tests of every primitive run here against the servers
// testkit.Main starts; the whole-system suites are in systest/.
func TestMain(m *testing.M) {
	os.Exit(testkit.Main(m, func() { redisAddr = testkit.Standalone.Addr }))
}
