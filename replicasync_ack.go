package relock

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/relock-go/relock/internal/door"
)

// judge says whether the WAIT that followed a write was answered by
// enough replicas. When Replicas is 0 and fewer acknowledged than the
// master had, it reads the replica count again: replicas that went away
// are no longer waited for. It returns nil, or an error wrapping
// ErrReplicaSync.
func (s *syncer) judge(ctx context.Context, t *syncTarget, ack *door.Reply) error {
	local, acked, err := s.waitReply(ack)
	if err != nil {
		if isServerError(err) && isRefusal(err) {
			s.refuse(t.node, err)
			if s.off.Load() {
				return nil
			}
		}
		return fmt.Errorf("%w: %s: %w", ErrReplicaSync, s.verb, err)
	}
	wantLocal := int64(0)
	if s.cfg.AOF {
		wantLocal = t.node.local.Load()
	}
	if acked >= int64(t.need) && local >= wantLocal {
		return nil
	}
	if s.cfg.Replicas == 0 {
		// Read the count again, unless a read finished while this WAIT
		// waited (calls of one batch fall short together).
		var err error
		if s.c.wd.Now()-t.node.readOK.Load() > int64(s.cfg.Timeout) {
			err = s.read(ctx, t.node)
		}
		if err == nil && acked >= int64(s.need(t.node)) && local >= wantLocal {
			return nil
		}
	}
	if local < wantLocal {
		return fmt.Errorf("%w: the master did not fsync its append-only file within %v", ErrReplicaSync, s.cfg.Timeout)
	}
	return fmt.Errorf("%w: %d of %d replicas within %v", ErrReplicaSync, acked, t.need, s.cfg.Timeout)
}

// waitReply returns what a WAIT or WAITAOF answered: the local fsyncs (0
// for WAIT) and the replicas that acknowledged.
func (s *syncer) waitReply(ack *door.Reply) (local, replicas int64, err error) {
	switch {
	case ack == nil:
		return 0, 0, errors.New("no WAIT was sent")
	case !s.cfg.AOF:
		replicas, err = ack.Int64()
		return 0, replicas, err
	}
	v, err := ack.Int64Slice()
	if err != nil {
		return 0, 0, err
	}
	if len(v) != 2 {
		return 0, 0, fmt.Errorf("unexpected WAITAOF reply %v", v)
	}
	return v[0], v[1], nil
}

// isRefusal reports whether a server error means the server does not let
// this client run WAIT at all (renamed, disabled, denied by ACL, unknown).
func isRefusal(err error) bool {
	msg := strings.ToLower(err.Error())
	for _, s := range []string{"unknown command", "noperm", "not allowed", "disabled", "not supported", "unsupported"} {
		if strings.Contains(msg, s) {
			return true
		}
	}
	return false
}

// refuse records that the server refused WAIT: with Fallback, sync is off
// from now on; otherwise the node's writes that need WAIT fail. A warning
// is logged once where replica sync concerns n (see concerns).
func (s *syncer) refuse(n *syncNode, err error) {
	n.refused.Store(&err)
	n.checked.Store(true)
	if s.cfg.Fallback {
		s.off.Store(true)
	}
	if !s.concerns(n) {
		// The probe's WAIT, on a server without replicas, for a Client
		// that did not ask for sync: no write will wait, nothing to say.
		s.c.cfg.logger.Debug("relock: the server refuses "+s.verb, "node", n.addr, "err", err)
		return
	}
	s.warn.Do(func() {
		if s.cfg.Fallback {
			s.c.cfg.logger.Warn("relock: the server refuses "+s.verb+"; going on without replica-synced acquisition",
				"node", n.addr, "err", err)
			return
		}
		s.c.cfg.logger.Warn("relock: the server refuses "+s.verb+"; lock calls fail with ErrReplicaSync (see ReplicaSync.Fallback and WithoutReplicaSync)",
			"node", n.addr, "err", err)
	})
}

// pause sleeps before a Retry of an acquisition whose WAIT fell short: a
// random part of the timeout, so that a WAIT that failed at once does not
// make a busy loop. It returns ctx's error, or ErrClosed.
func (s *syncer) pause(ctx context.Context) error {
	t := time.NewTimer(s.cfg.Timeout/2 + rand.N(s.cfg.Timeout/2+1))
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-s.c.closing:
		return ErrClosed
	}
}
