package relock

import (
	"context"
	"fmt"

	"github.com/relock-go/relock/internal/watchdog"
)

// Check asks Redis at once whether the hold is still in place, rather than
// at the watchdog's next renewal, and returns what Err returns then: nil
// while held, ErrLockLost once lost, ErrReleased after Unlock. A hold found
// gone (force-unlocked, expired, taken by another owner) is lost on the
// spot: Done closes. One still in place is renewed as the watchdog would
// renew it (a fixed lease is only checked). It costs one round trip and is
// meant for a holder told by other means that its lock may be gone, such as
// a release message on the lock's channel. If Redis does not answer within
// ctx, the hold stays as it was and Check returns an error that wraps ctx's
// error when ctx ended. A MultiLock or RedLock lease checks each of its
// members. A Check that crosses the lease's own Unlock and finds the hold
// already released does not count it lost: the Unlock's answer tells how
// the hold ended. A hold passed on in process by another call of the Client
// is checked once Redis has answered the switch that made it the holder
// there.
func (l *Lease) Check(ctx context.Context) error {
	if l.parts != nil {
		for _, m := range l.parts.members {
			if m != nil {
				_ = m.Check(ctx)
			}
		}
		l.parts.check(l)
		return l.Err()
	}
	if err := l.awaitConfirmed(ctx); err != nil {
		return fmt.Errorf("relock: check %q: %w", l.name, err)
	}
	if err := l.Err(); err != nil {
		return err
	}
	res := l.c.wd.Verify(ctx, l.entry)
	if l.entry.Losing() {
		// A round of the watchdog's own (such as the one a force unlock's
		// message starts) found the hold gone first and is ending the
		// lease now.
		select {
		case <-l.Done():
		case <-ctx.Done():
		}
	}
	if res == watchdog.Unknown {
		if err := l.Err(); err != nil {
			return err
		}
		if ctx.Err() != nil {
			return fmt.Errorf("relock: check %q: %w", l.name, ctx.Err())
		}
		return fmt.Errorf("relock: check %q: Redis did not answer", l.name)
	}
	return l.Err()
}
