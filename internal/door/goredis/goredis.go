// Package goredis puts a go-redis v9 client behind relock's door: it is
// the only package of the library that speaks go-redis.
package goredis

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/relock-go/relock/internal/door"
)

// Driver is a go-redis client as a driver of the door. The door never
// closes the client.
type Driver struct {
	c       redis.UniversalClient
	cluster *redis.ClusterClient // c, when it is a cluster client; else nil
	single  *redis.Client        // c, when it is a client of one server; else nil
}

var _ door.Driver = (*Driver)(nil)

// New returns c as a driver.
func New(c redis.UniversalClient) *Driver {
	d := &Driver{c: c}
	d.cluster, _ = c.(*redis.ClusterClient)
	d.single, _ = c.(*redis.Client)
	return d
}

// command returns cmd as go-redis's command.
func command(ctx context.Context, cmd door.Cmd) redis.Cmder {
	c := redis.NewCmd(ctx, cmd.Args...)
	if cmd.Key > 0 {
		c.SetFirstKeyPos(int8(cmd.Key))
	}
	if cmd.Once {
		return once{c}
	}
	return c
}

// once is a command go-redis must not send again on another connection
// after a lost reply.
type once struct{ *redis.Cmd }

func (once) NoRetry() bool { return true }

// reply returns go-redis's reply to c as the door's.
func reply(c redis.Cmder) door.Reply {
	var cmd *redis.Cmd
	switch x := c.(type) {
	case *redis.Cmd:
		cmd = x
	case once:
		cmd = x.Cmd
	}
	if err := cmd.Err(); err != nil {
		return door.Failed(asDoor(err))
	}
	return door.Value(cmd.Val())
}

// asDoor returns a server's error reply as a door.Error, and any other
// error as it is.
func asDoor(err error) error {
	if err == redis.Nil {
		return door.Nil
	}
	var re redis.Error
	if errors.As(err, &re) {
		return door.Error(err.Error())
	}
	return err
}

// Do sends cmd and returns its reply.
func (d *Driver) Do(ctx context.Context, cmd door.Cmd) door.Reply {
	c := command(ctx, cmd)
	_ = d.c.Process(ctx, c)
	return reply(c)
}

// Pipe sends xs in one pipeline (on a cluster, one per master).
func (d *Driver) Pipe(ctx context.Context, xs []door.Exchange) { pipe(ctx, d.c.Pipeline(), xs) }

func pipe(ctx context.Context, p redis.Pipeliner, xs []door.Exchange) {
	for _, x := range xs {
		_ = p.Process(ctx, command(ctx, x.Cmd))
	}
	for i, c := range exec(ctx, p) {
		xs[i].Reply = reply(c)
	}
}

// exec runs p and returns its commands, in the order they were queued.
// Every command ends with its reply or an error: go-redis leaves the
// commands of a pipeline without either when the connection's setup
// failed on a reply of the server (a password refused on a reconnect),
// and their empty replies would read as nil values; they get the
// pipeline's error.
func exec(ctx context.Context, p redis.Pipeliner) []redis.Cmder {
	cmds, err := p.Exec(ctx)
	if err == nil {
		return cmds
	}
	for _, cmd := range cmds {
		if cmd.Err() != nil {
			return cmds // the commands were answered, or given the error
		}
	}
	for _, cmd := range cmds {
		cmd.SetErr(err)
	}
	return cmds
}

// Cluster reports whether the client is a cluster client.
func (d *Driver) Cluster() bool { return d.cluster != nil }

// Master returns the master of key's slot on a cluster, or the one server
// of a *redis.Client (standalone, or a Sentinel failover client).
func (d *Driver) Master(ctx context.Context, key string) (door.Node, error) {
	switch {
	case d.cluster != nil:
		c, err := d.cluster.MasterForKey(ctx, key)
		if err != nil {
			return nil, err
		}
		return (*node)(c), nil
	case d.single != nil:
		return (*node)(d.single), nil
	}
	return nil, door.ErrNoNode
}

// Masters returns every master of a cluster, or the one server.
func (d *Driver) Masters(ctx context.Context) ([]door.Node, error) {
	if d.cluster == nil {
		n, err := d.Master(ctx, "")
		if err != nil {
			return nil, err
		}
		return []door.Node{n}, nil
	}
	var nodes []door.Node
	var mu sync.Mutex // ForEachMaster calls f concurrently
	err := d.cluster.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error {
		mu.Lock()
		nodes = append(nodes, (*node)(c))
		mu.Unlock()
		return nil
	})
	return nodes, err
}

// Reload reads a cluster's slot map again.
func (d *Driver) Reload(ctx context.Context) {
	if d.cluster != nil {
		d.cluster.ReloadState(ctx)
	}
}

// ReadTimeout returns the client's read timeout.
func (d *Driver) ReadTimeout() time.Duration {
	switch {
	case d.cluster != nil:
		return d.cluster.Options().ReadTimeout
	case d.single != nil:
		return d.single.Options().ReadTimeout
	}
	return 0
}

// node is a client of one server as a door.Node.
type node redis.Client

func (n *node) Addr() string { return (*redis.Client)(n).Options().Addr }

func (n *node) Pipe(ctx context.Context, xs []door.Exchange) {
	pipe(ctx, (*redis.Client)(n).Pipeline(), xs)
}
