package relock

import (
	"time"

	"github.com/relock-go/relock/internal/notify"
)

// Waiters never sleep past a free moment (docs/design.md). A release
// message wakes one waiter of a Client, which keeps the others asleep on
// the times their own last attempts were told. Two events make those
// times stale without any message, and the waiting call that sees them
// tells the others through the hub (notify.Waiter.WakeAnotherAfter):
// it took the lock or permit for a lease, which may run out unannounced
// (a fixed lease left to expire, a hold lost), or it gave up, and its own
// retry time may have been the freshest the Client had.

// passOn is called as a waiting call returns, before its hub waiter
// closes: got tells whether it acquired, lease is the lease it took, due
// is when it would have tried again (zero: unknown).
func passOn(w *notify.Waiter, got bool, lease time.Duration, due time.Time) {
	switch {
	case got:
		w.WakeAnotherAfter(lease)
	case !due.IsZero():
		w.WakeAnotherAfter(time.Until(due))
	}
}
