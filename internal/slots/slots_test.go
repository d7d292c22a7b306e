package slots

import (
	"testing"
)

func TestOf(t *testing.T) {
	// Values from the Redis Cluster specification and CLUSTER KEYSLOT.
	for _, tt := range []struct {
		key  string
		slot int
	}{
		{"123456789", 12739},
		{"foo", 12182},
		{"{user1000}.following", Of("user1000")},
		{"{user1000}.followers", Of("user1000")},
		{"foo{}{bar}", Of("foo{}{bar}")}, // empty tag: the whole key
		{"foo{{bar}}zap", Of("{bar")},
		{"x{y}z{w}", Of("y")},     // the first tag only
		{"prefix:{a}b}", Of("a")}, // up to the first '}' after it
		{"{}{real}suffix", Of("{}{real}suffix")},
	} {
		if got := Of(tt.key); got != tt.slot {
			t.Errorf("Of(%q) = %d, want %d", tt.key, got, tt.slot)
		}
	}
	if Of("foo{}{bar}") == Of("bar") {
		t.Errorf("an empty hash tag must not select the next one")
	}
}

func TestTagCoversEverySlot(t *testing.T) {
	seen := make(map[string]bool, Count)
	longest := 0
	for s := 0; s < Count; s++ {
		tag := Tag(s)
		if tag == "" {
			t.Fatalf("slot %d has no tag", s)
		}
		if got := Of("{" + tag + "}"); got != s {
			t.Fatalf("Tag(%d) = %q hashes to slot %d", s, tag, got)
		}
		if seen[tag] {
			t.Fatalf("tag %q serves two slots", tag)
		}
		seen[tag] = true
		longest = max(longest, len(tag))
	}
	if longest > 4 {
		t.Errorf("longest tag has %d characters, want at most 4", longest)
	}
}

// The tags are part of the data layout on Redis: these must never change.
func TestTagIsStable(t *testing.T) {
	for s, want := range map[int]string{0: "1bz", 1: "emj", 100: "0or", 5000: "4tw", 12739: "za2", 16383: "hia"} {
		if got := Tag(s); got != want {
			t.Errorf("Tag(%d) = %q, want %q", s, got, want)
		}
	}
}
