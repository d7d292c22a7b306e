package relock_test

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/relock-go/relock"
)

func ExampleNewRedLock() {
	ctx := context.Background()
	// A RedLock wants independent masters, one Client each. Here three
	// databases of one server stand in for them.
	var nodes []*relock.Client
	for db := range 3 {
		rdb := redis.NewClient(&redis.Options{Addr: redisAddr, DB: db})
		defer rdb.Close()
		c, err := relock.New(rdb)
		if err != nil {
			panic(err)
		}
		defer c.Close()
		nodes = append(nodes, c)
	}

	// Each node's attempt may take 200ms at most (a RedLockOption).
	rl := relock.NewRedLock("example:redlock:nightly-job", nodes, relock.WithAttemptTimeout(200*time.Millisecond))
	lease, err := rl.Lock(ctx)
	if err != nil {
		panic(err)
	}
	fmt.Println("quorum:", rl.Quorum())
	fmt.Println("node tokens:", len(lease.Tokens()))
	// ... run the job, stopping if <-lease.Done() ...
	if err := lease.Unlock(ctx); err != nil {
		panic(err)
	}
	// Output:
	// quorum: 2
	// node tokens: 3
}
