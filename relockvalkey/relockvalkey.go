// Package relockvalkey runs relock on a valkey-go client: New takes a
// valkey.Client (standalone, Sentinel or Cluster) where relock.New takes a
// go-redis one, and everything relock.New says holds.
//
// It is a module of its own, so that a go-redis user of relock never
// downloads valkey-go. Its sibling relockrueidis does the same for
// rueidis, of which valkey-go is the fork with the same API; the two
// packages are alike line for line but for the client library's name: this
// package's files are made from relockrueidis's, and TestSameAsRueidisAdapter
// checks that they still are (go test -run TestSameAsRueidisAdapter -update
// writes them again).
//
// The client stays the caller's: relock never closes it, and it must
// outlive the relock.Client. valkey-go pipelines concurrent calls by
// itself, so relock's own batching and valkey-go's auto-pipelining
// combine. Calls are bounded by their contexts (valkey-go has no read
// timeout of its own), and a call whose context ends waits up to a second
// more for the reply of a command already handed to valkey-go, as go-redis
// waits for a reply up to its read timeout: valkey-go may still write such a
// command, and relock's undo of it must not run first. Replica sync's
// WAIT goes on a dedicated connection, the one that wrote.
package relockvalkey

import (
	"fmt"

	valkey "github.com/valkey-io/valkey-go"

	"github.com/relock-go/relock"
)

// New returns a relock Client on c, as relock.New does on a go-redis
// client. A nil c fails with an error matching relock.ErrInvalidOption
// and relock.ErrUnsupportedClient.
func New(c valkey.Client, opts ...relock.Option) (*relock.Client, error) {
	if c == nil {
		return nil, fmt.Errorf("%w: %w: nil valkey-go client", relock.ErrInvalidOption, relock.ErrUnsupportedClient)
	}
	return relock.NewWithDriver(newDriver(c), opts...)
}
