package main

// The contenders on valkey-go, the fork of rueidis (the same code under
// other names): valkeylock, and relock through the relockvalkey adapter
// module. Set up as their rueidis twins (rueidis.go).

import (
	"context"

	"github.com/valkey-io/valkey-go"
	"github.com/valkey-io/valkey-go/valkeylock"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/relockvalkey"
)

// valkeyOption is every valkey-go client's setting: its defaults, but a
// pool of poolSize connections for blocking and dedicated commands.
// valkey-go pipelines all others over its own few connections, so that no
// pool size bounds them.
func valkeyOption(addr string) valkey.ClientOption {
	return valkey.ClientOption{InitAddress: []string{addr}, BlockingPoolSize: poolSize}
}

// newValkey returns a valkey-go client made from opt whose commands are
// counted by n.
func newValkey(opt valkey.ClientOption, n *callCounter) (valkey.Client, error) {
	c, err := valkey.NewClient(opt)
	if err != nil {
		return nil, err
	}
	return &valkeyCounting{Client: c, n: n}, nil
}

// onValkey makes relock's Client on a valkey-go client (relock-valkey).
func onValkey(s *server, n *callCounter) (*relock.Client, func() error, error) {
	rc, err := newValkey(valkeyOption(s.addr), n)
	if err != nil {
		return nil, nil, err
	}
	closeRedis := func() error { rc.Close(); return nil }
	c, err := relockvalkey.New(rc)
	if err != nil {
		rc.Close()
		return nil, nil, err
	}
	return c, closeRedis, nil
}

// openValkeylock opens valkeylock as libs.go says.
func openValkeylock(ctx context.Context, s *server, w workload) (library, error) {
	noloop, err := noLoop(ctx, s, w)
	if err != nil {
		return nil, err
	}
	l := &contextLockLib{}
	lk, err := valkeylock.NewLocker(valkeylock.LockerOption{
		ClientOption:   valkeyOption(s.addr),
		KeyMajority:    1,
		KeyValidity:    leaseTTL,
		TryNextAfter:   tryNextAfter,
		NoLoopTracking: noloop,
		ClientBuilder: func(opt valkey.ClientOption) (valkey.Client, error) {
			return newValkey(opt, &l.n)
		},
	})
	if err != nil {
		return nil, err
	}
	l.lk = lk
	return l, nil
}

// valkeyCounting counts the commands sent through a valkey-go client's Do
// and DoMulti, which is all valkeylock uses, and all relock does but on
// its pub/sub connection (dedicated, not counted).
type valkeyCounting struct {
	valkey.Client
	n *callCounter
}

// Do counts one command and sends it.
func (c *valkeyCounting) Do(ctx context.Context, cmd valkey.Completed) valkey.ValkeyResult {
	c.n.n.Add(1)
	return c.Client.Do(ctx, cmd)
}

// DoMulti counts the commands and sends them.
func (c *valkeyCounting) DoMulti(ctx context.Context, multi ...valkey.Completed) []valkey.ValkeyResult {
	c.n.n.Add(int64(len(multi)))
	return c.Client.DoMulti(ctx, multi...)
}
