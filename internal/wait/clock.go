package wait

import "time"

// retryClock says when a waiting call attempts again: when the holder's
// TTL runs out or, until its subscriptions are confirmed (no message can
// reach it before), on a short period that grows; and never later than
// most after its last attempt, if most is set.
type retryClock struct {
	unconfirmed time.Duration // the next period while unconfirmed
	most        time.Duration // the longest sleep; 0: none
	due         time.Time     // when the call would attempt; zero: unknown
}

func newRetryClock() retryClock { return retryClock{unconfirmed: 50 * time.Millisecond} }

// next returns how long to sleep, at most d, with the call's
// subscriptions confirmed or not.
func (r *retryClock) next(d time.Duration, confirmed bool) time.Duration {
	if !confirmed && d > r.unconfirmed {
		d, r.unconfirmed = r.unconfirmed, min(2*r.unconfirmed, time.Second)
	}
	if r.most > 0 && d > r.most {
		d = r.most
	}
	r.due = time.Now().Add(d)
	return d
}

// sooner moves the next attempt to d from now if that is sooner, and
// reports whether it did.
func (r *retryClock) sooner(d time.Duration) bool {
	if d <= 0 || d >= time.Until(r.due) {
		return false
	}
	r.due = time.Now().Add(d)
	return true
}
