// Package relockrueidis runs relock on a rueidis client: New takes a
// rueidis.Client (standalone, Sentinel or Cluster) where relock.New takes a
// go-redis one, and everything relock.New says holds.
//
// It is a module of its own, so that a go-redis user of relock never
// downloads rueidis. Its sibling relockvalkey does the same for
// valkey-go, the fork of rueidis with the same API; the two packages are
// alike line for line but for the client library's name: relockvalkey's
// files are made from these (its TestSameAsRueidisAdapter checks it).
//
// The client stays the caller's: relock never closes it, and it must
// outlive the relock.Client. rueidis pipelines concurrent calls by
// itself, so relock's own batching and rueidis's auto-pipelining
// combine. Calls are bounded by their contexts (rueidis has no read
// timeout of its own), and a call whose context ends waits up to a second
// more for the reply of a command already handed to rueidis, as go-redis
// waits for a reply up to its read timeout: rueidis may still write such a
// command, and relock's undo of it must not run first. Replica sync's
// WAIT goes on a dedicated connection, the one that wrote.
package relockrueidis

import (
	"fmt"

	"github.com/redis/rueidis"

	"github.com/relock-go/relock"
)

// New returns a relock Client on c, as relock.New does on a go-redis
// client. A nil c fails with an error matching relock.ErrInvalidOption
// and relock.ErrUnsupportedClient.
func New(c rueidis.Client, opts ...relock.Option) (*relock.Client, error) {
	if c == nil {
		return nil, fmt.Errorf("%w: %w: nil rueidis client", relock.ErrInvalidOption, relock.ErrUnsupportedClient)
	}
	return relock.NewWithDriver(newDriver(c), opts...)
}
