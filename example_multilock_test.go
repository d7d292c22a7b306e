package relock_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/relock-go/relock"
)

func ExampleMulti() {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr})
	defer rdb.Close()
	locks, err := relock.New(rdb)
	if err != nil {
		panic(err)
	}
	defer locks.Close()

	// Move money between two accounts: hold both, or neither. The order of
	// the members does not matter: a transfer the other way round cannot
	// deadlock with this one.
	both := relock.Multi(locks.Mutex("example:multi:account:1"), locks.Mutex("example:multi:account:2"))
	lease, err := both.Lock(ctx)
	if err != nil {
		panic(err)
	}
	fmt.Println("holding", lease.Name())
	fmt.Println("one token per member:", len(lease.Tokens()))
	if err := lease.Unlock(ctx); err != nil {
		panic(err)
	}
	// Output:
	// holding example:multi:account:1,example:multi:account:2
	// one token per member: 2
}

func ExampleMultiLock_TryLock() {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr})
	defer rdb.Close()
	locks, _ := relock.New(rdb)
	defer locks.Close()

	a, b := locks.Mutex("example:multi:a"), locks.Mutex("example:multi:b")
	held, _ := b.Lock(ctx)

	_, err := relock.Multi(a, b).TryLock(ctx)
	fmt.Println(errors.Is(err, relock.ErrNotAcquired))
	locked, _ := a.IsLocked(ctx)
	fmt.Println("a left locked:", locked) // all or nothing
	_ = held.Unlock(ctx)
	// Output:
	// true
	// a left locked: false
}
