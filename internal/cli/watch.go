package cli

import (
	"context"
	"sync"

	"github.com/redis/go-redis/v9"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/layout"
)

// watchRelease listens to the release messages of l's lock while l is
// held, and at each asks Redis whether the hold is still there
// (Lease.Check): a force-unlock then ends the hold, and relock run stops
// its command, at once rather than at the watchdog's next renewal. It
// costs relock run one pub/sub connection. The subscription is confirmed
// before watchRelease returns; a release published before it is caught by
// one Check after it. stop ends the watch and waits for it; it may be
// called more than once.
//
// The same connection subscribes, in the same command, to the lock's
// watch channel (layout.Watch, of the lock's cluster slot), which nobody
// publishes on: it tells the counts of waiters
// (see waiters) that this subscriber of the release channel is the
// holder, not a waiter.
func watchRelease(ctx context.Context, rdb redis.UniversalClient, l *relock.Lease) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	ps := subscribe(ctx, rdb, layout.Companion(layout.LockChannel, l.Name()), layout.Companion(layout.Watch, l.Name()))
	check := func() {
		cctx, cancel := context.WithTimeout(ctx, connectTimeout)
		_ = l.Check(cctx) // an unanswered check leaves it to the watchdog
		cancel()
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if ps == nil {
			return // no pub/sub: the watchdog's renewals remain
		}
		check()
		msgs := ps.Channel()
		for {
			select {
			case <-ctx.Done():
				return
			case <-l.Done():
				return
			case _, ok := <-msgs:
				if !ok {
					return
				}
				check()
			}
		}
	}()
	var once sync.Once
	return func() {
		once.Do(func() {
			cancel()
			if ps != nil {
				ps.Close()
			}
			<-done
		})
	}
}

// subscribe subscribes to channels (of one cluster slot), by SSUBSCRIBE on
// a cluster (where relock publishes by SPUBLISH from Redis 7 on) and
// SUBSCRIBE elsewhere, in one command, and waits for the server's
// confirmation of every channel. It returns nil if the server refuses
// both.
func subscribe(ctx context.Context, rdb redis.UniversalClient, channels ...string) *redis.PubSub {
	ctx, cancel := context.WithTimeout(ctx, connectTimeout)
	defer cancel()
	if cc, ok := rdb.(*redis.ClusterClient); ok {
		ps := cc.SSubscribe(ctx, channels...)
		if confirmed(ctx, ps, len(channels)) {
			return ps
		}
		ps.Close()
	}
	ps := rdb.Subscribe(ctx, channels...)
	if !confirmed(ctx, ps, len(channels)) {
		ps.Close()
		return nil
	}
	return ps
}

// confirmed reports whether the server confirmed n subscriptions of ps.
func confirmed(ctx context.Context, ps *redis.PubSub, n int) bool {
	for range n {
		if _, err := ps.Receive(ctx); err != nil {
			return false
		}
	}
	return true
}
