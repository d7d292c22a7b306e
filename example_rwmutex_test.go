package relock_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/relock-go/relock"
)

func ExampleRWMutex() {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr})
	defer rdb.Close()
	locks, _ := relock.New(rdb)
	defer locks.Close()

	prices := locks.RWMutex("example:rw:price-list")
	// Readers share the lock.
	a, _ := prices.RLock(ctx)
	b, err := prices.TryRLock(ctx)
	fmt.Println("second reader:", err == nil)
	// A writer waits for every reader to leave.
	_, err = prices.TryLock(ctx)
	fmt.Println("writer while reading:", errors.Is(err, relock.ErrNotAcquired))
	_ = a.Unlock(ctx)
	_ = b.Unlock(ctx)

	w, _ := prices.Lock(ctx)
	fmt.Println("writer has a fencing token:", w.Token() > 0)
	_ = w.Unlock(ctx)
	// Output:
	// second reader: true
	// writer while reading: true
	// writer has a fencing token: true
}

func ExampleRWMutex_RLock() {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr})
	defer rdb.Close()
	locks, _ := relock.New(rdb)
	defer locks.Close()

	config := locks.RWMutex("example:rw:config")
	w, _ := config.Lock(ctx)
	_ = w.Unlock(ctx)
	// A reader's token is the last writer's: a store that checks tokens can
	// tell which version of the data the reader may see.
	r, _ := config.RLock(ctx)
	fmt.Println(r.Token() == w.Token())
	_ = r.Unlock(ctx)
	// Output: true
}

// A writer may take the read lock too, and keep reading after it stops
// writing (downgrade). The opposite, upgrade, fails with ErrUpgrade rather
// than wait for itself.
func ExampleRWMutex_downgrade() {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr})
	defer rdb.Close()
	locks, _ := relock.New(rdb)
	defer locks.Close()

	catalog := locks.RWMutex("example:rw:catalog")
	owner := relock.WithOwner(ctx)
	w, _ := catalog.Lock(owner)
	r, _ := catalog.RLock(owner) // downgrade: allowed
	_ = w.Unlock(ctx)            // still reading; other readers may join

	_, err := catalog.Lock(owner)
	fmt.Println(errors.Is(err, relock.ErrUpgrade))
	_ = r.Unlock(ctx)
	// Output: true
}

func ExampleRWMutex_RLocker() {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr})
	defer rdb.Close()
	locks, _ := relock.New(rdb)
	defer locks.Close()

	report := locks.RWMutex("example:rw:report")
	// The views are Lockers, for code that takes any lock.
	for _, l := range []relock.Locker{report.RLocker(), report.WLocker()} {
		lease, err := l.Lock(ctx)
		if err != nil {
			panic(err)
		}
		_ = lease.Unlock(ctx)
	}
	fmt.Println("read, then wrote")
	// Output: read, then wrote
}
