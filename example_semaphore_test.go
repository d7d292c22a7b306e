package relock_test

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/redis/go-redis/v9"

	"github.com/relock-go/relock"
)

func ExampleSemaphore() {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr})
	defer rdb.Close()
	locks, err := relock.New(rdb)
	if err != nil {
		panic(err)
	}
	defer locks.Close()

	// At most two uploads at a time, across every process.
	uploads := locks.Semaphore("example:uploads")
	defer rdb.Del(ctx, uploads.Name())
	if _, err := uploads.TrySetPermits(ctx, 2); err != nil {
		panic(err)
	}
	var wg sync.WaitGroup
	for i := 0; i < 5; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := uploads.Acquire(ctx, 1); err != nil {
				panic(err)
			}
			defer uploads.Release(ctx, 1)
			// ... upload ...
		}()
	}
	wg.Wait()
	n, _ := uploads.Available(ctx)
	fmt.Println("permits available:", n)
	// TryAcquire makes one attempt and never waits.
	err = uploads.TryAcquire(ctx, 3)
	fmt.Println("three at once:", errors.Is(err, relock.ErrNotAcquired))
	// Output:
	// permits available: 2
	// three at once: true
}

func ExamplePermitSemaphore() {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr})
	defer rdb.Close()
	locks, err := relock.New(rdb)
	if err != nil {
		panic(err)
	}
	defer locks.Close()

	// One permit per licence seat; a holder that dies gives its seat back
	// when its permit's lease runs out.
	seats := locks.PermitSemaphore("example:licence-seats")
	defer rdb.Del(ctx, seats.Name())
	if _, err := seats.TrySetPermits(ctx, 1); err != nil {
		panic(err)
	}
	permit, err := seats.Acquire(ctx) // renewed by the watchdog until released
	if err != nil {
		panic(err)
	}
	_, err = seats.TryAcquire(ctx)
	fmt.Println("second seat:", errors.Is(err, relock.ErrNotAcquired))
	select {
	case <-permit.Done():
		fmt.Println("seat lost:", permit.Err())
	default:
		fmt.Println("seat held, id of", len(permit.ID()), "hex digits")
	}
	if err := permit.Release(ctx); err != nil {
		panic(err)
	}
	fmt.Println(permit.Err())
	// Output:
	// second seat: true
	// seat held, id of 48 hex digits
	// relock: lock released
}
