// Package door is relock's one door to Redis. Every call the library makes
// to a server passes here: script calls (shared pipelines, sends again on
// a cluster's redirections, replica-synced sends with their WAIT), plain
// commands, and pub/sub. The library speaks the door's own types; a Redis
// client library stands behind it as a Driver, in a package of its own
// (goredis for go-redis v9), so that no other package of the library
// imports a client library.
package door
