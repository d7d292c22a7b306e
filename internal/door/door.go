// Package door is relock's one door to Redis. Every call the library makes
// to a server passes here: script calls (shared pipelines, sends again on
// a cluster's redirections, replica-synced sends with their WAIT), plain
// commands, and pub/sub. The library speaks the door's own types; a Redis
// client library stands behind it as a Driver, in a package of its own
// (goredis for go-redis v9), so that no other package of the library
// imports a client library.
package door

import (
	"context"
	"time"
)

// Cmd is one command: its arguments, the first of them its name.
type Cmd struct {
	Args []any
	// Key is the index in Args of the key a cluster routes the command
	// by, 0 when it has none (any master may take it).
	Key int
	// Once forbids the driver to send the command again after a lost
	// reply: a WAIT only covers the writes of its own connection.
	Once bool
}

// Exchange is one command of a pipeline and, once sent, its reply.
type Exchange struct {
	Cmd   Cmd
	Reply Reply
}

// Driver is a Redis client library as the door uses it. A driver routes
// each command on a cluster by its key, and follows a redirection itself
// where the library can; the door sends again whatever redirection comes
// back (Door.Resend). Its errors are the door's: a server's error reply
// is an Error (Nil for a nil reply), anything else a transport or context
// error. A driver never closes the client it wraps.
type Driver interface {
	// Do sends cmd and returns its reply.
	Do(ctx context.Context, cmd Cmd) Reply
	// Pipe sends xs together (on a cluster, each to the master of its
	// key) and sets each one's Reply.
	Pipe(ctx context.Context, xs []Exchange)
	// Cluster reports whether the client is a cluster's.
	Cluster() bool
	// Master returns the master that serves key: the one server of a
	// client that is not a cluster's. It fails with ErrNoNode where the
	// client cannot send to one node on one connection.
	Master(ctx context.Context, key string) (Node, error)
	// Masters returns every master of a cluster, or the one server.
	Masters(ctx context.Context) ([]Node, error)
	// Reload reads a cluster's slot map again; without a cluster it does
	// nothing.
	Reload(ctx context.Context)
	// ReadTimeout is the longest the client waits for a reply, 0 for no
	// bound of its own.
	ReadTimeout() time.Duration
	// PubSubDriver opens the pub/sub connections (pubsub.go).
	PubSubDriver
}

// Node is one server, to which commands go in order on one connection.
type Node interface {
	// Addr is the server's address, which names it.
	Addr() string
	// Pipe sends xs in one pipeline on one connection of the server, in
	// order, and sets each one's Reply: a WAIT after writes covers them.
	Pipe(ctx context.Context, xs []Exchange)
}
