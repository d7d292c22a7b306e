package scripts

import (
	"context"
	"strings"

	"github.com/redis/go-redis/v9"
)

// The scripts' own tests run them straight on a go-redis client: the
// library sends them through the door (internal/door), which the tests
// here do not need.

// Runner sends a command: a client runs it, a pipeline queues it.
type Runner interface {
	Process(ctx context.Context, cmd redis.Cmder) error
}

// Run executes the script by EVALSHA and, if the server answers NOSCRIPT,
// once more by EVAL.
func (s *Script) Run(ctx context.Context, c Runner, keys []any, args ...any) *redis.Cmd {
	cmd := s.command(ctx, "evalsha", s.shaArg, keys, args)
	_ = c.Process(ctx, cmd)
	if IsNoScript(cmd.Err()) {
		cmd = s.command(ctx, "eval", s.srcArg, keys, args)
		_ = c.Process(ctx, cmd)
	}
	return cmd
}

// Queue adds an EVALSHA of the script to a pipeline.
func (s *Script) Queue(ctx context.Context, p redis.Pipeliner, keys []any, args ...any) *redis.Cmd {
	cmd := s.command(ctx, "evalsha", s.shaArg, keys, args)
	_ = p.Process(ctx, cmd)
	return cmd
}

func (s *Script) command(ctx context.Context, name string, script any, keys, args []any) *redis.Cmd {
	a := make([]any, 0, 3+len(keys)+len(args))
	a = append(a, name, script, len(keys))
	a = append(a, keys...)
	a = append(a, args...)
	cmd := redis.NewCmd(ctx, a...)
	if len(keys) > 0 {
		cmd.SetFirstKeyPos(3)
	}
	return cmd
}

// Retry runs a queued command again by EVAL if it failed with NOSCRIPT.
func (s *Script) Retry(ctx context.Context, c Runner, queued *redis.Cmd) *redis.Cmd {
	if !IsNoScript(queued.Err()) {
		return queued
	}
	args := queued.Args() // evalsha sha numkeys key... arg...
	n := int(args[2].(int))
	cmd := s.command(ctx, "eval", s.srcArg, args[3:3+n], args[3+n:])
	_ = c.Process(ctx, cmd)
	return cmd
}

// IsNoScript reports whether err is the server's NOSCRIPT reply.
func IsNoScript(err error) bool {
	return err != nil && strings.HasPrefix(err.Error(), "NOSCRIPT")
}
