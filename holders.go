package relock

import (
	"sync"
	"time"

	"github.com/relock-go/relock/internal/notify"
)

// Holders listen. While a Client on one server or under Sentinel holds
// anything its watchdog renews, its pub/sub connection keeps the Client's
// grant channel subscribed, as a waiting call would: a reconnect of that
// connection (a restart, a failover) then has every hold renewed at once
// (Config.Reconnected), and a force unlock by another Client reaches the
// holder ("h:", see routeGrant) without waiting for the next renewal. On
// a cluster the grant channels are one per slot, and holders are told
// only by their renewals.

// holderListen is the Client's reference on its grant channel for its
// holds, a keeper (notify.Hub.Keep). A goroutine of the Client's own takes
// it off the lock path when the watchdog goes from no holds to some, and
// gives it back once it finds none left, the channel's linger keeping the
// subscription a while longer.
type holderListen struct {
	mu        sync.Mutex
	started   bool          // the goroutine runs
	listening bool          // the reference is taken, or the goroutine is asked to take it
	kick      chan struct{} // the goroutine has a reference to take
}

// holding is the watchdog's Busy: it has the Client's holds heard, unless
// they are already. It must not block.
func (c *Client) holding() {
	hl := &c.listen
	hl.mu.Lock()
	defer hl.mu.Unlock()
	if hl.listening {
		return
	}
	if !hl.started {
		hl.kick = make(chan struct{}, 1)
		if hl.started = c.spawn(c.listenHolders); !hl.started {
			return // closing
		}
	}
	hl.listening = true
	select {
	case hl.kick <- struct{}{}:
	default:
	}
}

// listenHolders holds the grant channel's reference while the Client
// holds something, looking every grantLinger whether it still does, until
// Close.
func (c *Client) listenHolders() {
	hl := &c.listen
	channel := c.grantChannel("")
	every := grantLinger(channel)
	var w *notify.Waiter
	check := time.NewTicker(every)
	check.Stop()
	defer check.Stop()
	defer func() { w.Close() }()
	for {
		select {
		case <-c.closing:
			return
		case <-hl.kick:
			if w != nil {
				continue
			}
			var err error
			if w, err = c.hub.Keep(channel, c.routeGrant); err != nil {
				return // closed
			}
			check.Reset(every)
		case <-check.C:
			if c.wd.Len() > 0 {
				continue
			}
			hl.mu.Lock()
			// An Add after this look calls holding, which waits for the
			// lock and then asks for the reference again.
			idle := c.wd.Len() == 0
			if idle {
				hl.listening = false
			}
			hl.mu.Unlock()
			if idle {
				check.Stop()
				w.Close()
				w = nil
			}
		}
	}
}
