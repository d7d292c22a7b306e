package relock_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/testkit"
)

// TestReadUnlockBesideRedissonReader: while a Redisson reader holds the
// read lock, a relock reader's RLock and Unlock publish nothing on the
// lock's release channel, as Redisson's read unlock publishes only when
// it deletes the lock. The Redisson reader is its layout, written as
// Redisson writes it, with a hold shorter than the relock reader's lease,
// so that the release makes the hash's life shorter. A message published
// after the Unlock bounds the wait: it must be the first one heard.
func TestReadUnlockBesideRedissonReader(t *testing.T) {
	ctx := testkit.CtxTimeout(t, 10*time.Second)
	direct := testkit.CloseLater(t, testkit.Standalone.Client())
	c := testkit.NewClient(t, testkit.Standalone.Client(), relock.WithoutReplicaSync())
	name := testkit.LockName(t)
	const reader = "9b2c1f0e-5d4a-4c3b-8a79-6e5f4d3c2b1a:57"
	hold := testkit.RWHoldKey(name, reader, 1)
	if _, err := direct.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.HSet(ctx, name, "mode", "read", reader, "1")
		p.Set(ctx, hold, "1", 10*time.Second)
		p.PExpire(ctx, name, 10*time.Second)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { direct.Del(context.Background(), name, hold) })
	ps := direct.Subscribe(ctx, testkit.RWChannel(name))
	t.Cleanup(func() { _ = ps.Close() })
	if _, err := ps.Receive(ctx); err != nil {
		t.Fatal(err)
	}

	l, err := c.RWMutex(name).RLock(ctx, relock.WithLease(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := direct.Publish(ctx, testkit.RWChannel(name), "marker").Err(); err != nil {
		t.Fatal(err)
	}
	msg, err := ps.ReceiveMessage(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if msg.Payload != "marker" {
		t.Fatalf("the release published %q while a Redisson reader holds", msg.Payload)
	}
	if n := direct.HLen(ctx, name).Val(); n != 2 {
		t.Fatalf("the lock hash has %d fields, want the Redisson reader's and mode", n)
	}
}
