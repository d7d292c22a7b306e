package gocronlock

import "errors"

// ErrNotLeader is returned by Elector.IsLeader when the Elector does not
// lead its election: not elected yet, its leadership lost, or the Elector
// closed. The error wraps the cause where there is one (the last failed
// campaign, relock.ErrLockLost, relock.ErrClosed).
var ErrNotLeader = errors.New("relock: not the leader")
