package relock

import (
	"errors"
	"strings"
	"testing"

	"github.com/relock-go/relock/internal/layout"
	"github.com/relock-go/relock/internal/slots"
)

func TestSlotKnownValues(t *testing.T) {
	// Values from the Redis Cluster specification and CLUSTER KEYSLOT;
	// the hash tag rules as relock's names rely on them.
	for key, want := range map[string]int{
		"123456789":      12739,
		"foo":            12182,
		"{user1000}.a":   slots.Of("user1000"),
		"a{}b":           slots.Of("a{}b"),
		"redisson_lock":  slots.Of("redisson_lock"),
		"{":              slots.Of("{"),
		"x{y}z{w}":       slots.Of("y"),
		"prefix:{a}b}":   slots.Of("a"),
		"no tag } here":  slots.Of("no tag } here"),
		"{}{real}suffix": slots.Of("{}{real}suffix"),
	} {
		if got := slots.Of(key); got != want {
			t.Errorf("slot of %q = %d, want %d", key, got, want)
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
		want := slots.Of(name)
		for _, k := range []string{
			layout.Companion(layout.LockChannel, name),
			layout.Companion(layout.Token, name),
			layout.Fencing(name, true),
			layout.Grants("0123", name, true),
			layout.Marker(layout.UnlockLatch, name, "0123:1"),
			layout.Marker(layout.LockRequest, name, "x:y"),
			layout.PermitTimeouts(name),
			layout.ReaderHold(name, "x:y", 1),
			layout.LatchChannel(name, true),
		} {
			if got := slots.Of(k); got != want {
				t.Fatalf("name %q slot %d, companion %q slot %d", name, want, k, got)
			}
		}
	})
}
