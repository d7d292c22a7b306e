package cli

import (
	"context"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/relock-go/relock/internal/layout"
)

// What show tells of the synchronizers and of a fair lock's queue, for
// relock's objects and Redisson's alike (the layouts are the same).

// Kinds of synchronizers, as show names them.
const (
	kindPermits = "permit-semaphore" // PermitSemaphore / RPermitExpirableSemaphore
	kindCount   = "semaphore-or-latch"
	kindSem     = "semaphore" // Semaphore / RSemaphore
	kindLatch   = "latch"     // CountDownLatch / RCountDownLatch
)

// permitRow is one held permit of a permit semaphore.
type permitRow struct {
	ID string `json:"id"` // hex: 48 digits for relock's permits, 32 for Redisson's
	// Owner is the owner id "<uuid>:<n>" a relock permit's id carries, and
	// Client its Client; both absent for a Redisson permit.
	Owner  string      `json:"owner,omitempty"`
	Client *clientInfo `json:"client,omitempty"`
	// ExpiresInMs is how long the permit has left by the server's clock;
	// absent for a permit held without a lease.
	ExpiresInMs *int64 `json:"expires_in_ms,omitempty"`
}

// queuedRow is one owner in a queue of waiters, first to last.
type queuedRow struct {
	Owner  string      `json:"owner"`
	Client *clientInfo `json:"client,omitempty"`
	// Mode is a read-write lock's waiting call's: "read" or "write".
	Mode string `json:"mode,omitempty"`
	// DeadlineInMs is how long a fair lock's owner keeps its place
	// without refreshing it, by the server's clock.
	DeadlineInMs int64 `json:"deadline_in_ms,omitempty"`
	// WaitingMs is how long a lock's waiting call has been queued, by the
	// server's clock.
	WaitingMs int64 `json:"waiting_ms,omitempty"`
}

// counted is what show finds in a name that holds a count.
type counted struct {
	kind    string
	count   int64 // permits available, or a latch's count
	permits []permitRow
	held    int64 // a permit semaphore's held permits (ls; its holders are the lockInfo's)
	waiting int64 // subscribers of its channel (ls)
}

// describe says what ls shows of a synchronizer in place of holders.
func (c *counted) describe() string {
	switch c.kind {
	case kindLatch:
		return "count " + strconv.FormatInt(c.count, 10)
	case kindPermits:
		return "available " + strconv.FormatInt(c.count, 10) + ", held " + strconv.FormatInt(c.held, 10)
	}
	return "available " + strconv.FormatInt(c.count, 10)
}

// describeCount says what ls shows of a synchronizer li in place of a
// lock's holders: its count, and a permit semaphore's permits by holder
// (with their owner ids when ids is set).
func (li *lockInfo) describeCount(ids bool) string {
	s := li.count.describe()
	if len(li.holders) > 0 {
		s += ": " + li.owners(ids)
	}
	return s
}

// inspectCount reads name as a synchronizer: a string holding an integer
// (a semaphore's available permits, a latch's count), and, for a permit
// semaphore, the zset of its held permits beside it. A semaphore and a
// latch have the same layout: the subscribers of their channels tell them
// apart while someone waits, else show says it is one or the other. It
// returns nil when name is no synchronizer.
func inspectCount(ctx context.Context, rdb redis.UniversalClient, name string, cluster bool) (*counted, error) {
	zset := layout.PermitTimeouts(name)
	var value *redis.StringCmd
	var permits *redis.ZSliceCmd
	var now *redis.TimeCmd
	_, err := rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		value = p.Get(ctx, name)
		permits = p.ZRangeWithScores(ctx, zset, 0, -1)
		now = p.Time(ctx)
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return nil, err
	}
	n, convErr := strconv.ParseInt(value.Val(), 10, 64)
	if value.Err() == nil && convErr != nil {
		return nil, nil // a string, but no count
	}
	held := permits.Val()
	if value.Err() != nil && len(held) == 0 {
		return nil, nil // nothing here
	}
	c := &counted{count: n}
	if len(held) > 0 || value.Err() != nil {
		c.kind = kindPermits
		if c.permits, err = heldPermits(ctx, rdb, held, now.Val().UnixMilli()); err != nil {
			return nil, err
		}
		return c, nil
	}
	if c.kind, err = countKind(ctx, rdb, name, cluster); err != nil {
		return nil, err
	}
	return c, nil
}

// heldPermits makes the rows of a permit semaphore's held permits from
// the members of its zset, each scored by its expiry: how long each has
// left at the server time at (unix ms), and its holder's Client.
func heldPermits(ctx context.Context, rdb redis.UniversalClient, held []redis.Z, at int64) ([]permitRow, error) {
	var permits []permitRow
	owners := make([]string, len(held))
	for i, z := range held {
		id, _ := z.Member.(string)
		r := permitRow{ID: hex.EncodeToString([]byte(id)), Owner: permitOwner(id)}
		if int64(z.Score) < layout.PermitNoLease {
			left := int64(z.Score) - at
			r.ExpiresInMs = &left
		}
		permits = append(permits, r)
		owners[i] = r.Owner
	}
	clients, err := clientsOf(ctx, rdb, owners)
	if err != nil {
		return nil, err
	}
	for i := range permits {
		permits[i].Client = clients[i]
	}
	return permits, nil
}

// countKind tells whether the count name is a semaphore's or a latch's by
// who waits on their channels: kindSem or kindLatch while someone waits on
// the one only, else kindCount.
func countKind(ctx context.Context, rdb redis.UniversalClient, name string, cluster bool) (string, error) {
	sem, err := subscribers(ctx, rdb, layout.Companion(layout.SemaphoreChannel, name))
	if err != nil {
		return "", err
	}
	latch, err := subscribers(ctx, rdb, layout.LatchChannel(name, cluster))
	if err != nil {
		return "", err
	}
	switch {
	case sem > 0 && latch == 0:
		return kindSem, nil
	case latch > 0 && sem == 0:
		return kindLatch, nil
	}
	return kindCount, nil
}

// permitOwner returns the owner id "<uuid>:<n>" that the raw id of a
// relock permit carries: its 16 bytes of the Client's uuid, then n in 8
// bytes, big-endian (relock's permitID). It returns "" for an id of
// another length (Redisson's are 16 random bytes).
func permitOwner(raw string) string {
	if len(raw) != 24 {
		return ""
	}
	h := hex.EncodeToString([]byte(raw[:16]))
	n := binary.BigEndian.Uint64([]byte(raw[16:]))
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:32] + ":" + strconv.FormatUint(n, 10)
}

// permitHolder returns the holder of the permit of raw id: its owner id
// when the id carries one (see permitOwner), else the permit's id.
func permitHolder(raw string) holder {
	h := holder{permit: hex.EncodeToString([]byte(raw)), count: 1}
	if h.owner = permitOwner(raw); h.owner == "" {
		h.owner = h.permit
	}
	return h
}

// fairQueue reads a fair lock's queue, first to last, with each owner's
// deadline: a relock waiter's liveness deadline, else its score (Redisson's
// rule, as the scripts judge them).
func fairQueue(ctx context.Context, rdb redis.UniversalClient, name string) ([]queuedRow, error) {
	owners, err := rdb.LRange(ctx, layout.Companion(layout.FairQueue, name), 0, -1).Result()
	if err != nil || len(owners) == 0 {
		return nil, err
	}
	scores := make([]*redis.FloatCmd, len(owners))
	alive := make([]*redis.StringCmd, len(owners))
	var now *redis.TimeCmd
	_, err = rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, o := range owners {
			scores[i] = p.ZScore(ctx, layout.Companion(layout.FairTimeout, name), o)
			alive[i] = p.HGet(ctx, layout.Companion(layout.FairAlive, name), o)
		}
		now = p.Time(ctx)
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return nil, err
	}
	at := now.Val().UnixMilli()
	clients, err := clientsOf(ctx, rdb, owners)
	if err != nil {
		return nil, err
	}
	rows := make([]queuedRow, len(owners))
	for i, o := range owners {
		deadline := int64(scores[i].Val())
		if v := alive[i].Val(); v != "" {
			d, _, _ := cutInt(v)
			deadline = d
		}
		rows[i] = queuedRow{Owner: o, Client: clients[i], DeadlineInMs: deadline - at}
	}
	return rows, nil
}

// relockQueue lists the relock calls waiting in the queue key (a
// Mutex's, an RWMutex's or a PermitSemaphore's), in the order they joined
// it (members "<lease ms>|<kind>|<owner>", scored by the server time they
// joined), with their Clients. rw says the queue is a read-write lock's,
// whose readers are of kind "R".
func relockQueue(ctx context.Context, rdb redis.UniversalClient, key string, rw bool) ([]queuedRow, error) {
	var members *redis.ZSliceCmd
	var now *redis.TimeCmd
	_, err := rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		members = p.ZRangeWithScores(ctx, key, 0, -1)
		now = p.Time(ctx)
		return nil
	})
	if err != nil || len(members.Val()) == 0 {
		return nil, err
	}
	at := now.Val().UnixMilli()
	var rows []queuedRow
	var owners []string
	for _, z := range members.Val() {
		m, _ := z.Member.(string)
		parts := strings.SplitN(m, "|", 3)
		if len(parts) != 3 {
			continue
		}
		row := queuedRow{Owner: parts[2], WaitingMs: max(at-int64(z.Score), 0)}
		if rw {
			row.Mode = "write"
			if parts[1] == "R" {
				row.Mode = "read"
			}
		}
		rows = append(rows, row)
		owners = append(owners, parts[2])
	}
	clients, err := clientsOf(ctx, rdb, owners)
	if err != nil {
		return nil, err
	}
	for i := range rows {
		rows[i].Client = clients[i]
	}
	return rows, nil
}

// cutInt reads the integer that begins s ("<deadline>:<lease>" in a fair
// lock's liveness hash).
func cutInt(s string) (int64, string, error) {
	i := 0
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		i++
	}
	n, err := strconv.ParseInt(s[:i], 10, 64)
	return n, s[i:], err
}

// fmtMs formats a duration in milliseconds for show.
func fmtMs(ms int64) string { return (time.Duration(ms) * time.Millisecond).String() }
