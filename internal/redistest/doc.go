// Package redistest starts real Redis or Valkey processes for tests.
//
// Every server is a separate server (or sentinel) process listening on a
// free loopback port, with its own temporary directory holding the
// configuration, the log file and any data files. Helpers build the usual
// topologies on top of single servers: a master with replicas, a
// sentinel-managed group, a Redis Cluster and a set of independent masters.
//
// The Start* functions return an error and leave cleanup to the caller; the
// New*/Standalone helpers take a testing.TB, register the cleanup with
// t.Cleanup and fail the test (never skip it) when the server is not
// installed.
//
// The environment variable RELOCK_TEST_SERVER (ServerEnv) chooses the
// server: redis-server, redis-sentinel and redis-cli by default or when it
// is "redis"; valkey-server, valkey-sentinel and valkey-cli when it is
// "valkey". A sentinel runs as the server binary with --sentinel when the
// sentinel binary is not installed. require.go is the one place that names
// the binaries. They are looked up on PATH; when they are missing, Require
// returns an error that gives the command that installs them.
//
// All types are safe for concurrent use unless a method says otherwise, so
// parallel tests may each start their own servers.
package redistest
