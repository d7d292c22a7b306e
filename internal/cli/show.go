package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/relock-go/relock/internal/layout"
)

var showCommand = &command{
	name:    "show",
	summary: "show one lock: holders, hold counts, TTL, fencing token, waiters",
	run:     runShow,
}

const showAbout = `
Shows the lock NAME: its kind, its holders (host, pid and program of their
clients) and their hold counts, its TTL, the holder's fencing token (or the
last one of the name's own token key, where one is kept), and who waits for
it. A fair lock's waiters are the owners in its queue, listed in order with
how long each keeps its place (a fair lock nobody waits for looks like a
plain one, and is shown as one). NAME may also be a synchronizer: a permit
semaphore shows its available permits and each held permit with its
holder's client and its expiry; a semaphore its available permits (which
belong to no one), a countdown latch its count
(the two have one layout: who waits on their channels tells them apart,
else show says it is one or the other). The waiters of a lock are the
relock calls in its queue and the connections subscribed to its release
channel (Redisson's waiters), less a relock run that holds it and listens
there for a force-unlock; those of a read-write lock are the connections
subscribed to its channel. Each relock client and each Redisson instance
waits on one shared subscription, so a subscriber is a waiting process,
not a waiting goroutine or thread.`

func runShow(ctx context.Context, e *env, args []string) int {
	fs := newFlagSet(e, "show", "[flags] NAME", showAbout)
	rf := addRedisFlags(fs)
	asJSON := fs.Bool("json", false, "print the lock as JSON (schema in docs/cli.md)")
	if code, done := parse(e, fs, args); done {
		return code
	}
	if fs.NArg() != 1 {
		return usageError(e, fs, "want one lock NAME, got %d arguments", fs.NArg())
	}
	name := fs.Arg(0)
	if name == "" {
		return usageError(e, fs, "empty lock NAME")
	}
	rdb, code := rf.open(ctx, e, fs)
	if rdb == nil {
		return code
	}
	defer rdb.Close()

	name, err := resolveElection(ctx, rdb, name)
	if err != nil {
		return fail(e, fs, err)
	}
	s, err := inspectLock(ctx, rdb, name)
	if err != nil {
		return fail(e, fs, err)
	}
	if *asJSON {
		if code := printJSON(e, fs, s.report(name)); code != exitOK {
			return code
		}
	} else {
		s.print(e.stdout, name)
	}
	if s.notALock() {
		return exitFailure
	}
	return exitOK
}

// notALock reports whether the name holds something other than a lock or
// a synchronizer, for which show exits 1.
func (s *lockState) notALock() bool {
	return s.lock == nil && s.count == nil && s.kind != "none"
}

// print writes what show prints of the name s describes: a line per fact,
// its label first, the columns aligned.
func (s *lockState) print(w io.Writer, name string) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "name\t%s\n", label(name))
	switch {
	case s.lock != nil:
		printHeld(tw, s.lock)
	case s.count != nil:
		printCount(tw, s.count)
	case s.kind == "none" && s.fair:
		fmt.Fprintf(tw, "state\tfree (fair lock with owners queued)\n")
	case s.kind == "none":
		fmt.Fprintf(tw, "state\tfree\n")
	default:
		fmt.Fprintf(tw, "state\tnot a lock: the key holds a %s\n", s.kind)
	}
	switch {
	case s.lock != nil && s.lock.token != "":
		fmt.Fprintf(tw, "token\t%s\t(the holder's fencing token)\n", s.lock.token)
	case s.token != "":
		fmt.Fprintf(tw, "token\t%s\t(%s, the last handed out)\n", s.token, s.tokenKey)
	}
	printQueue(tw, s.queue, s.fair)
	fmt.Fprintf(tw, "waiters\t%d\t(%s)\n", s.waiters, s.waitersWhat)
	tw.Flush()
}

// printHeld writes the lines of a held lock: its state and kind, an
// election's leader, the TTL, since when it is held, and its holders with
// their Clients.
func printHeld(w io.Writer, li *lockInfo) {
	state := "held"
	switch {
	case isRW(li.kind):
		state += " (read-write lock, " + li.kind + " mode)"
	case li.kind == kindFair:
		state += " (fair lock)"
	case li.kind == kindElection:
		state += " (election)"
	}
	fmt.Fprintf(w, "state\t%s\n", state)
	if l := li.leader; l != nil {
		fmt.Fprintf(w, "leader\t%q\tterm %d since %s\n", l.Value, l.Term, l.Since)
	} else if li.kind == kindElection {
		fmt.Fprintf(w, "leader\tnone published yet\n")
	}
	fmt.Fprintf(w, "ttl\t%s\n", fmtTTL(li.ttl))
	if d := li.heldFor(time.Now()); d > 0 {
		fmt.Fprintf(w, "since\t%s\t(held for %s)\n", time.UnixMilli(li.since).Format(time.RFC3339), d.Round(time.Millisecond))
	}
	for _, h := range li.holders {
		side := ""
		if h.write {
			side = ", write"
		}
		fmt.Fprintf(w, "holder\t%s\t%s (holds %d%s)\n", h.client, h.owner, h.count, side)
		if h.client != nil && h.client.Version != "" {
			fmt.Fprintf(w, "\t\trelock %s, started %s\n", h.client.Version, h.client.Started)
		}
	}
}

// printCount writes the lines of a synchronizer: its kind and count, and
// a permit semaphore's held permits with their holders and expiries.
func printCount(w io.Writer, c *counted) {
	fmt.Fprintf(w, "kind\t%s\n", c.kind)
	switch c.kind {
	case kindPermits:
		fmt.Fprintf(w, "available\t%d\n", c.count)
		fmt.Fprintf(w, "held\t%d\n", len(c.permits))
		for _, p := range c.permits {
			left := "no lease"
			if p.ExpiresInMs != nil {
				left = "expires in " + fmtMs(*p.ExpiresInMs)
			}
			who := p.Client.String()
			if p.Owner != "" {
				who += " " + p.Owner
			}
			fmt.Fprintf(w, "permit\t%s\t%s, %s\n", p.ID, who, left)
		}
	case kindLatch:
		fmt.Fprintf(w, "count\t%d\n", c.count)
	case kindSem:
		fmt.Fprintf(w, "available\t%d\n", c.count)
		fmt.Fprintf(w, "holders\tnone recorded: a semaphore's permits have no owner\n")
	default:
		fmt.Fprintf(w, "value\t%d\t(a semaphore's available permits or a latch's count: nobody waits to tell which)\n", c.count)
	}
}

// printQueue writes a line per waiter in queue, first to last: how long
// each relock call has waited (and, for a read-write lock, to do what),
// or, in a fair lock's queue, how long each owner keeps its place.
func printQueue(w io.Writer, queue []queuedRow, fair bool) {
	for i, q := range queue {
		if !fair {
			mode := ""
			if q.Mode != "" {
				mode = ", to " + q.Mode
			}
			fmt.Fprintf(w, "queued %d\t%s\t%s (waiting for %s%s)\n", i+1, q.Client, q.Owner, fmtMs(q.WaitingMs), mode)
			continue
		}
		fmt.Fprintf(w, "queued %d\t%s\t%s (keeps its place for %s)\n", i+1, q.Client, q.Owner, fmtMs(q.DeadlineInMs))
	}
}

// shown is what `relock show --json` prints (docs/cli.md); fields are only
// ever added to it.
type shown struct {
	Name  string `json:"name"`  // as given; an election's own name (see label)
	State string `json:"state"` // held, free, or not-a-lock
	// Kind is lock, fair, read or write while held; fair for a free fair
	// lock with owners queued; else the key's Redis type ("none" when free).
	Kind        string      `json:"kind"`
	TTLms       *int64      `json:"ttl_ms,omitempty"` // while held; -1: no expiry
	Holders     []holderRow `json:"holders"`
	Token       string      `json:"token,omitempty"`     // the holder's, or the last handed out
	TokenKey    string      `json:"token_key,omitempty"` // where the last handed out was read
	Waiters     int64       `json:"waiters"`
	WaitersWhat string      `json:"waiters_counted"`
	Queue       []queuedRow `json:"queue,omitempty"` // the waiting calls or owners, first to last
	// Count is a synchronizer's number: the permits available of a
	// semaphore or permit semaphore, a latch's count.
	Count   *int64      `json:"count,omitempty"`
	Permits []permitRow `json:"permits,omitempty"` // a permit semaphore's held permits
	Leader  *leaderRow  `json:"leader,omitempty"`  // an election's leader
	// Since is when relock granted the lock to its holder (RFC 3339, the
	// server's clock): a Mutex's, FairMutex's or Election's; absent when
	// not recorded (read-write locks, Redisson's holds).
	Since string `json:"since,omitempty"`
}

// report makes what show --json prints of the name s describes.
func (s *lockState) report(name string) shown {
	r := shown{Name: label(name), Kind: s.kind, Holders: []holderRow{}, Waiters: s.waiters, WaitersWhat: s.waitersWhat}
	switch {
	case s.lock != nil:
		r.State, r.Kind = "held", s.lock.kind
		ttl := s.lock.ttl.Milliseconds()
		if s.lock.ttl == -1 {
			ttl = -1
		}
		r.TTLms = &ttl
		for _, h := range s.lock.holders {
			r.Holders = append(r.Holders, holderRow{Owner: h.owner, Count: h.count, Write: h.write, Client: h.client})
		}
		r.Token, r.Leader = s.lock.token, s.lock.leader
		if s.lock.since > 0 {
			r.Since = time.UnixMilli(s.lock.since).UTC().Format(time.RFC3339Nano)
		}
	case s.count != nil:
		r.State, r.Kind = "count", s.count.kind
		r.Count = &s.count.count
		r.Permits = s.count.permits
		for _, p := range s.count.permits {
			owner := p.Owner
			if owner == "" {
				owner = p.ID
			}
			r.Holders = append(r.Holders, holderRow{Owner: owner, Count: 1, Client: p.Client, Permit: p.ID})
		}
	case s.kind == "none":
		r.State = "free"
		switch {
		case s.fair && isElection(name):
			r.Kind = kindElection
		case s.fair:
			r.Kind = kindFair
		}
	default:
		r.State = "not-a-lock"
	}
	r.Queue = s.queue
	if r.Token == "" && s.token != "" {
		r.Token, r.TokenKey = s.token, s.tokenKey
	}
	return r
}

// countWaiters counts who waits on a synchronizer's channel.
func (s *lockState) countWaiters(ctx context.Context, rdb redis.UniversalClient, name string, cluster bool) error {
	ch := layout.Companion(layout.SemaphoreChannel, name)
	if s.count.kind == kindLatch {
		ch = layout.LatchChannel(name, cluster)
	}
	var err error
	if s.count.kind == kindPermits {
		if s.queue, err = relockQueue(ctx, rdb, layout.Companion(layout.PermitQueue, name), false); err != nil {
			return err
		}
	}
	s.waiters, err = subscribers(ctx, rdb, ch)
	s.waitersWhat = "subscribers of " + ch
	if s.count.kind == kindCount {
		var latch int64
		latch, err = subscribers(ctx, rdb, layout.LatchChannel(name, cluster))
		s.waiters += latch
		s.waitersWhat += " and of " + layout.LatchChannel(name, cluster)
	}
	return err
}

// lockState is everything show reports about one name.
type lockState struct {
	kind        string    // the key's TYPE
	lock        *lockInfo // nil when free or not a lock
	tokenKey    string
	token       string // "" when no token was handed out
	fair        bool   // a fair lock's queue exists
	waiters     int64
	waitersWhat string      // what waiters counts
	queue       []queuedRow // the queue of waiters, first to last
	count       *counted    // a synchronizer's count, when name holds one
}

// inspectLock reads everything show reports about name.
func inspectLock(ctx context.Context, rdb redis.UniversalClient, name string) (*lockState, error) {
	s := &lockState{tokenKey: layout.Companion(layout.Token, name)}
	var err error
	if s.kind, err = rdb.Type(ctx, name).Result(); err != nil {
		return nil, err
	}
	if s.kind == "hash" {
		if err := s.readHash(ctx, rdb, name); err != nil {
			return nil, err
		}
	}
	if s.token, err = lastToken(ctx, rdb, s.tokenKey); err != nil {
		return nil, err
	}
	if s.kind == "string" || s.kind == "none" {
		_, cluster := rdb.(*redis.ClusterClient)
		if s.count, err = inspectCount(ctx, rdb, name, cluster); err != nil {
			return nil, err
		}
		if s.count != nil {
			return s, s.countWaiters(ctx, rdb, name, cluster)
		}
	}
	kind, err := lockKind(ctx, rdb, name)
	if err != nil {
		return nil, err
	}
	s.fair = kind == kindFair || kind == kindElection
	if s.queue, err = queueOf(ctx, rdb, name, kind); err != nil {
		return nil, err
	}
	if s.lock != nil && s.fair && s.lock.kind == kindLock {
		s.lock.kind = kindFair
	}
	if s.waiters, s.waitersWhat, err = waiters(ctx, rdb, name, kind); err != nil {
		return nil, err
	}
	return s, nil
}

// readHash reads the hash name as a lock, with its TTL and its holders'
// Clients. When the hash is not a lock's, or was deleted meanwhile, it
// says so in s.kind instead.
func (s *lockState) readHash(ctx context.Context, rdb redis.UniversalClient, name string) error {
	fields, err := rdb.HGetAll(ctx, name).Result()
	if err != nil {
		return err
	}
	ttl, err := rdb.PTTL(ctx, name).Result()
	if err != nil {
		return err
	}
	li, ok := parseLock(name, fields)
	switch {
	case ok:
		li.ttl = ttl
		s.lock = li
		return identify(ctx, rdb, []*lockInfo{li})
	case len(fields) == 0:
		s.kind = "none" // released between the calls
	default:
		s.kind = "hash whose fields are not lock owners"
	}
	return nil
}

// lastToken reads the fencing token last handed out from the token key;
// "" when none was.
func lastToken(ctx context.Context, rdb redis.UniversalClient, key string) (string, error) {
	token, err := rdb.Get(ctx, key).Result()
	if errors.Is(err, redis.Nil) {
		return "", nil
	}
	return token, err
}

// queueOf reads who waits in the queue of the lock name of the given kind,
// first to last: the owners queued for a fair lock or an election, the
// relock calls queued for a lock or a read-write lock; none for another
// kind.
func queueOf(ctx context.Context, rdb redis.UniversalClient, name, kind string) ([]queuedRow, error) {
	switch {
	case kind == kindFair || kind == kindElection:
		return fairQueue(ctx, rdb, name)
	case kind == kindLock:
		return relockQueue(ctx, rdb, layout.Companion(layout.LockQueue, name), false)
	case isRW(kind):
		return relockQueue(ctx, rdb, layout.Companion(layout.RWQueue, name), true)
	}
	return nil, nil
}
