package cli

import (
	"context"
	"errors"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/relock-go/relock/internal/layout"
)

// Lock kinds, as ls, show and web name them (and kindElection).
const (
	kindLock  = "lock"  // Mutex
	kindFair  = "fair"  // FairMutex with owners queued
	kindRead  = "read"  // RWMutex in read mode
	kindWrite = "write" // RWMutex in write mode
)

// isRW reports whether kind is a read-write lock's.
func isRW(kind string) bool { return kind == kindRead || kind == kindWrite }

// lockKind returns the kind of the lock name, for acting on it: a hash
// with a mode field is a read-write lock; a lock whose fair queue exists
// (or a free name with one) is a fair lock. A fair lock nobody waits for
// has the layout of a plain lock and is reported as one. It returns ""
// when name is neither held nor queued for.
func lockKind(ctx context.Context, rdb redis.UniversalClient, name string) (string, error) {
	var mode *redis.StringCmd
	var queued *redis.IntCmd
	_, err := rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		mode = p.HGet(ctx, name, "mode")
		queued = p.Exists(ctx, layout.Companion(layout.FairQueue, name), layout.Companion(layout.FairTimeout, name))
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) && !strings.HasPrefix(err.Error(), "WRONGTYPE") {
		return "", err
	}
	switch {
	case mode.Val() == kindRead || mode.Val() == kindWrite:
		return mode.Val(), nil
	case isElection(name) && queued.Val() > 0:
		return kindElection, nil
	case queued.Val() > 0:
		return kindFair, nil
	}
	n, err := rdb.Exists(ctx, name).Result()
	if err != nil || n == 0 {
		return "", err
	}
	if isElection(name) {
		return kindElection, nil
	}
	return kindLock, nil
}

// markFair sets the kind of the plain locks among locks whose fair queue
// exists to kindFair, in one pipeline.
func markFair(ctx context.Context, rdb redis.UniversalClient, locks []*lockInfo) error {
	queued := make(map[*lockInfo]*redis.IntCmd)
	_, err := rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for _, li := range locks {
			if li.kind == kindLock {
				queued[li] = p.Exists(ctx, layout.Companion(layout.FairQueue, li.name), layout.Companion(layout.FairTimeout, li.name))
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	for li, cmd := range queued {
		if cmd.Val() > 0 {
			li.kind = kindFair
		}
	}
	return nil
}

// waiters counts who waits for the lock name of the given kind, and says
// what was counted: the owners queued for a fair lock; the connections
// subscribed to a read-write lock's release channel (one per waiting
// relock Client or Redisson instance); for a lock, the relock calls in its
// queue and the connections subscribed to its release channel (Redisson
// instances, and relock Clients whose calls wait for a holder that is not
// relock), less those subscribed to its layout.Watch too: relock run
// listens there while it holds the lock (watchRelease), and a holder is no
// waiter.
func waiters(ctx context.Context, rdb redis.UniversalClient, name, kind string) (n int64, what string, err error) {
	switch {
	case kind == kindFair || kind == kindElection:
		key := layout.Companion(layout.FairQueue, name)
		n, err = rdb.LLen(ctx, key).Result()
		return n, "owners queued in " + key, err
	case isRW(kind):
		ch := layout.Companion(layout.RWChannel, name)
		n, err = subscribers(ctx, rdb, ch)
		return n, "subscribers of " + ch, err
	default:
		// relock's calls wait in the lock's queue; others (Redisson)
		// listen on the release channel.
		key, ch, watch := layout.Companion(layout.LockQueue, name), layout.Companion(layout.LockChannel, name), layout.Companion(layout.Watch, name)
		if n, err = rdb.ZCard(ctx, key).Result(); err != nil {
			return 0, "", err
		}
		subs, err := subscribersOf(ctx, rdb, []string{ch, watch})
		return n + max(subs[ch]-subs[watch], 0), "calls queued in " + key + " and subscribers of " + ch + " but not of " + watch + " (the holder's watch)", err
	}
}

// lockInfo is what a lock hash says.
type lockInfo struct {
	name    string
	kind    string // kindLock, kindFair, kindRead or kindWrite
	holders []holder
	ttl     time.Duration // as PTTL: -1 for no expiry
	token   string        // the holder's fencing token; "" when none is recorded
	count   *counted      // a synchronizer's, listed by ls; nil for a lock
	leader  *leaderRow    // an election's leader; nil when it has none
	since   int64         // when relock granted it, unix ms (server clock); 0 when unknown
}

// heldFor is how long the lock has been held, when relock recorded when it
// granted it (Mutex, FairMutex, Election), else 0.
func (li *lockInfo) heldFor(now time.Time) time.Duration {
	if li.since <= 0 {
		return 0
	}
	return max(now.Sub(time.UnixMilli(li.since)), 0)
}

// holder is one owner and its hold count, or one permit of a permit
// semaphore.
type holder struct {
	owner  string // "<uuid>:<n>"; for a permit that carries none, its id
	write  bool   // the write side of a read-write lock
	count  int64
	client *clientInfo // who the owner's Client is; nil when unknown (see identify)
	permit string      // a permit's id (hex); "" for a lock's holder
}

// holds returns the total hold count.
func (li *lockInfo) holds() int64 {
	var n int64
	for _, h := range li.holders {
		n += h.count
	}
	return n
}

// parseLock reads the fields of a hash as a lock: a reentrant lock maps
// owner ids "<uuid>:<n>" to positive hold counts; a read-write lock has a
// "mode" field of "read" or "write" and owner fields, "<owner>:write" for
// the writer. It reports false for any other hash, and for a fair lock's
// liveness hash, whose fields look like a lock's.
func parseLock(name string, fields map[string]string) (*lockInfo, bool) {
	if len(fields) == 0 || isCompanion(layout.FairAlive, name) {
		return nil, false
	}
	li := &lockInfo{name: name, kind: kindLock}
	if isElection(name) {
		li.kind = kindElection
		li.leader = parseLeader(fields)
	}
	if mode, ok := fields["mode"]; ok {
		if !isRW(mode) {
			return nil, false
		}
		li.kind = mode
	}
	for f, v := range fields {
		if f == "mode" {
			continue
		}
		if f == layout.TokenField {
			li.token = v
			continue
		}
		if f == layout.SinceField {
			li.since, _ = strconv.ParseInt(v, 10, 64)
			continue
		}
		if f == layout.QueuedField {
			continue
		}
		if li.kind == kindElection && (f == layout.LeaderField || f == layout.LeaderHolderField) {
			continue
		}
		h := holder{owner: f}
		if isRW(li.kind) {
			h.owner, h.write = strings.CutSuffix(f, ":write")
		}
		if !isOwner(h.owner) {
			return nil, false
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n <= 0 {
			return nil, false
		}
		h.count = n
		li.holders = append(li.holders, h)
	}
	if len(li.holders) == 0 {
		return nil, false
	}
	sort.Slice(li.holders, func(i, j int) bool { return li.holders[i].owner < li.holders[j].owner })
	return li, true
}

// isOwner reports whether s has the owner id form "<uuid>:<n>".
func isOwner(s string) bool {
	id, n, ok := strings.Cut(s, ":")
	if !ok || !isUUID(id) || n == "" {
		return false
	}
	for i := 0; i < len(n); i++ {
		if n[i] < '0' || n[i] > '9' {
			return false
		}
	}
	return true
}

// isUUID reports whether s is a UUID in its 8-4-4-4-12 hex form.
func isUUID(s string) bool {
	if len(s) != 36 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch i {
		case 8, 13, 18, 23:
			if c != '-' {
				return false
			}
		default:
			if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F') {
				return false
			}
		}
	}
	return true
}

// owners lists the holders, comma-separated: each as its Client ("host
// pid N program"), followed by its owner id when ids is set or the Client
// is unknown, "(write)" for a writer, and "×n" for n holds.
func (li *lockInfo) owners(ids bool) string {
	parts := make([]string, len(li.holders))
	for i, h := range li.holders {
		s := h.client.String()
		if ids || h.client == nil {
			s += " " + h.owner
		}
		if h.write {
			s += " (write)"
		}
		if h.count > 1 {
			s += " ×" + strconv.FormatInt(h.count, 10)
		}
		parts[i] = s
	}
	s := strings.Join(parts, ", ")
	if li.leader != nil {
		s += "; " + li.leader.describe()
	}
	return s
}

// fmtTTL formats a PTTL reply.
func fmtTTL(d time.Duration) string {
	switch {
	case d == -1: // go-redis reports PTTL's -1 (no expiry) as -1ns
		return "none"
	case d < 0:
		return "-"
	case d < time.Second:
		return d.Round(time.Millisecond).String()
	default:
		return d.Round(100 * time.Millisecond).String()
	}
}
