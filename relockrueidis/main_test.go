package relockrueidis

import (
	"context"
	"crypto/tls"
	"net"
	"os"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/relock-go/relock/internal/door"
	"github.com/relock-go/relock/internal/testkit"
)

// TestMain starts the shared servers of testkit (a standalone server and a
// cluster) and checks for goroutines left behind. The library's shared
// suite of contract and fault tests takes its clients from an opener of
// this shape (open, below), set here before testkit.Main.
func TestMain(m *testing.M) { os.Exit(testkit.Main(m)) }

// deployment is a Redis deployment as the tests tell a client of it: one
// of Addr, MasterName (with Sentinels) or Addrs is set.
type deployment struct {
	Addr       string
	MasterName string
	Sentinels  []string
	Addrs      []string
	// ReadTimeout bounds a connection's wait for a reply (rueidis's
	// ConnWriteTimeout, which bounds both ways); 0 leaves the default.
	ReadTimeout time.Duration
	// Dialer, if set, makes the client's connections (a fault proxy).
	Dialer func(ctx context.Context, network, addr string) (net.Conn, error)
	// FailFast makes a call to a server that is down fail at once.
	FailFast bool
}

// open returns a rueidis client of d behind its driver, the client
// closed when the test ends.
func open(t testing.TB, d deployment) door.Driver {
	t.Helper()
	return newDriver(client(t, d))
}

// client returns a rueidis client of d, closed when the test ends.
func client(t testing.TB, d deployment) rueidis.Client {
	t.Helper()
	var o rueidis.ClientOption
	switch {
	case d.MasterName != "":
		o.InitAddress, o.Sentinel.MasterSet = d.Sentinels, d.MasterName
	case len(d.Addrs) > 0:
		o.InitAddress = d.Addrs
	case d.Addr != "":
		o.InitAddress = []string{d.Addr}
	default:
		t.Fatalf("a deployment without an address: %+v", d)
	}
	o.ConnWriteTimeout = d.ReadTimeout
	if d.Dialer != nil {
		o.DialCtxFn = func(ctx context.Context, dst string, _ *net.Dialer, _ *tls.Config) (net.Conn, error) {
			return d.Dialer(ctx, "tcp", dst)
		}
	}
	o.DisableRetry = d.FailFast
	c, err := rueidis.NewClient(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}
