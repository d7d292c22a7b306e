package testkit

import (
	"context"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/door"
	"github.com/relock-go/relock/internal/door/goredis"
)

// Deployment is a Redis deployment as a client library is told of it. One
// of Addr, MasterName or Addrs is set.
type Deployment struct {
	// Addr is the address of one server.
	Addr string
	// MasterName is the name under which Sentinels monitor a master, and
	// Sentinels their addresses.
	MasterName string
	Sentinels  []string
	// Addrs are a cluster's nodes, from which the client learns the rest.
	Addrs []string

	// ReadTimeout bounds the wait for a reply; 0 leaves the library's
	// default.
	ReadTimeout time.Duration
	// Dialer, if set, makes the client's connections, for tests that put
	// a fault proxy between client and server.
	Dialer func(ctx context.Context, network, addr string) (net.Conn, error)
	// FailFast makes a call to a server that is down fail at once, as
	// docs/redlock.md recommends for RedLock's nodes: no rounds of dial
	// retries, and the call's context bounds its reads and writes.
	FailFast bool
}

// An Opener makes a client of one Redis client library for a deployment
// and returns it behind its door driver. It closes the client when the
// test ends, and fails the test when it cannot make one.
type Opener func(t testing.TB, d Deployment) door.Driver

var (
	openerMu sync.Mutex
	opener   Opener = GoRedis
)

// SetOpener makes o the client library of every Client testkit makes from
// a Deployment: a test binary's TestMain calls it before Main. go-redis
// (GoRedis) is the default.
func SetOpener(o Opener) {
	openerMu.Lock()
	opener = o
	openerMu.Unlock()
}

// Open returns the driver the test binary's Opener makes for d.
func Open(t testing.TB, d Deployment) door.Driver {
	t.Helper()
	openerMu.Lock()
	o := opener
	openerMu.Unlock()
	return o(t, d)
}

// GoRedis is the Opener of go-redis v9: a *redis.Client for a server, a
// Sentinel failover client, or a *redis.ClusterClient.
func GoRedis(t testing.TB, d Deployment) door.Driver {
	t.Helper()
	var rdb redis.UniversalClient
	switch {
	case d.MasterName != "":
		rdb = redis.NewFailoverClient(&redis.FailoverOptions{
			MasterName: d.MasterName, SentinelAddrs: d.Sentinels,
			ReadTimeout: d.ReadTimeout, Dialer: d.Dialer,
		})
	case len(d.Addrs) > 0:
		rdb = redis.NewClusterClient(&redis.ClusterOptions{Addrs: d.Addrs, ReadTimeout: d.ReadTimeout, Dialer: d.Dialer})
	case d.Addr != "":
		o := &redis.Options{Addr: d.Addr, ReadTimeout: d.ReadTimeout, Dialer: d.Dialer}
		if d.FailFast {
			o.DialerRetries, o.ContextTimeoutEnabled = 1, true
		}
		rdb = redis.NewClient(o)
	default:
		t.Fatalf("testkit: a deployment without an address: %+v", d)
	}
	return goredis.New(CloseLater(t, rdb))
}

// Open returns a relock Client of d, made with the test binary's client
// library, closed when the test ends.
func (d Deployment) Open(t testing.TB, opts ...relock.Option) *relock.Client {
	t.Helper()
	return NewClientOn(t, Open(t, d), opts...)
}

// NewClientOn returns a relock Client on driver d, closed when the test
// ends.
func NewClientOn(t testing.TB, d door.Driver, opts ...relock.Option) *relock.Client {
	t.Helper()
	c, err := relock.NewWithDriver(d, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}
