package testkit

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/relock-go/relock/internal/door"
	"github.com/relock-go/relock/internal/layout"
	"github.com/relock-go/relock/internal/scripts"
)

// ErrDropped is the transport error DropReply reports in place of a reply.
var ErrDropped = &net.OpError{Op: "read", Net: "tcp", Err: errors.New("reply dropped by the test")}

// DropReply is a go-redis hook that, once armed, lets one script call
// whose source header names Script run on the server and then reports a
// transport error instead of its reply.
type DropReply struct {
	Script  string       // the file name of the script whose reply to drop; change it with Retarget once the hook is in use
	Armed   atomic.Bool  // drop the next reply of Script, once
	Dropped atomic.Int32 // replies dropped

	mu sync.Mutex // guards Script once the hook is in use
}

// Retarget makes script the one whose reply is dropped, while commands
// may pass through the hook.
func (d *DropReply) Retarget(script string) {
	d.mu.Lock()
	d.Script = script
	d.mu.Unlock()
}

// DialHook passes dialling through.
func (d *DropReply) DialHook(next redis.DialHook) redis.DialHook { return next }

// ProcessPipelineHook passes pipelines through.
func (d *DropReply) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// ProcessHook drops the reply of the armed script's next call.
func (d *DropReply) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		if err == nil && d.matches(cmd) && d.Armed.CompareAndSwap(true, false) {
			d.Dropped.Add(1)
			cmd.SetErr(ErrDropped)
			return ErrDropped
		}
		return err
	}
}

func (d *DropReply) matches(cmd redis.Cmder) bool {
	d.mu.Lock()
	script := d.Script
	d.mu.Unlock()
	return isScript(cmd.Args(), script)
}

// CountCalls counts the calls of one script, or of one command, sent alone
// or in a pipeline: as a go-redis hook, or around any client library's
// driver (Driver).
type CountCalls struct {
	Script  string // the file name of the script
	Command string // or the name of the command, in lower case
	// When, if set, counts only the calls whose arguments (the command's
	// name first) it accepts.
	When func(args []any) bool
	N    atomic.Int64
}

func (n *CountCalls) matches(cmd redis.Cmder) bool { return n.matchArgs(cmd.Args()) }

func (n *CountCalls) matchArgs(args []any) bool {
	if n.When != nil && !n.When(args) {
		return false
	}
	if n.Command != "" {
		return len(args) > 0 && strings.ToLower(fmt.Sprint(args[0])) == n.Command
	}
	return isScript(args, n.Script)
}

func (n *CountCalls) count(xs []door.Exchange) {
	for _, x := range xs {
		if n.matchArgs(x.Cmd.Args) {
			n.N.Add(1)
		}
	}
}

// Driver returns d with the calls sent through it counted: alone, in
// pipelines, and on one node's connection.
func (n *CountCalls) Driver(d door.Driver) door.Driver { return countingDriver{d, n} }

type countingDriver struct {
	door.Driver
	n *CountCalls
}

func (c countingDriver) Do(ctx context.Context, cmd door.Cmd) door.Reply {
	if c.n.matchArgs(cmd.Args) {
		c.n.N.Add(1)
	}
	return c.Driver.Do(ctx, cmd)
}

func (c countingDriver) Pipe(ctx context.Context, xs []door.Exchange) {
	c.n.count(xs)
	c.Driver.Pipe(ctx, xs)
}

func (c countingDriver) Master(ctx context.Context, key string) (door.Node, error) {
	node, err := c.Driver.Master(ctx, key)
	if err != nil {
		return nil, err
	}
	return countingNode{node, c.n}, nil
}

func (c countingDriver) Masters(ctx context.Context) ([]door.Node, error) {
	nodes, err := c.Driver.Masters(ctx)
	for i := range nodes {
		nodes[i] = countingNode{nodes[i], c.n}
	}
	return nodes, err
}

type countingNode struct {
	door.Node
	n *CountCalls
}

func (c countingNode) Pipe(ctx context.Context, xs []door.Exchange) {
	c.n.count(xs)
	c.Node.Pipe(ctx, xs)
}

// DialHook passes dialling through.
func (n *CountCalls) DialHook(next redis.DialHook) redis.DialHook { return next }

// ProcessHook counts a call of Script (or Command).
func (n *CountCalls) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if n.matches(cmd) {
			n.N.Add(1)
		}
		return next(ctx, cmd)
	}
}

// ProcessPipelineHook counts the calls of Script (or Command) in a pipeline.
func (n *CountCalls) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, cmd := range cmds {
			if n.matches(cmd) {
				n.N.Add(1)
			}
		}
		return next(ctx, cmds)
	}
}

// isScript reports whether a command of args runs the script of the file
// name script.
func isScript(args []any, script string) bool {
	if len(args) < 2 {
		return false
	}
	switch strings.ToLower(fmt.Sprint(args[0])) {
	case "evalsha":
		return fmt.Sprint(args[1]) == ScriptSHA(script)
	case "eval":
		return strings.HasPrefix(fmt.Sprint(args[1]), "-- "+script)
	}
	return false
}

// HoldCount returns the sum of the hold counts in a lock hash.
func HoldCount(t testing.TB, rdb redis.UniversalClient, name string) int {
	t.Helper()
	fields, err := rdb.HGetAll(context.Background(), name).Result()
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for f, v := range fields {
		if f == layout.TokenField || f == layout.SinceField || f == layout.QueuedField { // the holder's fencing token, grant time, queue mark
			continue
		}
		i, _ := strconv.Atoi(v)
		n += i
	}
	return n
}

// Subscribers counts the server's subscribers of a lock's release channel.
func Subscribers(t testing.TB, top Topology, name string) int64 {
	t.Helper()
	ctx := CtxTimeout(t, 5*time.Second)
	channel := layout.Companion(layout.LockChannel, name)
	if top.Name == "cluster" {
		cc := top.RDB(t).(*redis.ClusterClient)
		c, err := cc.MasterForKey(ctx, channel)
		if err != nil {
			t.Fatal(err)
		}
		n, err := c.PubSubShardNumSub(ctx, channel).Result()
		if err != nil {
			t.Fatal(err)
		}
		return n[channel]
	}
	n, err := CloseLater(t, Standalone.Client()).PubSubNumSub(ctx, channel).Result()
	if err != nil {
		t.Fatal(err)
	}
	return n[channel]
}

// ScriptSHA returns the SHA1 of one of relock's scripts, by file name.
func ScriptSHA(file string) string {
	s := scripts.Named(strings.TrimSuffix(file, ".lua"))
	if s == nil {
		panic("no script " + file)
	}
	return s.SHA()
}
