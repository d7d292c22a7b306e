package relock_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/relock-go/relock"
)

func ExampleClient_FairMutex() {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr})
	defer rdb.Close()
	locks, err := relock.New(rdb)
	if err != nil {
		panic(err)
	}
	defer locks.Close()

	lease, err := locks.FairMutex("example:fair:settlement").Lock(ctx)
	if err != nil {
		panic(err)
	}
	fmt.Println("settling, token", lease.Token() > 0)
	if err := lease.Unlock(ctx); err != nil {
		panic(err)
	}
	// Output: settling, token true
}

// Waiters get the lock in the order they asked for it, whichever process
// they run in.
func ExampleFairMutex_Lock() {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr})
	defer rdb.Close()
	locks, _ := relock.New(rdb)
	defer locks.Close()

	m := locks.FairMutex("example:fair:printer")
	held, _ := m.Lock(ctx)
	var wg sync.WaitGroup
	for i, job := range []string{"first", "second", "third"} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			l, err := m.Lock(ctx)
			if err != nil {
				panic(err)
			}
			fmt.Println(job)
			_ = l.Unlock(ctx)
		}()
		// Let each job queue up before the next one asks.
		for rdb.LLen(ctx, "redisson_lock_queue:{example:fair:printer}").Val() < int64(i+1) {
			time.Sleep(time.Millisecond)
		}
	}
	_ = held.Unlock(ctx)
	wg.Wait()
	// Output:
	// first
	// second
	// third
}

// TryLock makes one attempt and never joins the queue; it succeeds only if
// the lock is free and nobody waits for it.
func ExampleFairMutex_TryLock() {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr})
	defer rdb.Close()
	locks, _ := relock.New(rdb)
	defer locks.Close()

	m := locks.FairMutex("example:fair:report", relock.WithWaiterTimeout(2*time.Second))
	held, _ := m.Lock(ctx)
	_, err := m.TryLock(ctx)
	fmt.Println(errors.Is(err, relock.ErrNotAcquired))
	_ = held.Unlock(ctx)
	l, err := m.TryLock(ctx)
	fmt.Println(err)
	_ = l.Unlock(ctx)
	// Output:
	// true
	// <nil>
}
