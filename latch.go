package relock

import (
	"context"
	"fmt"
	"time"

	"github.com/relock-go/relock/internal/layout"
	"github.com/relock-go/relock/internal/scripts"
	"github.com/relock-go/relock/internal/wait"
)

// msgLatchZero is published on a latch's channel when its count reaches
// zero, as by Redisson; "1" (a count was set, see latch_trysetcount.lua)
// wakes no awaiter.
const msgLatchZero = "0"

// CountDownLatch is a distributed countdown latch on one name, stored in
// Redisson's RCountDownLatch layout: a string holding the count, deleted
// when the count reaches zero, and the channel
// "redisson_countdownlatch__channel__{name}", which carries "0" when the
// count reaches zero and "1" when a count is set. Java services using
// Redisson share it with Go services. On a cluster, a name with its own
// hash tag ("{batch}:done") uses the channel
// "redisson_countdownlatch__channel__{batch}:done" instead, the only one a
// script of the name's slot can publish on (see docs/design.md).
//
// Await returns once the count is zero; every awaiter of every process is
// released by the message published when it gets there. Once at zero, the
// latch can be set again with TrySetCount. The count has no expiry: a
// latch whose counting processes died stays set until it is counted down
// or its key deleted.
//
// A CountDownLatch is a cheap handle; make it with Client.CountDownLatch.
// It is safe for concurrent use. Its zero value is not usable.
type CountDownLatch struct {
	countName
}

// CountDownLatch returns the CountDownLatch of the given name. An invalid
// name is reported by every call on it with ErrInvalidName. A latch that
// was never set has a count of zero: Await returns at once.
func (c *Client) CountDownLatch(name string) *CountDownLatch {
	return &CountDownLatch{newCountName(c, name, layout.LatchChannel(name, c.cluster), layout.LatchRequest)}
}

// TrySetCount sets the count to n if the latch is not set (never set, or
// back at zero), and reports whether it did: false with a nil error is an
// answer (the latch was set already), not a failure, which is why it
// returns a bool where the Try calls that acquire return ErrNotAcquired;
// the name is Redisson's trySetCount. n must be positive. It is
// applied exactly once when it returns nil, even if a reply is lost. With
// replica sync, a count set that too few replicas acknowledged is reported
// as set, with an error wrapping ErrReplicaSync (see CountDown).
func (l *CountDownLatch) TrySetCount(ctx context.Context, n int) (bool, error) {
	return l.trySet(ctx, "set count", scripts.LatchTrySetCount, n)
}

// CountDown decrements the count by one. The call that brings it to zero
// deletes the key and releases every awaiter. It returns ErrLatchNotSet,
// changing nothing, when the latch has no count (never set, or at zero
// already).
//
// CountDown is applied exactly once when it returns nil, even if a reply
// is lost or ctx ends while it is under way (it is then completed within
// the Client's cleanup timeout): a retry never counts twice. An error that
// is not a Redis reply leaves the outcome unknown.
//
// With replica sync (see WithReplicaSync), CountDown returns once enough
// replicas acknowledged it. When too few did, it returns an error wrapping
// ErrReplicaSync that says the count went down on the master but was not
// confirmed by enough replicas: a failover may lose it, and the latch then
// needs one more CountDown. Do not repeat such a CountDown;
// ReplicaSync.Retry does not apply to it.
func (l *CountDownLatch) CountDown(ctx context.Context) error {
	if err := l.check(ctx, "count down", 1); err != nil {
		return err
	}
	v, err := l.writeOnce(ctx, "count down", scripts.LatchCountDown, nonNegative, func(k scripts.Marked) ([]any, []any) {
		return scripts.LatchCountDownRequest{Keys: k, Publish: l.c.argPublish, MarkerTTL: l.c.argMarkerTTL, Channel: l.channel}.Build()
	})
	if err != nil {
		return err
	}
	if scripts.LatchCountDownReplyOf(v).NotSet {
		return fmt.Errorf("%w: %q", ErrLatchNotSet, l.name)
	}
	return nil
}

// Count returns the current count: 0 when the latch is not set.
func (l *CountDownLatch) Count(ctx context.Context) (int, error) {
	if err := l.check(ctx, "count", 1); err != nil {
		return 0, err
	}
	return l.count(ctx, "count")
}

// count returns the count, never below zero; op names the call in errors.
func (l *CountDownLatch) count(ctx context.Context, op string) (int, error) {
	n, err := l.read(ctx, op)
	return max(n, 0), err
}

// Await blocks until the count is zero, ctx ends, or the Client is
// closed. While it waits it sleeps on the latch's channel, shared with
// every other awaiter of the Client; the message published when the count
// reaches zero wakes all of them (each checks the count again at the
// latest every 2s, in case a message was missed). If the latch is set again
// between the message and an awaiter's check, that awaiter waits for the
// new count.
//
// When ctx ends the error wraps ctx.Err(), and nothing is left behind: no
// subscription, no timer, no key. Other errors: ErrInvalidName, ErrClosed,
// and Redis errors, wrapped.
func (l *CountDownLatch) Await(ctx context.Context) error {
	if err := l.check(ctx, "await", 1); err != nil {
		return err
	}
	n, err := l.count(ctx, "await")
	if n == 0 || err != nil {
		return err
	}
	wt := wait.Wait{Op: "await", Name: l.name, Channel: l.channel, Policy: latchPolicy,
		Local: l.channel, Waiter: wait.NewWaiter("", false)}
	return l.c.waitTries(ctx, wt, func(ctx context.Context) (bool, time.Duration, error) {
		n, err := l.count(ctx, "await") // an error matches ctx's once it ended
		return n == 0 && err == nil, fallbackRecheck, err
	})
}

// latchPolicy wakes every awaiter when the count reached zero, and none
// for a new count.
func latchPolicy(payload string) int {
	if payload == msgLatchZero {
		return -1
	}
	return 0
}
