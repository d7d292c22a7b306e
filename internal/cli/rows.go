package cli

import (
	"context"
	"encoding/json"
	"flag"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/relock-go/relock/internal/layout"
)

// printJSON prints v as indented JSON on stdout.
func printJSON(e *env, fs *flag.FlagSet, v any) int {
	enc := json.NewEncoder(e.stdout)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return fail(e, fs, err)
	}
	return exitOK
}

// lockRow is one lock as `relock ls --json`, `relock web` and its
// /locks.json show it. Its JSON form is documented in docs/cli.md; fields
// are only ever added to it.
type lockRow struct {
	Name    string      `json:"name"`   // the key; an election's own name (see label)
	Kind    string      `json:"kind"`   // lock, fair, read, write, election, or a synchronizer's
	TTLms   int64       `json:"ttl_ms"` // -1: no expiry
	TTL     string      `json:"-"`
	Holds   int64       `json:"holds"`
	Holders []holderRow `json:"holders"`
	Owners  string      `json:"-"`
	Token   string      `json:"token,omitempty"` // the holder's, when recorded
	Waiting int64       `json:"waiting_clients"`
	// Count is a synchronizer's number (kind permit-semaphore, semaphore
	// or latch): the permits available, or a latch's count. Holds is then
	// a permit semaphore's held permits.
	Count *int64 `json:"count,omitempty"`
	// Leader is an election's leader (kind election), absent when none.
	Leader *leaderRow `json:"leader,omitempty"`
}

// holderRow is one holder of a lockRow.
type holderRow struct {
	Owner  string      `json:"owner"`
	Count  int64       `json:"count"`
	Write  bool        `json:"write,omitempty"`
	Client *clientInfo `json:"client,omitempty"` // absent for a holder whose Client is unknown
	// HeldForMs is how long the hold has lasted: from when relock granted
	// it, for a Mutex, FairMutex or Election; else (web view only) since
	// the view first saw it, and then AtLeast says it was held when the
	// view started, so it may be older.
	HeldForMs int64 `json:"held_for_ms,omitempty"`
	AtLeast   bool  `json:"held_for_at_least,omitempty"`
	// Permit is the id of a permit semaphore's permit (each is a holder
	// of its own); Owner is then the owner id "<uuid>:<n>" that the id
	// carries, or the id itself for a permit of Redisson's.
	Permit string `json:"permit,omitempty"`
}

// rows makes the rows of locks, counting each one's waiters.
func rows(ctx context.Context, rdb redis.UniversalClient, locks []*lockInfo) ([]lockRow, error) {
	out := make([]lockRow, 0, len(locks))
	for _, li := range locks {
		r := lockRow{Name: label(li.name), Kind: li.kind, TTLms: li.ttl.Milliseconds(), TTL: fmtTTL(li.ttl),
			Holds: li.holds(), Owners: li.owners(false), Token: li.token, Holders: []holderRow{}}
		if li.ttl == -1 {
			r.TTLms = -1
		}
		held := li.heldFor(time.Now()).Milliseconds()
		for _, h := range li.holders {
			r.Holders = append(r.Holders, holderRow{Owner: h.owner, Count: h.count, Write: h.write, Client: h.client, HeldForMs: held, Permit: h.permit})
		}
		r.Leader = li.leader
		if c := li.count; c != nil {
			r.Count, r.Holds, r.Owners = &c.count, c.held, li.describeCount(false)
			if c.kind == kindPermits {
				var err error
				if r.Waiting, err = subscribers(ctx, rdb, layout.Companion(layout.SemaphoreChannel, li.name)); err != nil {
					return nil, err
				}
			} else {
				r.Waiting = c.waiting
			}
			out = append(out, r)
			continue
		}
		var err error
		if r.Waiting, _, err = waiters(ctx, rdb, li.name, li.kind); err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, nil
}
