package relock

import (
	"context"
	"strconv"
	"strings"
	"time"

	"github.com/relock-go/relock/internal/door"
)

// The server. New asks it, in one round trip, for what the Client must
// know before it starts (probe: the publish command, the ACL checks, the
// Client's identity); after New, one goroutine reads what an operator
// should be warned of (inspect).

// probed is what New learns of the server before it builds the Client.
type probed struct {
	publish string // "publish", or clusterPublish's answer on a cluster
	err     error  // checkScripts'
}

// probe asks the server what New needs to know, within the cleanup
// timeout: a server that does not answer by then is left to the calls
// that need it, and New goes on with the defaults (sharded pub/sub on a
// cluster, scripts allowed).
func (c *Client) probe() probed {
	got := make(chan probed, 1)
	if !within(c.cfg.cleanup, func() {
		p := probed{publish: "publish"}
		if c.cluster {
			p.publish = c.clusterPublish()
		}
		p.err = c.checkScripts(p.publish)
		got <- p
	}) {
		c.cfg.logger.Warn("relock: the server did not answer New's probe within the cleanup timeout; going on with the defaults",
			"cleanup timeout", c.cfg.cleanup)
		if c.cluster {
			return probed{publish: "spublish"}
		}
		return probed{publish: "publish"}
	}
	return <-got
}

// within runs f in a goroutine of its own and reports whether it returned
// within d. go-redis ignores a ctx's deadline unless the client has
// ContextTimeoutEnabled, and waits for a server that does not answer until
// its own read timeout; within is how relock keeps its bounds whatever
// the client's settings. An f that is still running is left to end when
// go-redis gives up, so it must write nothing its caller reads after a
// false return, but a buffered channel.
func within(d time.Duration, f func()) bool {
	done := make(chan struct{})
	go func() {
		defer close(done)
		f()
	}()
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-done:
		return true
	case <-t.C:
		return false
	}
}

// clusterPublish picks sharded pub/sub when the cluster runs Redis 7 or
// later, where SPUBLISH exists, and classic pub/sub otherwise. Valkey
// gives the Redis version it answers as (7.2.4) in redis_version.
func (c *Client) clusterPublish() string {
	ctx, cancel := context.WithTimeout(context.Background(), c.cfg.cleanup)
	defer cancel()
	info, err := c.door.Command(ctx, door.Cmd{Args: []any{"info", "server"}}).Text()
	if err != nil {
		c.cfg.logger.Warn("relock: cannot read the server version; assuming sharded pub/sub", "err", err)
		return "spublish"
	}
	version, _ := infoField(info, "redis_version")
	if major, err := strconv.Atoi(strings.SplitN(version, ".", 2)[0]); err == nil && major < 7 {
		return "publish"
	}
	return "spublish"
}

// inspect warns once when the server may evict lock keys.
func (c *Client) inspect() {
	defer c.wg.Done()
	ctx, cancel := context.WithTimeout(c.ctx, c.cfg.cleanup)
	defer cancel()
	vals, err := c.door.Command(ctx, door.Cmd{Args: []any{"config", "get", "maxmemory-policy"}}).StringMap()
	if err != nil {
		c.cfg.logger.Debug("relock: cannot read maxmemory-policy", "err", err)
		return
	}
	if p := vals["maxmemory-policy"]; p != "" && p != "noeviction" {
		c.cfg.logger.Warn("relock: the server may evict lock keys under memory pressure; set maxmemory-policy noeviction", "maxmemory-policy", p)
	}
}

func infoField(info, name string) (string, bool) {
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(line, name+":"); ok {
			return strings.TrimSpace(v), true
		}
	}
	return "", false
}
