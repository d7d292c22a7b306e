package relock

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/relock-go/relock/internal/layout"
	"github.com/relock-go/relock/internal/scripts"
)

// Request markers make the synchronizers' state-changing calls apply once.
//
// Each such call carries a marker key (relock_semaphore_request:{name}:...
// or relock_latch_request:{name}:...) that its script writes when it
// applies the call, with the answer where one is needed. A request that
// go-redis sends again after a lost reply finds its marker and is not
// applied twice. A call whose reply is lost (a transport error, or ctx
// ending while it is under way) is resolved: an acquisition is undone
// (sem_undo.lua, which leaves the marker saying "undone", so that the
// request takes nothing should it still arrive), and any other call is run
// again with the same marker, within the cleanup timeout, so that it is
// applied exactly once whenever it returns nil. With replica sync the call
// run again is followed by its WAIT too (see Client.write).
//
// Markers expire after Client.markerTTL. So that they do not pile up for
// that long under load, each call also carries the markers of up to
// scripts.MaxForget earlier calls of the same handle whose replies arrived
// (those are of no use any more), and its script deletes them.

// requestSeq numbers request markers process-wide.
var requestSeq atomic.Uint64

// requests hands out the request markers of one primitive handle. It is
// safe for concurrent use.
type requests struct {
	c      *Client
	name   string // the primitive's name
	prefix string // "<prefix>:{name}:<client uuid>:"

	mu       sync.Mutex
	answered []string // markers of calls whose reply arrived
}

func newRequests(c *Client, prefix, name string) *requests {
	return &requests{c: c, name: name, prefix: layout.Marker(prefix, name, c.id+":")}
}

// marked returns the KEYS of a call on the primitive's count, with held
// (a permit semaphore's held permits, or nil; see scripts.Marked): a
// fresh marker, and answered markers for the script to delete.
func (r *requests) marked(held any) scripts.Marked {
	k := scripts.Marked{Count: r.name, Held: held, Marker: r.prefix + strconv.FormatUint(requestSeq.Add(1), 10)}
	r.mu.Lock()
	n := k.Forget(r.answered)
	r.answered = r.answered[:len(r.answered)-n]
	r.mu.Unlock()
	return k
}

// done records that the call of marker got its reply.
func (r *requests) done(marker string) {
	r.mu.Lock()
	if len(r.answered) < 4*scripts.MaxForget { // the rest just expire
		r.answered = append(r.answered, marker)
	}
	r.mu.Unlock()
}

// run runs s with keys, made by marked, and args: a script that applies a
// request once per marker, through Client.write. A lost reply is resolved
// by running it again with the same marker. changed says whether a reply
// means the request changed something. When run returns nil the call was applied exactly once. An
// error for which isUnconfirmed holds means it was applied on the master
// and too few replicas acknowledged it; any other error wrapping
// ErrReplicaSync, that it was refused before it was sent. After other
// errors that are not a Redis reply, the outcome is unknown.
func (r *requests) run(ctx context.Context, s *scripts.Script, keys, args []any, marker string, changed func(int64) bool) (int64, error) {
	v, err := r.c.write(ctx, writeCall{name: r.name, script: s, keys: keys, args: args, marker: marker, changed: changed})
	if errors.Is(err, ErrClosed) {
		return 0, ErrClosed // never sent
	}
	if err == nil || isUnconfirmed(err) {
		r.done(marker)
	}
	return v, err
}

// markerTTL is how long request markers make retries idempotent: longer
// than any retry of a client, and than a watchdog lease.
func (c *Client) markerTTL() time.Duration { return max(time.Minute, 2*c.cfg.watchdog) }
