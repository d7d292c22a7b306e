package relockrueidis

import (
	"context"
	"crypto/tls"
	"net"
	"os"
	"testing"

	"github.com/redis/rueidis"

	"github.com/relock-go/relock/internal/conformance"
	"github.com/relock-go/relock/internal/door"
	"github.com/relock-go/relock/internal/testkit"
)

// TestMain sets open as the client library of the Clients testkit makes,
// starts testkit's shared servers (a standalone server and a cluster), and
// checks for goroutines left behind: the library's shared suite of contract
// and fault tests (TestConformance) then runs on rueidis.
func TestMain(m *testing.M) { os.Exit(conformance.Main(m, open)) }

// TestConformance runs the library's shared suite on rueidis clients.
func TestConformance(t *testing.T) { conformance.Run(t) }

// open returns a rueidis client of d behind its driver, the client
// closed when the test ends: the suite's testkit.Opener.
func open(t testing.TB, d testkit.Deployment) door.Driver {
	t.Helper()
	return newDriver(client(t, d))
}

// client returns a rueidis client of d, closed when the test ends.
func client(t testing.TB, d testkit.Deployment) rueidis.Client {
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
