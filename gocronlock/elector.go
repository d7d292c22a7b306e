package gocronlock

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/relock-go/relock"
)

// campaignRetry is how long an Elector waits after a failed campaign (Redis
// unreachable, say) before it campaigns again.
const campaignRetry = time.Second

// Elector is a gocron.Elector: give every scheduler one, each made from a
// relock Election of the same name, with gocron.WithDistributedElector.
// The scheduler whose Elector leads runs every job; the others skip theirs.
//
// Each Elector campaigns in a goroutine of its own from NewElector until
// Close, and campaigns again whenever its leadership ends. IsLeader, which
// gocron asks before every run, judges the leadership's local deadline on
// each call: a leader that lost its lock, or could not renew it in time,
// stops running jobs at once, before any other campaigner can be elected.
// A leader that dies is replaced once its lock expires, within the
// watchdog timeout of its Client; a leader closed with Close resigns, and
// the next campaigner is elected at once.
//
// At a handoff, a tick the old leader ran can run again on the new one if
// the new one's clock is late by more than the time the handoff took:
// never after a death (the lock outlives the dead leader by most of the
// watchdog timeout), but possible after a resignation.
//
// An Elector is safe for concurrent use.
type Elector struct {
	e      *relock.Election
	value  string
	cancel context.CancelFunc
	done   chan struct{} // closed when the campaign goroutine has returned

	mu   sync.Mutex
	lead *relock.Leadership // the last leadership won; nil before it or after a failed campaign
	err  error              // why the last campaign failed, or nil

	closeOnce sync.Once
	closeErr  error // the resignation's error, set before done closes
}

// NewElector returns an Elector that campaigns in e, publishing value as
// the leader's (see relock.Election.Campaign), in the background until
// Close. It returns an error wrapping relock.ErrInvalidValue for a value
// longer than relock.MaxValueLen, and one wrapping relock.ErrInvalidOption
// for a nil e. A campaign that fails otherwise is tried again after a
// second, unless it failed for good (the election's name is invalid, or
// its Client closed): IsLeader reports why.
func NewElector(e *relock.Election, value string) (*Elector, error) {
	if e == nil {
		return nil, fmt.Errorf("%w: nil relock Election", relock.ErrInvalidOption)
	}
	if len(value) > relock.MaxValueLen {
		return nil, fmt.Errorf("%w: %d bytes, the limit is %d", relock.ErrInvalidValue, len(value), relock.MaxValueLen)
	}
	ctx, cancel := context.WithCancel(context.Background())
	el := &Elector{e: e, value: value, cancel: cancel, done: make(chan struct{})}
	go el.run(ctx)
	return el, nil
}

// run campaigns until ctx ends, and resigns then if it leads.
func (el *Elector) run(ctx context.Context) {
	defer close(el.done)
	for {
		l, err := el.e.Campaign(ctx, el.value)
		// Every campaign would fail the same way: stop, and say why.
		final := errors.Is(err, relock.ErrInvalidName) || errors.Is(err, relock.ErrClosed)
		if err != nil && ctx.Err() != nil && !final {
			return // Close cut the campaign short
		}
		el.mu.Lock()
		el.lead, el.err = l, err
		el.mu.Unlock()
		if err != nil {
			if final {
				return
			}
			t := time.NewTimer(campaignRetry)
			select {
			case <-t.C:
				continue
			case <-ctx.Done():
				t.Stop()
				return
			}
		}
		select {
		case <-l.Done():
			// Lost: IsLeader has reported it since the loss.
		case <-ctx.Done():
			// A leadership that ended meanwhile has nothing to resign.
			if err := l.Resign(context.Background()); err != nil && !errors.Is(err, relock.ErrNotHeld) {
				el.closeErr = err
			}
			return
		}
	}
}

// IsLeader returns nil while the Elector leads its election, and
// otherwise an error matching ErrNotLeader, which wraps why: the last
// campaign's error, or the end of the leadership (relock.ErrLockLost,
// relock.ErrReleased after Close). It asks nothing of Redis: the
// leadership's local deadline answers, so it costs gocron nothing per
// run.
func (el *Elector) IsLeader(context.Context) error {
	el.mu.Lock()
	l, err := el.lead, el.err
	el.mu.Unlock()
	name := el.e.Name()
	switch {
	case l != nil:
		lerr := l.Err()
		if lerr == nil {
			return nil
		}
		return fmt.Errorf("relock: election %q: %w: %w", name, ErrNotLeader, lerr)
	case err != nil:
		return fmt.Errorf("relock: election %q: %w: the last campaign failed: %w", name, ErrNotLeader, err)
	}
	return fmt.Errorf("relock: election %q: %w", name, ErrNotLeader)
}

// Leadership returns the Elector's leadership while it leads, or nil. A
// job the leader runs can fence its writes with its Term, and stop when it
// ends with its Context.
func (el *Elector) Leadership() *relock.Leadership {
	el.mu.Lock()
	l := el.lead
	el.mu.Unlock()
	if l == nil || l.Err() != nil {
		return nil
	}
	return l
}

// Close stops campaigning and resigns the leadership if the Elector leads,
// so that the next campaigner is elected at once. It returns when the
// campaign goroutine has ended, with the resignation's error, if any. The
// resignation is bounded by the Client's cleanup timeout; a campaign's
// call that a server which stopped answering holds ends with the Redis
// client's read timeout (go-redis does not end a read when its context is
// cancelled). After Close, IsLeader reports ErrNotLeader. Close is
// idempotent.
func (el *Elector) Close() error {
	el.closeOnce.Do(func() {
		el.cancel()
		<-el.done
	})
	return el.closeErr
}
