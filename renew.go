package relock

import (
	"context"
	"sort"
	"strconv"

	"github.com/redis/go-redis/v9"

	"github.com/relock-go/relock/internal/scripts"
	"github.com/relock-go/relock/internal/watchdog"
)

// maxRenewKeys caps the holds renewed by one script call, so that a call
// never blocks the server for long.
const maxRenewKeys = 256

// renew is the watchdog's Renewer: one renew.lua call per cluster slot
// (per maxRenewKeys holds), all sent in one pipeline.
func (c *Client) renew(ctx context.Context, batch []*watchdog.Entry) []watchdog.Result {
	results := make([]watchdog.Result, len(batch))
	if c.cluster {
		sort.Slice(batch, func(i, j int) bool { return batch[i].Group < batch[j].Group })
	}
	type call struct {
		first, n int
		cmd      *redis.Cmd
	}
	var calls []call
	pipe := c.rdb.Pipeline()
	for first := 0; first < len(batch); {
		n := 1
		for first+n < len(batch) && n < maxRenewKeys && (!c.cluster || batch[first+n].Group == batch[first].Group) {
			n++
		}
		keys := make([]string, n)
		args := make([]any, 0, 2*n)
		for i, e := range batch[first : first+n] {
			keys[i] = e.Key
			args = append(args, e.Owner, strconv.FormatInt(e.Lease.Milliseconds(), 10))
		}
		calls = append(calls, call{first, n, scripts.Renew.Queue(ctx, pipe, keys, args...)})
		first += n
	}
	_, _ = pipe.Exec(ctx)
	for _, cl := range calls {
		cmd := scripts.Renew.Retry(ctx, c.rdb, cl.cmd)
		held, err := cmd.Int64Slice()
		if err != nil || len(held) != cl.n {
			c.cfg.logger.Warn("relock: renewal failed", "locks", cl.n, "err", err)
			continue
		}
		for i, h := range held {
			if h == 1 {
				results[cl.first+i] = watchdog.Held
			} else {
				results[cl.first+i] = watchdog.Gone
			}
		}
	}
	return results
}
