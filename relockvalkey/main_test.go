package relockvalkey

import (
	"os"
	"testing"

	valkey "github.com/valkey-io/valkey-go"

	"github.com/relock-go/relock/internal/testkit"
)

// TestMain starts the shared servers of testkit (a standalone server and a
// cluster) and checks for goroutines left behind.
func TestMain(m *testing.M) { os.Exit(testkit.Main(m)) }

// client returns a valkey-go client of addrs, closed when the test ends;
// opt, if given, is the rest of its options.
func client(t testing.TB, addrs []string, opt ...valkey.ClientOption) valkey.Client {
	t.Helper()
	var o valkey.ClientOption
	if len(opt) > 0 {
		o = opt[0]
	}
	o.InitAddress = addrs
	c, err := valkey.NewClient(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}
