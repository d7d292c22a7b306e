package main

// The contenders on rueidis: rueidislock, and relock through the
// relockrueidis adapter module.

import (
	"context"

	"github.com/redis/rueidis"
	"github.com/redis/rueidis/rueidislock"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/relockrueidis"
)

// rueidisOption is every rueidis client's setting: its defaults, but a
// pool of poolSize connections for blocking and dedicated commands.
// rueidis pipelines all others over its own few connections, so that no
// pool size bounds them.
func rueidisOption(addr string) rueidis.ClientOption {
	return rueidis.ClientOption{InitAddress: []string{addr}, BlockingPoolSize: poolSize}
}

// newRueidis returns a rueidis client made from opt whose commands are
// counted by n.
func newRueidis(opt rueidis.ClientOption, n *callCounter) (rueidis.Client, error) {
	c, err := rueidis.NewClient(opt)
	if err != nil {
		return nil, err
	}
	return &rueidisCounting{Client: c, n: n}, nil
}

// onRueidis makes relock's Client on a rueidis client (relock-rueidis).
func onRueidis(s *server, n *callCounter) (*relock.Client, func() error, error) {
	rc, err := newRueidis(rueidisOption(s.addr), n)
	if err != nil {
		return nil, nil, err
	}
	closeRedis := func() error { rc.Close(); return nil }
	c, err := relockrueidis.New(rc)
	if err != nil {
		rc.Close()
		return nil, nil, err
	}
	return c, closeRedis, nil
}

// openRueidislock opens rueidislock as libs.go says.
func openRueidislock(ctx context.Context, s *server, w workload) (library, error) {
	noloop, err := noLoop(ctx, s, w)
	if err != nil {
		return nil, err
	}
	l := &contextLockLib{}
	lk, err := rueidislock.NewLocker(rueidislock.LockerOption{
		ClientOption:   rueidisOption(s.addr),
		KeyMajority:    1,
		KeyValidity:    leaseTTL,
		TryNextAfter:   tryNextAfter,
		NoLoopTracking: noloop,
		ClientBuilder: func(opt rueidis.ClientOption) (rueidis.Client, error) {
			return newRueidis(opt, &l.n)
		},
	})
	if err != nil {
		return nil, err
	}
	l.lk = lk
	return l, nil
}

// rueidisCounting counts the commands sent through a rueidis client's Do
// and DoMulti, which is all rueidislock uses, and all relock does but on
// its pub/sub connection (dedicated, not counted).
type rueidisCounting struct {
	rueidis.Client
	n *callCounter
}

// Do counts one command and sends it.
func (c *rueidisCounting) Do(ctx context.Context, cmd rueidis.Completed) rueidis.RedisResult {
	c.n.n.Add(1)
	return c.Client.Do(ctx, cmd)
}

// DoMulti counts the commands and sends them.
func (c *rueidisCounting) DoMulti(ctx context.Context, multi ...rueidis.Completed) []rueidis.RedisResult {
	c.n.n.Add(int64(len(multi)))
	return c.Client.DoMulti(ctx, multi...)
}
