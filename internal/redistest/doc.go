// Package redistest starts real Redis processes for tests.
//
// Every server is a separate redis-server (or sentinel) process listening on
// a free loopback port, with its own temporary directory holding the
// configuration, the log file and any data files. Helpers build the usual
// topologies on top of single servers: a master with replicas, a
// sentinel-managed group, a Redis Cluster and a set of independent masters.
//
// The Start* functions return an error and leave cleanup to the caller; the
// New*/Standalone helpers take a testing.TB, register the cleanup with
// t.Cleanup and fail the test (never skip it) when Redis is not installed.
//
// The binaries are looked up on PATH. When they are missing, Require returns
// an error that names the package to install.
//
// All types are safe for concurrent use unless a method says otherwise, so
// parallel tests may each start their own servers.
package redistest
