package relock_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/relock-go/relock"
)

// redisAddr is the address of the Redis server the examples run against;
// the tests start it.
var redisAddr string

func Example() {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr})
	defer rdb.Close()
	locks, err := relock.New(rdb)
	if err != nil {
		panic(err)
	}
	defer locks.Close()

	lease, err := locks.Mutex("example:invoice:42").Lock(ctx)
	if err != nil {
		panic(err)
	}
	fmt.Println("charging the card once")
	if err := lease.Unlock(ctx); err != nil {
		panic(err)
	}
	// Output: charging the card once
}

func ExampleMutex_TryLock() {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr})
	defer rdb.Close()
	locks, _ := relock.New(rdb)
	defer locks.Close()

	m := locks.Mutex("example:nightly-report")
	first, _ := m.TryLock(ctx)
	_, err := m.TryLock(ctx)
	fmt.Println(errors.Is(err, relock.ErrNotAcquired))
	_ = first.Unlock(ctx)
	// Output: true
}

func ExampleWithOwner() {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr})
	defer rdb.Close()
	locks, _ := relock.New(rdb)
	defer locks.Close()

	m := locks.Mutex("example:account:7")
	owner := relock.WithOwner(ctx)
	outer, _ := m.Lock(owner)
	inner, err := m.Lock(owner) // re-entry: no deadlock
	fmt.Println("re-entered:", err == nil, "same token:", inner.Token() == outer.Token())

	_ = inner.Unlock(ctx)
	locked, _ := m.IsLocked(ctx)
	fmt.Println("locked after the inner unlock:", locked)
	_ = outer.Unlock(ctx)
	locked, _ = m.IsLocked(ctx)
	fmt.Println("locked after the outer unlock:", locked)
	// Output:
	// re-entered: true same token: true
	// locked after the inner unlock: true
	// locked after the outer unlock: false
}

func ExampleLease_Done() {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr})
	defer rdb.Close()
	locks, _ := relock.New(rdb, relock.WithWatchdogTimeout(time.Second))
	defer locks.Close()

	lease, _ := locks.Mutex("example:migration").Lock(ctx)
	// Someone deletes the lock behind the holder's back.
	rdb.Del(ctx, "example:migration")

	select {
	case <-lease.Done(): // a long job selects on Done and stops writing
		fmt.Println(errors.Is(lease.Err(), relock.ErrLockLost))
	case <-time.After(10 * time.Second):
		fmt.Println("still held")
	}
	// Output: true
}

func ExampleWithLease() {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr})
	defer rdb.Close()
	locks, _ := relock.New(rdb)
	defer locks.Close()

	lease, _ := locks.Mutex("example:cache-refresh").Lock(ctx, relock.WithLease(50*time.Millisecond))
	<-lease.Done() // nobody renews a fixed lease
	// Done closes a little before the key expires on the server: the lease
	// minus a margin for clock drift.
	fmt.Println(errors.Is(lease.Err(), relock.ErrLockLost))
	// Output: true
}

func ExampleLease_Token() {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr})
	defer rdb.Close()
	locks, _ := relock.New(rdb)
	defer locks.Close()

	m := locks.Mutex("example:ledger")
	a, _ := m.Lock(ctx)
	_ = a.Unlock(ctx)
	b, _ := m.Lock(ctx)
	_ = b.Unlock(ctx)
	// A storage layer that remembers the highest token it saw refuses
	// writes carrying a smaller one.
	fmt.Println(b.Token() > a.Token())
	// Output: true
}

func ExampleWithSpin() {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr})
	defer rdb.Close()
	locks, _ := relock.New(rdb)
	defer locks.Close()

	// Poll with jittered backoff from 1ms to 50ms instead of subscribing:
	// for very many locks, or servers without pub/sub.
	lease, err := locks.Mutex("example:shard:17").Lock(ctx, relock.WithSpin(time.Millisecond, 50*time.Millisecond))
	fmt.Println(err == nil, locks.Stats().Channels)
	_ = lease.Unlock(ctx)
	// Output: true 0
}
