package relock

import (
	"testing"
	"time"
)

// TestObserverRecheck: an observer looks again just after the leader's
// lock would expire, also when its PTTL was 0 (the lock expires within
// the millisecond: the hammer caught an observer that waited the idle
// period then, and missed the term's end); with no leader, or a lock
// without a TTL, after idle.
func TestObserverRecheck(t *testing.T) {
	const idle = 30 * time.Second
	leader := Leader{Holder: "u:1", Term: 7}
	for _, c := range []struct {
		name string
		r    reading
		want time.Duration
	}{
		{"held", reading{leader: leader, ttl: 599 * time.Millisecond}, 600 * time.Millisecond},
		{"expiring this millisecond", reading{leader: leader, ttl: 0}, time.Millisecond},
		{"no TTL", reading{leader: leader, ttl: -time.Millisecond}, idle},
		{"no leader", reading{ttl: 400 * time.Millisecond}, idle},
		{"no lock", reading{ttl: -2 * time.Millisecond}, idle},
	} {
		if got := c.r.recheck(idle); got != c.want {
			t.Errorf("%s: recheck = %v, want %v", c.name, got, c.want)
		}
	}
}
