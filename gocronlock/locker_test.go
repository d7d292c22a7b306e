package gocronlock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/gocronlock"
)

// newLocker returns a Locker on a Client of its own, whose locks are
// prefixed with the test's name.
func newLocker(t *testing.T, skew time.Duration, opts ...relock.Option) *gocronlock.Locker {
	t.Helper()
	l, err := gocronlock.NewLocker(newClient(t, opts...), gocronlock.WithKeyPrefix(t.Name()+":"), gocronlock.WithSkew(skew))
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// TestLockerKeepsTickForSkew checks that a run shorter than the skew keeps
// its lock until the skew has passed: a second scheduler that comes
// meanwhile is refused, and takes it once Unlock has returned.
func TestLockerKeepsTickForSkew(t *testing.T) {
	const skew = 500 * time.Millisecond
	ctx := context.Background()
	a, b := newLocker(t, skew), newLocker(t, skew)
	taken := time.Now()
	lock, err := a.Lock(ctx, "job")
	if err != nil {
		t.Fatal(err)
	}
	unlocked := make(chan error, 1)
	go func() { unlocked <- lock.Unlock(ctx) }()
	if _, err := b.Lock(ctx, "job"); !errors.Is(err, relock.ErrNotAcquired) {
		t.Fatalf("Lock while the first run's Unlock waits out the skew: %v, want ErrNotAcquired", err)
	}
	if err := <-unlocked; err != nil {
		t.Fatal(err)
	}
	if held := time.Since(taken); held < skew {
		t.Errorf("Unlock returned %v after Lock, before the skew %v", held, skew)
	}
	lock, err = b.Lock(ctx, "job")
	if err != nil {
		t.Fatalf("Lock after the first run's Unlock: %v", err)
	}
	if err := lock.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestLockerKeepsLongRun checks that the watchdog keeps the lock of a run
// that lasts longer than the lease, and that Unlock after the skew
// releases it at once.
func TestLockerKeepsLongRun(t *testing.T) {
	const lease = 200 * time.Millisecond
	ctx := context.Background()
	a := newLocker(t, time.Millisecond, relock.WithWatchdogTimeout(lease))
	b := newLocker(t, time.Millisecond)
	lock, err := a.Lock(ctx, "job")
	if err != nil {
		t.Fatal(err)
	}
	<-time.After(3 * lease) // the run outlasts its lease: the watchdog renews it
	if _, err := b.Lock(ctx, "job"); !errors.Is(err, relock.ErrNotAcquired) {
		t.Fatalf("Lock during a run longer than the lease: %v, want ErrNotAcquired", err)
	}
	if err := lock.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	lock, err = b.Lock(ctx, "job")
	if err != nil {
		t.Fatalf("Lock after the run's Unlock: %v", err)
	}
	if err := lock.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestLockerLockLost checks that the Unlock of a run whose lock was
// deleted meanwhile reports ErrNotHeld, and that the lock is free.
func TestLockerLockLost(t *testing.T) {
	ctx := context.Background()
	a, b := newLocker(t, time.Millisecond), newLocker(t, time.Millisecond)
	lock, err := a.Lock(ctx, "job")
	if err != nil {
		t.Fatal(err)
	}
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr})
	defer rdb.Close()
	if n, err := rdb.Del(ctx, t.Name()+":job").Result(); err != nil || n != 1 {
		t.Fatalf("delete the run's lock: %d, %v", n, err)
	}
	if err := lock.Unlock(ctx); !errors.Is(err, relock.ErrNotHeld) {
		t.Fatalf("Unlock of a deleted lock: %v, want ErrNotHeld", err)
	}
	lock, err = b.Lock(ctx, "job")
	if err != nil {
		t.Fatal(err)
	}
	if err := lock.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestLockerInvalid checks the errors of bad options and bad names.
func TestLockerInvalid(t *testing.T) {
	c := newClient(t)
	for _, d := range []time.Duration{0, -time.Second, time.Microsecond} {
		if _, err := gocronlock.NewLocker(c, gocronlock.WithSkew(d)); !errors.Is(err, relock.ErrInvalidOption) {
			t.Errorf("WithSkew(%v): %v, want ErrInvalidOption", d, err)
		}
	}
	if _, err := gocronlock.NewLocker(nil); !errors.Is(err, relock.ErrInvalidOption) {
		t.Errorf("NewLocker(nil): %v, want ErrInvalidOption", err)
	}
	l, err := gocronlock.NewLocker(c, gocronlock.WithKeyPrefix(""))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Lock(context.Background(), ""); !errors.Is(err, relock.ErrInvalidName) {
		t.Errorf("Lock of an empty name: %v, want ErrInvalidName", err)
	}
}
