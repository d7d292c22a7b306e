package notify

import (
	"context"
	"testing"

	"github.com/relock-go/relock/internal/door/goredis"
)

// BenchmarkWake measures one message published and the wake it brings to
// a waiter of the hub: the hub's whole receive path.
func BenchmarkWake(b *testing.B) {
	rdb := srv.Client()
	defer rdb.Close()
	h := New(Config{Client: goredis.New(rdb)})
	defer h.Close()
	w, err := h.Subscribe("bench:wake", WakeOne)
	if err != nil {
		b.Fatal(err)
	}
	defer w.Close()
	<-w.Ready()
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if err := rdb.Publish(ctx, "bench:wake", "0").Err(); err != nil {
			b.Fatal(err)
		}
		<-w.Wake()
	}
}
