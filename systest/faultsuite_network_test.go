package systest

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/faultproxy"
	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/internal/testkit"
)

// TestFaultNetwork: two clients reach the server through proxies that
// delay their traffic, drop their connections and cut them off (stall
// every byte) for up to three leases, while a third client connects
// directly. Each proxied client holds a lock of its own that the others
// wait for, and all contend for three more. Every hold cut off past its
// lease is told of its loss before another client is granted the lock, no
// two holds overlap, and nothing is left waiting.
func TestFaultNetwork(t *testing.T) {
	t.Parallel()
	const lease = 600 * time.Millisecond
	srv := redistest.Standalone(t)
	var proxies []*faultproxy.Proxy
	for range 2 {
		p, err := faultproxy.New(srv.Addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = p.Close() })
		proxies = append(proxies, p)
	}
	via := func(addr string) *relock.Client {
		return testkit.Deployment{Addr: addr}.Open(t, relock.WithWatchdogTimeout(lease))
	}
	clients := []*relock.Client{via(proxies[0].Addr()), via(proxies[1].Addr()), via(srv.Addr)}
	w := newWorkload(t, 30*time.Second)
	hot, own := names(t, "hot", 3), names(t, "own", 2)
	for i, c := range clients {
		for j := range 3 {
			w.contend(fmt.Sprintf("c%d.hot%d", i, j), c, hot, holdFor(time.Millisecond, 10*time.Millisecond))
		}
		// Waiters for the proxied clients' own locks, granted them when
		// their holders are cut off.
		w.contend(fmt.Sprintf("c%d.poacher", i), c, own, holdFor(time.Millisecond, 10*time.Millisecond))
	}
	for i := range own {
		w.contend(fmt.Sprintf("c%d.own", i), clients[i], own[i:i+1], forever)
	}

	episodes := []string{"delay", "drop", "stall", "delay", "drop", "stall"}
	if testkit.Soaking() {
		for range 60 {
			episodes = append(episodes, []string{"delay", "drop", "stall", "calm"}[rand.N(4)])
		}
	}
	stalls := 0
	for i, ep := range episodes {
		k := i % 2
		if ep != "stall" {
			k = rand.N(2)
		}
		p := proxies[k]
		switch ep {
		case "calm":
			p.SetDelay(faultproxy.Up, 0)
			p.SetDelay(faultproxy.Down, 0)
			time.Sleep(200 * time.Millisecond)
		case "delay":
			p.SetDelay(faultproxy.Up, time.Duration(rand.N(40))*time.Millisecond)
			p.SetDelay(faultproxy.Down, time.Duration(rand.N(40))*time.Millisecond)
			time.Sleep(time.Duration(200+rand.N(400)) * time.Millisecond)
		case "drop":
			p.Drop()
			time.Sleep(time.Duration(50+rand.N(200)) * time.Millisecond)
			p.Drop()
			time.Sleep(100 * time.Millisecond)
		case "stall":
			// Cut the client off while it holds its own lock, for longer
			// than the lease.
			testkit.Eventually(t, 20*time.Second, "the proxied client to hold its lock", func() bool {
				return w.holds(fmt.Sprintf("c%d.own", k), own[k])
			})
			inProgress := w.holding(own[k : k+1])
			p.Stall()
			time.Sleep(lease + time.Duration(rand.N(int64(2*lease))))
			for _, l := range inProgress {
				if err := l.Err(); err == nil {
					t.Errorf("a hold cut off for longer than its lease still reports no loss")
				}
			}
			p.Resume()
			stalls++
		}
	}
	for _, p := range proxies {
		p.SetDelay(faultproxy.Up, 0)
		p.SetDelay(faultproxy.Down, 0)
	}
	w.progressed(hot, time.Now(), 30*time.Second)
	w.stop(30 * time.Second)
	o := w.outcome()
	o.requireSafe(t, "network faults")
	if o.Lost < stalls {
		t.Errorf("%d holds lost after %d stalls past the lease, want at least one each", o.Lost, stalls)
	}
	w.logNotes()
	o.report(t, "network-faults", len(episodes), "sync", "n/a", "lease", lease, "stalls", stalls)
}
