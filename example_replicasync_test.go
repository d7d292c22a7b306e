package relock_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/relock-go/relock"
)

// Every acquisition must reach at least one replica within 50ms. The
// example's server has no replica, so the acquisition is released again
// and Lock fails with ErrReplicaSync; nothing stays locked.
func ExampleWithReplicaSync() {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr})
	defer rdb.Close()
	locks, err := relock.New(rdb, relock.WithReplicaSync(relock.ReplicaSync{
		Replicas: 1,
		Timeout:  50 * time.Millisecond,
	}))
	if err != nil {
		panic(err)
	}
	defer locks.Close()

	m := locks.Mutex("example:replicasync:ledger")
	_, err = m.Lock(ctx)
	fmt.Println(errors.Is(err, relock.ErrReplicaSync))
	locked, _ := m.IsLocked(ctx)
	fmt.Println(locked)
	// Output:
	// true
	// false
}

// A deployment whose master has replicas gets replica sync by default;
// WithoutReplicaSync trades it for one reply less per acquisition.
func ExampleWithoutReplicaSync() {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr})
	defer rdb.Close()
	locks, err := relock.New(rdb, relock.WithoutReplicaSync())
	if err != nil {
		panic(err)
	}
	defer locks.Close()

	lease, err := locks.Mutex("example:replicasync:cache-refresh").Lock(ctx)
	if err != nil {
		panic(err)
	}
	fmt.Println("refreshing the cache")
	_ = lease.Unlock(ctx)
	// Output: refreshing the cache
}
