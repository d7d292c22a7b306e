package relock

import (
	"context"
	"errors"
	"sync/atomic"

	"github.com/relock-go/relock/internal/watchdog"
)

// Every hold, a Lease or a Permit, ends the same way: its outcome is
// recorded once, then Done closes; Err judges the hold's local deadline
// itself; the watchdog's loss, Client.Close and a fixed lease running out
// each end it with their own cause. This file holds that core once.

// ending is the outcome of a hold and the channel closed once it is known.
type ending struct {
	done chan struct{}
	err  atomic.Pointer[error]
}

func newEnding() ending { return ending{done: make(chan struct{})} }

// record records err as the outcome, and reports whether it was the
// first; the caller then closes done.
func (e *ending) record(err error) bool { return e.err.CompareAndSwap(nil, errRef(err)) }

// released is ErrReleased by reference: the end of most holds, recorded
// without an allocation.
var released = ErrReleased

// errRef returns a reference to err for a hold's atomic outcome.
func errRef(err error) *error {
	if err == ErrReleased {
		return &released
	}
	return &err
}

// endable is a hold with an ending: a Lease or a Permit.
type endable interface {
	watched
	ending() *ending
	// judge has the watchdog check the hold now.
	judge()
	// watchEntry returns the watchdog entry whose deadline judges the
	// hold (nil for a composite), and its watchdog.
	watchEntry() (*watchdog.Entry, *watchdog.Watchdog)
	// finish records the outcome, closes Done and does what the hold's
	// kind does when it ends, once.
	finish(err error, cause string)
}

var (
	_ endable = (*Lease)(nil)
	_ endable = (*Permit)(nil)
)

// holdErr is Err of a Lease or Permit: nil while held, its outcome once
// ended. A hold whose local deadline has passed is lost, whether or not a
// timer has run yet.
func holdErr(h endable) error {
	e := h.ending()
	if p := e.err.Load(); p != nil {
		<-e.done // being ended elsewhere: Done closes within moments
		return *p
	}
	h.judge()
	if p := e.err.Load(); p != nil {
		<-e.done
		return *p
	}
	// The watchdog may be declaring the loss this very moment, between
	// ending the entry and recording the error: the deadline decides.
	if entry, wd := h.watchEntry(); entry != nil && entry.Deadline() <= wd.Now() {
		h.finish(ErrLockLost, watchdog.ErrDeadline.Error())
		<-e.done
		return *e.err.Load()
	}
	return nil
}

// holdContext is Context of a Lease or Permit.
func holdContext(h endable, parent context.Context) (context.Context, context.CancelFunc) {
	ctx, cancelCause := context.WithCancelCause(parent)
	go func() {
		select {
		case <-h.ending().done:
			cancelCause(holdErr(h))
		case <-ctx.Done():
		}
	}()
	return ctx, func() { cancelCause(context.Canceled) }
}

// holdLost ends h as the watchdog declared it lost, with cause.
func holdLost(h endable, cause error) {
	if errors.Is(cause, ErrClosed) {
		h.finish(errClosedLost, "client closed")
		return
	}
	if entry, _ := h.watchEntry(); cause == watchdog.ErrDeadline && entry != nil {
		switch {
		case entry.Stopped():
			h.finish(ErrLockLost, "not renewed since its release failed")
			return
		case entry.Lease == 0:
			h.finish(ErrLockLost, "fixed lease ran out")
			return
		}
	}
	h.finish(ErrLockLost, cause.Error())
}
