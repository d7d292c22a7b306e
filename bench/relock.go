package main

import (
	"context"
	"errors"

	"github.com/relock-go/relock"
)

// relock with its defaults: watchdog-kept holds, waiters woken by pub/sub.
// Three libraries of the report share the go-redis client and differ in
// the lock their workers take: relock (Mutex, and the Semaphore),
// relock-fair (FairMutex) and relock-rw (RWMutex). Two more take the
// Mutex and the Semaphore as relock does, on another client library
// through its adapter module: relock-rueidis (rueidis.go) and
// relock-valkey (valkey.go).

// relockOn makes a relock Client on a Redis client of one library,
// connected to s, whose commands are counted by n. It returns the
// function that closes that Redis client, to be called after the relock
// Client is closed: relock never closes the client it is given.
type relockOn func(s *server, n *callCounter) (c *relock.Client, closeRedis func() error, err error)

// onGoRedis makes relock's Client on a go-redis client.
func onGoRedis(s *server, n *callCounter) (*relock.Client, func() error, error) {
	rdb := newGoRedis(s.addr, n)
	c, err := relock.New(rdb)
	if err != nil {
		return nil, nil, errors.Join(err, rdb.Close())
	}
	return c, rdb.Close, nil
}

type relockConn struct {
	c          *relock.Client
	closeRedis func() error
	n          callCounter
}

// dial connects l in place, on the client library on: its client counts
// into l.n.
func (l *relockConn) dial(s *server, on relockOn) error {
	c, closeRedis, err := on(s, &l.n)
	if err != nil {
		return err
	}
	l.c, l.closeRedis = c, closeRedis
	return nil
}

func (l *relockConn) calls() int64 { return l.n.load() }

func (l *relockConn) close() error {
	return errors.Join(l.c.Close(), l.closeRedis())
}

// held keeps a worker's current Lease and the function that unlocks it,
// bound once so that a cycle makes no closure.
type held struct {
	lease  *relock.Lease
	unlock func(context.Context) error
}

// take keeps the Lease of a lock call that succeeded.
func (h *held) take(lease *relock.Lease, err error) (func(context.Context) error, error) {
	if err != nil {
		return nil, err
	}
	h.lease = lease
	return h.unlock, nil
}

func (h *held) release(ctx context.Context) error { return h.lease.Unlock(ctx) }

// relock: Mutex, and Semaphore for the semaphore workload; on go-redis,
// and as relock-rueidis and relock-valkey on the other clients.

type relockLib struct{ relockConn }

// openRelockOn returns the opener of relock's Mutex and Semaphore on the
// client library on.
func openRelockOn(on relockOn) opener {
	return func(_ context.Context, s *server, _ workload) (library, error) {
		l := &relockLib{}
		if err := l.dial(s, on); err != nil {
			return nil, err
		}
		return l, nil
	}
}

func (l *relockLib) locker(key string) locker {
	w := &mutexLocker{m: l.c.Mutex(key)}
	w.unlock = w.release
	return w
}

func (l *relockLib) semaphore(ctx context.Context, key string, permits int) (locker, error) {
	s := l.c.Semaphore(key)
	if _, err := s.TrySetPermits(ctx, permits); err != nil {
		return nil, err
	}
	w := &semaphoreLocker{s: s}
	w.unlock = w.release
	return w, nil
}

type mutexLocker struct {
	held
	m *relock.Mutex
}

// Lock takes the Mutex.
func (w *mutexLocker) Lock(ctx context.Context) (func(context.Context) error, error) {
	return w.take(w.m.Lock(ctx))
}

type semaphoreLocker struct {
	s      *relock.Semaphore
	unlock func(context.Context) error
}

// Lock acquires one permit.
func (w *semaphoreLocker) Lock(ctx context.Context) (func(context.Context) error, error) {
	if err := w.s.Acquire(ctx, 1); err != nil {
		return nil, err
	}
	return w.unlock, nil
}

func (w *semaphoreLocker) release(ctx context.Context) error { return w.s.Release(ctx, 1) }

// relock-fair: FairMutex, which grants the lock in the order its waiters
// asked.

type relockFairLib struct{ relockConn }

func openRelockFair(_ context.Context, s *server, _ workload) (library, error) {
	l := &relockFairLib{}
	if err := l.dial(s, onGoRedis); err != nil {
		return nil, err
	}
	return l, nil
}

func (l *relockFairLib) locker(key string) locker {
	w := &fairLocker{m: l.c.FairMutex(key)}
	w.unlock = w.release
	return w
}

type fairLocker struct {
	held
	m *relock.FairMutex
}

// Lock takes the FairMutex, queueing behind earlier waiters.
func (w *fairLocker) Lock(ctx context.Context) (func(context.Context) error, error) {
	return w.take(w.m.Lock(ctx))
}

// relock-rw: RWMutex, the write lock in every workload and the read lock
// for the reads of the read-heavy one.

type relockRWLib struct{ relockConn }

func openRelockRW(_ context.Context, s *server, _ workload) (library, error) {
	l := &relockRWLib{}
	if err := l.dial(s, onGoRedis); err != nil {
		return nil, err
	}
	return l, nil
}

func (l *relockRWLib) locker(key string) locker {
	w := &rwLocker{rw: l.c.RWMutex(key)}
	w.unlock = w.release
	return w
}

type rwLocker struct {
	held
	rw *relock.RWMutex
}

// Lock takes the write lock.
func (w *rwLocker) Lock(ctx context.Context) (func(context.Context) error, error) {
	return w.take(w.rw.Lock(ctx))
}

// RLock takes the read lock.
func (w *rwLocker) RLock(ctx context.Context) (func(context.Context) error, error) {
	return w.take(w.rw.RLock(ctx))
}
