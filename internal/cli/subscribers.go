package cli

import (
	"context"
	"sync"

	"github.com/redis/go-redis/v9"
)

// subscribers counts the subscriptions to channel: on a cluster, classic
// ones on every node plus sharded ones.
func subscribers(ctx context.Context, rdb redis.UniversalClient, channel string) (int64, error) {
	m, err := subscribersOf(ctx, rdb, []string{channel})
	return m[channel], err
}

// subscribersOf is subscribers for many channels at once.
func subscribersOf(ctx context.Context, rdb redis.UniversalClient, channels []string) (map[string]int64, error) {
	total := make(map[string]int64, len(channels))
	if len(channels) == 0 {
		return total, nil
	}
	cc, ok := rdb.(*redis.ClusterClient)
	if !ok {
		m, err := rdb.PubSubNumSub(ctx, channels...).Result()
		for ch, n := range m {
			total[ch] += n
		}
		return total, err
	}
	var mu sync.Mutex
	err := cc.ForEachShard(ctx, func(ctx context.Context, node *redis.Client) error {
		classic, err := node.PubSubNumSub(ctx, channels...).Result()
		if err != nil {
			return err
		}
		sharded, err := node.PubSubShardNumSub(ctx, channels...).Result()
		if err != nil {
			return err
		}
		mu.Lock()
		defer mu.Unlock()
		for ch, n := range classic {
			total[ch] += n
		}
		for ch, n := range sharded {
			total[ch] += n
		}
		return nil
	})
	return total, err
}
