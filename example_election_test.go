package relock_test

import (
	"context"
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/relock-go/relock"
)

func ExampleElection() {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr})
	defer rdb.Close()
	locks, err := relock.New(rdb)
	if err != nil {
		panic(err)
	}
	defer locks.Close()

	// Every replica of a service campaigns; one at a time leads and runs
	// the scheduler, and publishes where it can be reached.
	election := locks.Election("example:scheduler")
	leadership, err := election.Campaign(ctx, "10.0.0.7:8080")
	if err != nil {
		panic(err)
	}
	work, cancel := leadership.Context(ctx) // cancelled if leadership is lost
	defer cancel()
	_ = work // ... run the scheduler with work, fencing its writes with Term ...

	leader, err := election.Leader(ctx)
	if err != nil {
		panic(err)
	}
	fmt.Println("leader at", leader.Value, "in its own term:", leader.Term == leadership.Term())
	if err := leadership.Resign(ctx); err != nil {
		panic(err)
	}
	// Output: leader at 10.0.0.7:8080 in its own term: true
}
