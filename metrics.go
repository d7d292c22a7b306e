package relock

import (
	"context"
	"fmt"
	"sync/atomic"

	"github.com/relock-go/relock/internal/wait"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// meterName is the instrumentation scope of relock's instruments.
const meterName = "github.com/relock-go/relock"

// WithMeterProvider publishes the Client's counters (see Stats) as
// OpenTelemetry instruments of the meter "github.com/relock-go/relock",
// read from the Client when the provider collects, so that they cost
// nothing on the lock path:
//
//	relock.acquisitions        counter    successful acquisitions, re-entries included
//	relock.releases            counter    leases unlocked
//	relock.losses              counter    leases lost
//	relock.waits               counter    lock calls that had to wait
//	relock.wakeups             counter    wake-ups of waiting calls
//	relock.handoffs            counter    locks (and a Semaphore's permits) passed straight to a waiter of the Client
//	relock.replica_sync.short  counter    writes too few replicas acknowledged, by relock.op:
//	                                      "write" (Stats.SyncShort), "renew" (Stats.RenewSyncShort)
//	relock.holds               gauge      holds the watchdog watches
//	relock.waiters.asleep      gauge      lock calls asleep
//	relock.channels            gauge      pub/sub channels subscribed
//
// Every observation carries the attribute relock.client, the Client's id
// (the prefix of its owner ids). Close unregisters the instruments. A nil
// mp is refused with ErrInvalidOption.
func WithMeterProvider(mp metric.MeterProvider) Option {
	return func(c *config) error {
		if mp == nil {
			return fmt.Errorf("%w: nil meter provider", ErrInvalidOption)
		}
		c.meter = mp
		return nil
	}
}

// instruments are a Client's registered instruments.
type instruments struct {
	acquired, released, lost, waits, wakeups, handoffs, short metric.Int64ObservableCounter
	held, asleep, channels                                    metric.Int64ObservableGauge
}

// registerMetrics creates the instruments of WithMeterProvider and the
// callback that observes them; Close unregisters it.
func (c *Client) registerMetrics() error {
	if c.cfg.meter == nil {
		return nil
	}
	m := c.cfg.meter.Meter(meterName)
	in, err := newInstruments(m)
	if err != nil {
		return fmt.Errorf("relock: metrics: %w", err)
	}
	reg, err := m.RegisterCallback(in.observer(c),
		in.acquired, in.released, in.lost, in.waits, in.wakeups, in.handoffs, in.short, in.held, in.asleep, in.channels)
	if err != nil {
		return fmt.Errorf("relock: metrics: %w", err)
	}
	c.metrics = reg
	return nil
}

// newInstruments creates relock's instruments on m, or reports the first
// that cannot be created.
func newInstruments(m metric.Meter) (instruments, error) {
	var in instruments
	var err error
	counter := func(dst *metric.Int64ObservableCounter, name, unit, desc string) {
		if err == nil {
			*dst, err = m.Int64ObservableCounter(name, metric.WithUnit(unit), metric.WithDescription(desc))
		}
	}
	gauge := func(dst *metric.Int64ObservableGauge, name, unit, desc string) {
		if err == nil {
			*dst, err = m.Int64ObservableGauge(name, metric.WithUnit(unit), metric.WithDescription(desc))
		}
	}
	counter(&in.acquired, "relock.acquisitions", "{acquisition}", "Successful acquisitions, re-entries included.")
	counter(&in.released, "relock.releases", "{release}", "Leases unlocked.")
	counter(&in.lost, "relock.losses", "{loss}", "Leases lost: expired, deleted, or not renewed in time.")
	counter(&in.waits, "relock.waits", "{call}", "Lock calls that had to wait.")
	counter(&in.wakeups, "relock.wakeups", "{wakeup}", "Wake-ups of waiting calls by a release message or a reconnect.")
	counter(&in.handoffs, "relock.handoffs", "{handoff}", "Locks, and a Semaphore's permits, passed by a release straight to a waiter of the same client.")
	counter(&in.short, "relock.replica_sync.short", "{write}", "Writes too few replicas acknowledged.")
	gauge(&in.held, "relock.holds", "{hold}", "Holds the watchdog watches.")
	gauge(&in.asleep, "relock.waiters.asleep", "{call}", "Lock calls asleep until a release, their TTL or their context.")
	gauge(&in.channels, "relock.channels", "{channel}", "Pub/sub channels subscribed.")
	return in, err
}

// observer returns the callback that observes c's Stats on the
// instruments, each observation carrying c's id.
func (in instruments) observer(c *Client) metric.Callback {
	client := metric.WithAttributeSet(attribute.NewSet(attribute.String("relock.client", c.id)))
	write := metric.WithAttributeSet(attribute.NewSet(attribute.String("relock.client", c.id), attribute.String("relock.op", "write")))
	renew := metric.WithAttributeSet(attribute.NewSet(attribute.String("relock.client", c.id), attribute.String("relock.op", "renew")))
	return func(_ context.Context, o metric.Observer) error {
		s := c.Stats()
		o.ObserveInt64(in.acquired, int64(s.Acquired), client)
		o.ObserveInt64(in.released, int64(s.Released), client)
		o.ObserveInt64(in.lost, int64(s.Lost), client)
		o.ObserveInt64(in.waits, int64(s.Waits), client)
		o.ObserveInt64(in.wakeups, int64(s.Wakeups), client)
		o.ObserveInt64(in.handoffs, int64(s.Handoffs), client)
		o.ObserveInt64(in.short, int64(s.SyncShort), write)
		o.ObserveInt64(in.short, int64(s.RenewSyncShort), renew)
		o.ObserveInt64(in.held, int64(s.Held), client)
		o.ObserveInt64(in.asleep, s.Asleep, client)
		o.ObserveInt64(in.channels, int64(s.Channels), client)
		return nil
	}
}

// unregisterMetrics stops the observations of a closed Client.
func (c *Client) unregisterMetrics() {
	if c.metrics == nil {
		return
	}
	if err := c.metrics.Unregister(); err != nil {
		c.cfg.logger.Debug("relock: cannot unregister metrics", "err", err)
	}
}

// Stats is a snapshot of a Client's counters.
type Stats struct {
	Acquired uint64 // successful acquisitions, re-entries included
	Released uint64 // leases unlocked
	Lost     uint64 // leases lost
	Waits    uint64 // lock calls that had to wait
	Wakeups  uint64 // wake-ups of waiting calls by a release message or a reconnect (a call may be woken several times)
	Asleep   int64  // lock calls asleep until a release, their TTL or ctx (counted once a release of this Client may pass them the lock)
	Handoffs uint64 // locks, and a Semaphore's permits, passed by a release straight to a waiter of this Client (see the glossary in the package doc)
	Held     int    // holds the watchdog watches now
	Channels int    // channels subscribed now for waiting calls (not the grant channel kept for holds alone)
	// Lingering counts the grant channels still subscribed for a moment
	// (one second) after their last waiting call returned, for the next.
	Lingering int

	// SyncShort counts acquisitions released (and failed or retried)
	// because too few replicas acknowledged them, and the synchronizers'
	// writes applied on the master that too few replicas acknowledged
	// (see WithReplicaSync).
	SyncShort uint64
	// RenewSyncShort counts renewal pipelines whose WAIT too few replicas
	// answered. Their holds stay held, since the master has them, but
	// their local deadlines do not move: a hold no replica acknowledges
	// for a whole lease is lost at its deadline.
	RenewSyncShort uint64
}

type stats struct {
	wait.Stats                         // waits, wake-ups, calls asleep
	acquired, released, lost, handoffs atomic.Uint64
	syncShort, renewSyncShort          atomic.Uint64
}

// Stats returns the Client's counters.
func (c *Client) Stats() Stats {
	return Stats{
		Acquired:  c.stats.acquired.Load(),
		Released:  c.stats.released.Load(),
		Lost:      c.stats.lost.Load(),
		Waits:     c.stats.Waits.Load(),
		Wakeups:   c.stats.Wakeups.Load(),
		Asleep:    c.stats.Asleep.Load(),
		Handoffs:  c.stats.handoffs.Load(),
		Held:      c.wd.Len(),
		Channels:  c.hub.Channels(),
		Lingering: c.hub.Lingering(),

		SyncShort:      c.stats.syncShort.Load(),
		RenewSyncShort: c.stats.renewSyncShort.Load(),
	}
}
