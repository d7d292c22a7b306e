package relock

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/relock-go/relock/internal/door"
)

// Replica-synced acquisition. Redis replicates asynchronously: a master can
// grant a lock and fail before any replica has it, and the replica promoted
// in its place grants it again. With replica sync on, every acquisition
// script is followed, in the same pipeline on the same connection, by
// WAIT numreplicas timeout (or WAITAOF), which answers how many replicas
// have the write; an acquisition too few of them acknowledged is released
// again before its Lease is returned. Renewals, and the synchronizers'
// other writes (releases, counts, permits set, added or drained, lease
// updates), are followed by a WAIT too; those cannot be undone, so one too
// few replicas acknowledged is reported, not released. See docs/design.md
// for its cost and its limits.

// ReplicaSync configures replica-synced acquisition (WithReplicaSync).
// Its zero value waits, for at most 100ms, for every replica connected to
// the master, and fails with ErrReplicaSync when too few acknowledge. It
// is a plain value, read once by New.
//
// It is a struct, where the Client's other settings are options of their
// own, because it is one persistent setting whose fields only mean
// something together, and because replica sync has three states: on where
// the master has replicas (neither option), on as a ReplicaSync says
// (WithReplicaSync), and off (WithoutReplicaSync). Its fields are checked
// when WithReplicaSync is applied, and against the Redis client's read
// timeout by New, as every Option is.
type ReplicaSync struct {
	// Replicas is how many replicas must acknowledge an acquisition. 0
	// means every replica connected to the master and in sync with it, as
	// the master's INFO replication last said (relock re-reads it when
	// WAIT answers fewer, and periodically), and at least one once the
	// Client has seen a master with replicas: a master left without any
	// is the one a failover may replace, so its acquisitions fail (or are
	// retried) until a replica is back. A Client that never saw a replica
	// waits for none.
	Replicas int
	// Timeout is how long WAIT may block; 0 means 100ms. It must be below
	// the go-redis client's ReadTimeout and a third of the watchdog
	// timeout (the renewal interval).
	Timeout time.Duration
	// Retry, when too few replicas acknowledged, releases the acquisition
	// and tries again until the caller's ctx ends. By default the
	// acquisition is released and the call fails with ErrReplicaSync.
	// Retry applies to acquisitions only: a write that cannot be undone (a
	// Semaphore's Release, a CountDown, ...) is applied on the master
	// whatever the replicas answer, and is never repeated.
	Retry bool
	// Fallback, when the server refuses WAIT (as managed services may),
	// logs a warning once and goes on without replica sync. By default
	// lock calls then fail with ErrReplicaSync wrapping the server's error.
	Fallback bool
	// AOF uses WAITAOF numlocal numreplicas timeout (Redis 7.2 or later)
	// instead of WAIT: replicas count once they have written the
	// acquisition to their append-only file, and numlocal is 1 when the
	// master has appendonly on, so that it must have too.
	AOF bool
}

// defaultSyncTimeout is ReplicaSync.Timeout's default.
const defaultSyncTimeout = 100 * time.Millisecond

type syncMode uint8

const (
	syncAuto syncMode = iota // on where the client sees replicas
	syncOn                   // WithReplicaSync
	syncOff                  // WithoutReplicaSync
)

// WithReplicaSync turns replica-synced acquisition on as rs says, also on
// a server without replicas (where a positive rs.Replicas then fails every
// acquisition). Without this option it is on, with ReplicaSync's
// defaults, wherever the master has replicas connected, and off on a
// server without any. It covers the acquisitions of Mutex, FairMutex,
// RWMutex, Semaphore and PermitSemaphore, and the renewals of every hold:
// a renewal too few replicas acknowledged keeps the hold but does not move
// its local deadline (see Stats.RenewSyncShort). It also covers the
// synchronizers' other writes: TrySetPermits, AddPermits, Release and
// Drain of Semaphore and PermitSemaphore, Permit.Release and UpdateLease,
// PermitSemaphore.UpdateLease, and CountDownLatch.TrySetCount and
// CountDown. Those cannot be undone: one too few replicas acknowledged
// stays applied on the master, and the call returns an error wrapping
// ErrReplicaSync that says so (counted in Stats.SyncShort); it must not
// be repeated. rs.Replicas must not be negative, nor rs.Timeout negative
// or below 1ms, or New fails with ErrInvalidOption.
func WithReplicaSync(rs ReplicaSync) Option {
	return func(c *config) error {
		if rs.Replicas < 0 {
			return fmt.Errorf("%w: replica sync: negative replica count %d", ErrInvalidOption, rs.Replicas)
		}
		if rs.Timeout == 0 {
			rs.Timeout = defaultSyncTimeout
		}
		if rs.Timeout < time.Millisecond {
			return fmt.Errorf("%w: replica sync timeout %v is below 1ms", ErrInvalidOption, rs.Timeout)
		}
		c.sync, c.syncMode = rs, syncOn
		return nil
	}
}

// WithoutReplicaSync turns replica-synced acquisition off, also where the
// master has replicas: acquisitions are acknowledged by the master alone,
// and relock never sends WAIT nor reads INFO replication.
func WithoutReplicaSync() Option {
	return func(c *config) error {
		c.sync, c.syncMode = ReplicaSync{}, syncOff
		return nil
	}
}

// syncer is a Client's replica sync: the settings, and what it learnt of
// each master. It is safe for concurrent use; a nil *syncer is off.
type syncer struct {
	c       *Client
	cfg     ReplicaSync
	drv     door.Driver // the masters: of a key, every one
	cluster bool
	verb    string      // "WAIT" or "WAITAOF", for messages
	off     atomic.Bool // the server refused WAIT and Fallback is on
	warn    sync.Once
	// every is how long, in watchdog clock ns, a replica count is trusted
	// before a lock call or a renewal asks for it to be read again.
	every int64

	mu          sync.RWMutex
	nodes       map[string]*syncNode // a cluster's masters, by address
	single      *syncNode            // the master of any other client
	hasReplicas atomic.Bool          // some master of a cluster has replicas, or is not probed yet
	saw         atomic.Bool          // some master was seen with replicas

	kick chan struct{} // asks run to re-read the replica counts
}

// syncNode is what the syncer knows of one master.
type syncNode struct {
	addr string
	node atomic.Pointer[door.Node]
	ack  func(n int) door.Cmd // this node's WAIT

	mu       sync.Mutex   // serialises probes and reads
	ready    atomic.Bool  // the replica count was read once
	byRole   atomic.Bool  // the server refuses INFO: the count is read by ROLE
	replicas atomic.Int64 // replicas in sync with the master, as last read
	local    atomic.Int64 // WAITAOF's numlocal: 1 when the master has appendonly on
	checked  atomic.Bool  // the server answered WAIT (or refused it)
	refused  atomic.Pointer[error]
	readAt   atomic.Int64 // watchdog clock of the last read (or request for one)
	readOK   atomic.Int64 // watchdog clock of the last read that succeeded
}

// newSyncer returns the Client's syncer, nil when replica sync is off.
func newSyncer(c *Client) (*syncer, error) {
	cfg := c.cfg.sync
	if c.cfg.syncMode == syncOff {
		return nil, nil
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = defaultSyncTimeout
	}
	s := &syncer{c: c, cfg: cfg, verb: "WAIT", kick: make(chan struct{}, 1), every: int64(c.cfg.watchdog / 3)}
	if cfg.AOF {
		s.verb = "WAITAOF"
	}
	s.drv = c.door.Driver()
	if s.cluster = s.drv.Cluster(); s.cluster {
		s.nodes = make(map[string]*syncNode)
	} else if n, err := s.drv.Master(c.ctx, ""); err == nil {
		s.single = s.newNode(n)
	} else if c.cfg.syncMode == syncOn {
		return nil, fmt.Errorf("%w: replica sync needs a *redis.Client or *redis.ClusterClient: %w", ErrUnsupportedClient, err)
	} else {
		return nil, nil // cannot pin a connection: off by default
	}
	read := s.drv.ReadTimeout()
	// A WAIT must end before the pipeline's read times out, and before the
	// watchdog's round is cut off.
	limit := c.cfg.watchdog / 3
	if read > 0 {
		limit = min(limit, read)
	}
	if s.cfg.Timeout >= limit {
		if c.cfg.syncMode == syncOn {
			return nil, fmt.Errorf("%w: replica sync timeout %v is not below the client's read timeout (%v) and the watchdog's interval (%v)",
				ErrInvalidOption, s.cfg.Timeout, read, c.cfg.watchdog/3)
		}
		s.cfg.Timeout = max(limit/2, time.Millisecond)
	}
	s.hasReplicas.Store(true)
	return s, nil
}

func (s *syncer) newNode(node door.Node) *syncNode {
	n := &syncNode{addr: node.Addr()}
	n.node.Store(&node)
	ms := s.cfg.Timeout.Milliseconds()
	// A WAIT is never sent again on another connection after a lost
	// reply: it only covers the writes of its own connection, and the
	// script it follows would not write again when resent.
	if s.cfg.AOF {
		n.ack = func(k int) door.Cmd {
			return door.Cmd{Args: []any{"waitaof", n.local.Load(), k, ms}, Once: true}
		}
	} else {
		n.ack = func(k int) door.Cmd {
			return door.Cmd{Args: []any{"wait", k, ms}, Once: true}
		}
	}
	return n
}

// syncTarget is where one call waits for its replicas, and for how many.
type syncTarget struct {
	node *syncNode
	need int
	ds   door.Sync
}

// doorSync returns the replica acknowledgement the door asks for with a
// call to t, nil when t is nil.
func (t *syncTarget) doorSync() *door.Sync {
	if t == nil {
		return nil
	}
	return &t.ds
}

// target returns how a write to key must wait for replicas, or nil when
// it need not: sync is off, or Replicas is 0 and the master has no replica
// in sync. It probes a master it has not seen yet (once), and asks for a
// replica count older than s.every to be read again in the background.
func (s *syncer) target(ctx context.Context, key string) (*syncTarget, error) {
	if s == nil || s.off.Load() {
		return nil, nil
	}
	n, err := s.node(ctx, key)
	if err != nil {
		return nil, err
	}
	if !n.ready.Load() {
		if err := s.probe(ctx, n); err != nil {
			return nil, err
		}
	}
	s.stale(n)
	need := s.need(n)
	if need == 0 {
		return nil, nil
	}
	if !n.checked.Load() {
		if _, err := s.probeWait(ctx, n); err != nil {
			return nil, err
		}
	}
	if s.off.Load() {
		return nil, nil
	}
	if p := n.refused.Load(); p != nil {
		return nil, fmt.Errorf("%w: the server refuses %s (set ReplicaSync.Fallback or WithoutReplicaSync): %w", ErrReplicaSync, s.verb, *p)
	}
	t := &syncTarget{node: n, need: need}
	t.ds = door.Sync{Node: *n.node.Load(), Replicas: need, Ack: n.ack}
	return t, nil
}

// need returns how many replicas a write to n must reach: Replicas, or,
// when it is 0, the replicas n has now, and at least one once some master
// of the Client was seen with replicas: a master that has lost all of its
// replicas (or its links to them) is the one a failover may replace next.
func (s *syncer) need(n *syncNode) int {
	if s.cfg.Replicas > 0 {
		return s.cfg.Replicas
	}
	need := int(n.replicas.Load())
	if need == 0 && s.saw.Load() {
		need = 1
	}
	return need
}

// node returns the master holding key.
func (s *syncer) node(ctx context.Context, key string) (*syncNode, error) {
	if !s.cluster {
		return s.single, nil
	}
	node, err := s.drv.Master(ctx, key)
	if err != nil {
		return nil, fmt.Errorf("relock: replica sync: finding the master of %q: %w", key, err)
	}
	return s.nodeOf(node), nil
}

// nodeOf returns the syncNode of a cluster master.
func (s *syncer) nodeOf(node door.Node) *syncNode {
	addr := node.Addr()
	s.mu.RLock()
	n := s.nodes[addr]
	s.mu.RUnlock()
	if n == nil {
		s.mu.Lock()
		if n = s.nodes[addr]; n == nil {
			n = s.newNode(node)
			s.nodes[addr] = n
		}
		s.mu.Unlock()
		s.hasReplicas.Store(true)
	}
	if cur := n.node.Load(); *cur != node {
		n.node.Store(&node)
	}
	return n
}

// mayWait reports whether some write may have to wait for replicas now:
// cheap, for paths that only need to know whether sync could be on. The
// single master's own state answers the moment a probe has read it: a
// count kept beside it would say "may wait" until it was updated too.
func (s *syncer) mayWait() bool {
	if s == nil || s.off.Load() {
		return false
	}
	if s.cfg.Replicas > 0 || s.saw.Load() {
		return true
	}
	if !s.cluster {
		return s.single.mayHaveReplicas()
	}
	return s.hasReplicas.Load()
}

// mayHaveReplicas reports whether n has replicas in sync, as last read,
// or was never read.
func (n *syncNode) mayHaveReplicas() bool {
	return !n.ready.Load() || n.replicas.Load() > 0
}
