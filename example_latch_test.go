package relock_test

import (
	"context"
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/relock-go/relock"
)

func ExampleCountDownLatch() {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr})
	defer rdb.Close()
	locks, err := relock.New(rdb)
	if err != nil {
		panic(err)
	}
	defer locks.Close()

	// The report waits for three shards, each loaded by any process.
	shards := locks.CountDownLatch("example:shards-loaded")
	if _, err := shards.TrySetCount(ctx, 3); err != nil {
		panic(err)
	}
	for i := 0; i < 3; i++ {
		go func() {
			// ... load shard i ...
			if err := shards.CountDown(ctx); err != nil {
				panic(err)
			}
		}()
	}
	if err := shards.Await(ctx); err != nil {
		panic(err)
	}
	n, _ := shards.Count(ctx)
	fmt.Println("shards left:", n)
	// Output: shards left: 0
}
