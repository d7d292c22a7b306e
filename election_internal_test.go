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

// TestParseRecordForms: a record of the older form, with the value in
// "value" only, is read as before; a value that is not UTF-8 is read from
// "value64", whatever "value" holds.
func TestParseRecordForms(t *testing.T) {
	for _, c := range []struct {
		record, want string
	}{
		{`{"since":1700000000000,"term":7,"value":"10.0.0.1:80","holder":"u:1","pid":42}`, "10.0.0.1:80"},
		{`{"since":1700000000000,"term":7,"value":"\ufffd\u0001\ufffd\ufffd","value64":"lgH//g==","holder":"u:1"}`, "\x96\x01\xff\xfe"},
		{`{"since":1700000000000,"term":7,"value":"","holder":"u:1"}`, ""},
	} {
		l, err := parseRecord(c.record)
		if err != nil {
			t.Fatalf("%s: %v", c.record, err)
		}
		if l.Value != c.want || l.Term != 7 || l.Holder != "u:1" || l.Since.UnixMilli() != 1700000000000 {
			t.Errorf("%s read as %+v, want value %q in term 7 of u:1", c.record, l, c.want)
		}
	}
}
