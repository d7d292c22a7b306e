package relock

import (
	"testing"
	"time"
)

func TestBackoffBounds(t *testing.T) {
	b := &backoff{min: time.Millisecond, max: 16 * time.Millisecond}
	for n := 0; n < 100; n++ {
		for i := 0; i < 50; i++ {
			d := b.delay(n, -1)
			bound := b.max
			if n < 4 {
				bound = b.min << n
			}
			if d < b.min || d > bound {
				t.Fatalf("delay(%d) = %v, want within [%v, %v]", n, d, b.min, bound)
			}
		}
	}
	if d := b.delay(10, 3*time.Millisecond); d > 4*time.Millisecond {
		t.Fatalf("delay %v beyond the holder's TTL", d)
	}
}
