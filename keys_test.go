package relock

import (
	"errors"
	"strings"
	"testing"
)

func TestSlotKnownValues(t *testing.T) {
	// Values from the Redis Cluster specification and CLUSTER KEYSLOT.
	for key, want := range map[string]int{
		"123456789":      12739,
		"foo":            12182,
		"{user1000}.a":   slot("user1000"),
		"a{}b":           slot("a{}b"),
		"redisson_lock":  slot("redisson_lock"),
		"{":              slot("{"),
		"x{y}z{w}":       slot("y"),
		"prefix:{a}b}":   slot("a"),
		"no tag } here":  slot("no tag } here"),
		"{}{real}suffix": slot("{}{real}suffix"),
	} {
		if got := slot(key); got != want {
			t.Errorf("slot(%q) = %d, want %d", key, got, want)
		}
	}
}

func TestCheckName(t *testing.T) {
	for _, tc := range []struct {
		name string
		ok   bool
	}{
		{"orders:42", true},
		{"user:{1000}:profile", true},
		{"{tag}", true},
		{strings.Repeat("n", MaxNameLen), true},
		{"", false},
		{strings.Repeat("n", MaxNameLen+1), false},
		{"a{b", false},
		{"a}b", false},
		{"{}x", false},
		{"x{}y{z}", false},
	} {
		err := checkName(tc.name)
		if tc.ok != (err == nil) || err != nil && !errors.Is(err, ErrInvalidName) {
			t.Errorf("checkName(%.20q) = %v, want ok=%v", tc.name, err, tc.ok)
		}
	}
}

// FuzzCheckName checks the property the name rules exist for: a valid
// name and all its companion keys hash to one cluster slot.
func FuzzCheckName(f *testing.F) {
	for _, s := range []string{"a", "a{b}c", "{}", "a}b{c}", "{{x}}", "}{", "x{y"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		if checkName(name) != nil {
			return
		}
		want := slot(name)
		for _, k := range []string{
			companion(lockChannelPrefix, name),
			companion(tokenPrefix, name),
			fencingKey(name, true),
			suffixed(unlockLatchPrefix, name, "0123:1"),
			suffixed(requestPrefix, name, "x:y"),
		} {
			if got := slot(k); got != want {
				t.Fatalf("name %q slot %d, companion %q slot %d", name, want, k, got)
			}
		}
	})
}

// TestLatchChannel: Redisson's channel, braces around the whole name,
// except for a name with its own hash tag on a cluster, where only a
// channel of the name's slot can be published by a script.
func TestLatchChannel(t *testing.T) {
	for _, c := range []struct {
		name    string
		cluster bool
		want    string
	}{
		{"job", false, "redisson_countdownlatch__channel__{job}"},
		{"job", true, "redisson_countdownlatch__channel__{job}"},
		{"{batch}:done", false, "redisson_countdownlatch__channel__{{batch}:done}"},
		{"{batch}:done", true, "redisson_countdownlatch__channel__{batch}:done"},
	} {
		got := latchChannel(c.name, c.cluster)
		if got != c.want {
			t.Errorf("latchChannel(%q, %v) = %q, want %q", c.name, c.cluster, got, c.want)
		}
		if c.cluster && slot(got) != slot(c.name) {
			t.Errorf("cluster channel %q is not in %q's slot", got, c.name)
		}
	}
}
