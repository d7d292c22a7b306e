package relock

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/relock-go/relock/internal/door"
)

// What the syncer learns from the servers, and when. A master is probed
// once, before the first write that may wait for its replicas: INFO
// replication (and INFO persistence for WAITAOF) says how many replicas are
// in sync with it, and, where a WAIT will be needed, one WAIT that waits
// for nothing says whether the server allows it. The counts are read again
// when a WAIT answers fewer replicas than expected, and in the background
// when a lock call or a renewal finds them older than a watchdog interval;
// never on the way of an acquisition that went well.

// start begins the Client's background reads, with a first probe of every
// master so that the first lock call seldom has to.
func (s *syncer) start() {
	if s == nil {
		return
	}
	s.c.wg.Add(1)
	go s.run()
	s.kick <- struct{}{}
}

// run re-reads the replica counts whenever asked, until the Client closes.
func (s *syncer) run() {
	defer s.c.wg.Done()
	for {
		select {
		case <-s.c.ctx.Done():
			return
		case <-s.kick:
		}
		ctx, cancel := context.WithTimeout(s.c.ctx, s.c.cfg.cleanup)
		s.refresh(ctx)
		cancel()
	}
}

// stale asks run to read n's replica count again if it is older than
// s.every, at most once per s.every.
func (s *syncer) stale(n *syncNode) {
	now := s.c.wd.Now()
	at := n.readAt.Load()
	if now-at > s.every && n.readAt.CompareAndSwap(at, now) {
		select {
		case s.kick <- struct{}{}:
		default:
		}
	}
}

// refresh reads the replica count of every master.
func (s *syncer) refresh(ctx context.Context) {
	if !s.cluster {
		if err := s.reread(ctx, s.single); err != nil {
			s.c.cfg.logger.Debug("relock: replica sync: cannot read the replica count", "node", s.single.addr, "err", err)
		}
		return
	}
	masters, err := s.drv.Masters(ctx)
	seen := make(map[*syncNode]bool)
	errs := make([]error, len(masters))
	var wg sync.WaitGroup // the masters are read at once
	for i, m := range masters {
		n := s.nodeOf(m)
		seen[n] = true
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = s.reread(ctx, n)
		}()
	}
	wg.Wait()
	if err == nil {
		err = errors.Join(errs...)
	}
	if err != nil {
		s.c.cfg.logger.Debug("relock: replica sync: cannot read the replica counts", "err", err)
		return
	}
	// Forget the masters that are masters no more.
	s.mu.Lock()
	for addr, n := range s.nodes {
		if !seen[n] {
			delete(s.nodes, addr)
		}
	}
	s.mu.Unlock()
	s.recount()
}

// reread probes n if it never was, and reads its replica count otherwise.
func (s *syncer) reread(ctx context.Context, n *syncNode) error {
	if !n.ready.Load() {
		return s.probe(ctx, n)
	}
	return s.read(ctx, n)
}

// probe reads n's replica count for the first time and, if a WAIT may be
// needed, checks that the server allows it.
func (s *syncer) probe(ctx context.Context, n *syncNode) error {
	n.mu.Lock()
	if n.ready.Load() {
		n.mu.Unlock()
		return nil
	}
	err := s.readLocked(ctx, n)
	if err != nil && !isServerError(err) {
		n.mu.Unlock()
		return fmt.Errorf("relock: replica sync: reading INFO from %s: %w", n.addr, err)
	}
	infoErr := err
	n.ready.Store(true)
	n.mu.Unlock()
	if s.cfg.Replicas > 0 || n.replicas.Load() > 0 || infoErr != nil || n.byRole.Load() {
		acked, err := s.probeWait(ctx, n)
		if err != nil {
			n.ready.Store(false)
			return err
		}
		if infoErr != nil {
			n.replicas.Store(acked)
			if acked > 0 {
				s.saw.Store(true)
			}
		}
	}
	switch {
	case infoErr != nil && n.refused.Load() != nil && !s.concerns(n):
		// Refused INFO, ROLE and WAIT, the Client cannot tell whether the
		// master has replicas: say once what the default setting cannot
		// do. (Where sync concerns n, refuse has warned already.)
		s.warn.Do(func() {
			s.c.cfg.logger.Warn("relock: the Redis user may not run INFO, ROLE or WAIT, so replica sync cannot tell whether the master has replicas; "+
				"writes go unsynced (grant +info or +role, and +wait; or say WithoutReplicaSync)",
				"node", n.addr, "err", infoErr)
		})
	case infoErr != nil:
		// Worth a warning only to whom replica sync concerns: a server
		// that refuses INFO and ROLE and shows no replica to a WAIT (an
		// embedded or managed one, say) is no news to a Client that did
		// not ask for sync.
		s.notice(n, "relock: the server refuses INFO and ROLE; replica sync counts the replicas a WAIT reaches instead",
			"node", n.addr, "err", infoErr)
	}
	s.recount()
	return nil
}

// probeWait sends one WAIT that waits for no replica, to learn whether the
// server allows it. It returns how many replicas the WAIT reports in sync,
// which stands for the replica count where INFO is refused.
func (s *syncer) probeWait(ctx context.Context, n *syncNode) (int64, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.checked.Load() {
		return n.replicas.Load(), nil
	}
	xs := []door.Exchange{{Cmd: door.Cmd{Args: []any{"wait", 0, 1}, Once: true}}}
	if s.cfg.AOF {
		xs[0].Cmd.Args = []any{"waitaof", 0, 0, 1}
	}
	(*n.node.Load()).Pipe(ctx, xs)
	err := xs[0].Reply.Err()
	if err != nil && !isServerError(err) {
		return 0, fmt.Errorf("relock: replica sync: probing %s on %s: %w", s.verb, n.addr, err)
	}
	if isReplicaAnswer(err) {
		// The node was failed over since the map was read: the call goes
		// to the new master (Door.Resend).
		return 0, fmt.Errorf("relock: replica sync: probing %s on %s: %w (%w)", s.verb, n.addr, door.ErrNotMaster, err)
	}
	if err != nil && !isRefusal(err) {
		// Another answer (NOAUTH, BUSY, LOADING...): the caller's to hear.
		return 0, fmt.Errorf("relock: replica sync: probing %s on %s: %w", s.verb, n.addr, err)
	}
	if err != nil {
		s.refuse(n, err)
		return 0, nil
	}
	n.checked.Store(true)
	_, acked, _ := s.waitReply(&xs[0].Reply)
	return acked, nil
}

// isReplicaAnswer reports whether err is a replica's answer to WAIT or
// WAITAOF ("WAIT cannot be used with replica instances"), or to a write
// (READONLY).
func isReplicaAnswer(err error) bool {
	return err != nil && (strings.Contains(err.Error(), "cannot be used with replica") || door.ClassOf(err) == door.ReadOnly)
}

// read reads n's replica count again.
func (s *syncer) read(ctx context.Context, n *syncNode) error {
	n.mu.Lock()
	err := s.readLocked(ctx, n)
	n.mu.Unlock()
	s.recount()
	return err
}

// readLocked reads INFO replication (and persistence, for WAITAOF) from n.
// The caller holds n.mu.
func (s *syncer) readLocked(ctx context.Context, n *syncNode) error {
	xs := []door.Exchange{{Cmd: door.Cmd{Args: []any{"info", "replication"}}}}
	if s.cfg.AOF {
		xs = append(xs, door.Exchange{Cmd: door.Cmd{Args: []any{"info", "persistence"}}})
	}
	node := *n.node.Load()
	node.Pipe(ctx, xs)
	var count int
	var pending bool
	if info, err := xs[0].Reply.Text(); err == nil {
		count, pending = inSync(info)
	} else if !isServerError(err) {
		return err
	} else if count, err = roleReplicas(ctx, node); err != nil {
		return xs[0].Reply.Err() // refused both: the caller falls back on WAIT
	} else {
		n.byRole.Store(true)
	}
	n.replicas.Store(int64(count))
	if count > 0 {
		s.saw.Store(true)
	}
	if pers, err := xs[len(xs)-1].Reply.Text(); s.cfg.AOF && err == nil {
		local := int64(0)
		if v, _ := infoField(pers, "aof_enabled"); v == "1" {
			local = 1
		}
		n.local.Store(local)
	}
	at := s.c.wd.Now()
	n.readOK.Store(at)
	if pending {
		// A replica is about to count: read again in a second or so.
		at -= max(s.every-int64(time.Second), 0)
	}
	n.readAt.Store(max(at, 1))
	return nil
}

// roleReplicas counts the replicas in sync with a master by ROLE, for a
// user refused INFO (managed servers often allow ROLE): those that have
// acknowledged some offset, as inSync counts them.
func roleReplicas(ctx context.Context, node door.Node) (int, error) {
	xs := []door.Exchange{{Cmd: door.Cmd{Args: []any{"role"}}}}
	node.Pipe(ctx, xs)
	v, err := xs[0].Reply.Slice()
	if err != nil {
		return 0, err
	}
	if len(v) < 3 || v[0] != "master" {
		return 0, nil
	}
	replicas, _ := v[2].([]any)
	count := 0
	for _, r := range replicas {
		if f, ok := r.([]any); ok && len(f) == 3 && f[2] != "0" {
			count++
		}
	}
	return count, nil
}

// concerns reports whether replica sync matters on n: it was asked for
// (WithReplicaSync), or some master was seen with replicas.
func (s *syncer) concerns(n *syncNode) bool {
	return s.c.cfg.syncMode == syncOn || s.saw.Load() || n.replicas.Load() > 0
}

// notice logs what the server refuses about replica sync: a warning where
// replica sync concerns n, a debug record otherwise.
func (s *syncer) notice(n *syncNode, msg string, args ...any) {
	if s.concerns(n) {
		s.c.cfg.logger.Warn(msg, args...)
		return
	}
	s.c.cfg.logger.Debug(msg, args...)
}

// recount updates s.hasReplicas: whether some master of a cluster has
// replicas in sync, or has not been probed yet. (mayWait reads a single
// master's state itself.)
func (s *syncer) recount() {
	if !s.cluster {
		return
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	found := len(s.nodes) == 0 // nothing probed yet
	for _, n := range s.nodes {
		found = found || n.mayHaveReplicas()
	}
	s.hasReplicas.Store(found)
}

// inSync counts the replicas an INFO replication reply lists as online
// and having acknowledged some offset: those that answer a WAIT. (A
// replica past its first synchronisation is listed online with offset 0
// until its first heartbeat, up to a second later; only then does the
// master stream writes to it.) If the reply lists no replica in detail,
// it counts its connected_slaves. pending says that some replica is
// connected but does not count yet.
func inSync(info string) (count int, pending bool) {
	listed, online := 0, 0
	for _, line := range strings.Split(info, "\n") {
		rest, ok := strings.CutPrefix(line, "slave")
		if !ok || rest == "" || rest[0] < '0' || rest[0] > '9' {
			continue
		}
		listed++
		if strings.Contains(rest, "state=online") && !strings.Contains(rest+",", ",offset=0,") {
			online++
		}
	}
	if listed > 0 {
		return online, online < listed
	}
	v, _ := infoField(info, "connected_slaves")
	n, _ := strconv.Atoi(v)
	return n, false
}
