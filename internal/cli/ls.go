package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/relock-go/relock/internal/layout"
)

var lsCommand = &command{
	name:    "ls",
	summary: "list held locks and synchronizers: name, kind, holders (host, pid, program), TTL",
	run:     runLs,
}

const lsAbout = `
Scans the keyspace (every master of a cluster) for hashes laid out as relock
or Redisson locks, whose fields are owner ids "<uuid>:<n>" with hold counts,
and lists them. The kind is lock, fair (a fair lock with owners queued;
one nobody waits for looks like a plain lock), or read or write: a
read-write lock's mode, or election: an election, listed by its name (its
lock key is relock_election:{NAME}) with its leader's value and term;
--match applies to that name. Synchronizers are listed too: a permit semaphore
(kind permit-semaphore) with its available and held permits and the
client holding each, and a
semaphore or countdown latch while someone waits on it (an idle one holds
a plain number, like any counter; show NAME reads it). The scan is
incremental (SCAN with COUNT) and pipelined, so it is safe on a busy server,
but like any SCAN it may miss keys created or deleted while it runs.`

// scanCount is the COUNT hint of each SCAN call, and the size of the
// pipelines that follow it.
const scanCount = 1000

// hscanCount is how many fields a hash may have and still be read in one
// call; lock hashes have one field per owner.
const hscanCount = 128

func runLs(ctx context.Context, e *env, args []string) int {
	fs := newFlagSet(e, "ls", "[flags]", lsAbout)
	rf := addRedisFlags(fs)
	match := fs.String("match", "*", "list only lock names matching this glob `pattern`")
	ids := fs.Bool("ids", false, "show each holder's owner id \"<uuid>:<n>\" beside its Client")
	asJSON := fs.Bool("json", false, "print the locks as JSON, with their waiters (schema in docs/cli.md)")
	kind := fs.String("kind", "", "list only objects of this `kind`: "+strings.Join(metricKinds, ", "))
	if code, done := parse(e, fs, args); done {
		return code
	}
	if fs.NArg() > 0 {
		return usageError(e, fs, "unexpected argument %q", fs.Arg(0))
	}
	rdb, code := rf.open(ctx, e, fs)
	if rdb == nil {
		return code
	}
	defer rdb.Close()

	if *kind != "" && !slices.Contains(metricKinds, *kind) {
		return usageError(e, fs, "unknown --kind %q", *kind)
	}
	locks, err := scanLocks(ctx, rdb, *match)
	if err != nil {
		return fail(e, fs, err)
	}
	locks = ofKind(locks, *kind)
	if *asJSON {
		l := listing{Match: *match, Kind: *kind, At: time.Now()}
		if l.Locks, err = rows(ctx, rdb, locks); err != nil {
			return fail(e, fs, err)
		}
		return printJSON(e, fs, l)
	}
	if len(locks) == 0 {
		fmt.Fprintf(e.stderr, "no locks match %q\n", *match)
		return exitOK
	}
	printLocks(e.stdout, locks, *ids)
	return exitOK
}

// printLocks writes locks to w as ls's table, a row each; ids shows each
// holder's owner id beside its Client.
func printLocks(w io.Writer, locks []*lockInfo, ids bool) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "NAME\tKIND\tTTL\tHELD\tHOLDS\tOWNERS\n")
	now := time.Now()
	for _, li := range locks {
		if li.count != nil {
			fmt.Fprintf(tw, "%s\t%s\t-\t-\t%d\t%s\n", label(li.name), li.kind, li.count.held, li.describeCount(ids))
			continue
		}
		held := "-"
		if d := li.heldFor(now); d > 0 {
			held = d.Round(time.Second).String()
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s\n", label(li.name), li.kind, fmtTTL(li.ttl), held, li.holds(), li.owners(ids))
	}
	tw.Flush()
}

// scanLocks returns the locks whose names match pattern, sorted by name:
// an election's own name (see label), else its key. Elections are found
// by a second scan of their lock keys when pattern is not "*".
func scanLocks(ctx context.Context, rdb redis.UniversalClient, pattern string) ([]*lockInfo, error) {
	var (
		mu    sync.Mutex
		found = make(map[string]*lockInfo)
	)
	keep := func(li *lockInfo) {
		if pattern != "*" && isElection(li.name) && !globMatch(pattern, label(li.name)) {
			return
		}
		mu.Lock()
		found[li.name] = li
		mu.Unlock()
	}
	collect := func(ctx context.Context, node *redis.Client) error {
		if err := scanNode(ctx, node, pattern, keep); err != nil || pattern == "*" {
			return err
		}
		return scanNode(ctx, node, layout.Pattern(layout.Election), keep)
	}
	var err error
	switch c := rdb.(type) {
	case *redis.ClusterClient:
		err = c.ForEachMaster(ctx, collect)
	case *redis.Client:
		err = collect(ctx, c)
	default:
		err = fmt.Errorf("cannot scan with a %T", rdb)
	}
	if err != nil {
		return nil, err
	}
	locks := make([]*lockInfo, 0, len(found))
	for _, li := range found {
		locks = append(locks, li)
	}
	if err := markFair(ctx, rdb, locks); err != nil {
		return nil, err
	}
	if err := identify(ctx, rdb, locks); err != nil {
		return nil, err
	}
	sort.Slice(locks, func(i, j int) bool {
		a, b := label(locks[i].name), label(locks[j].name)
		return a < b || a == b && locks[i].name < locks[j].name
	})
	return locks, nil
}

// scanNode scans one server: SCAN, then per batch one pipeline of TYPE
// and one of HSCAN and PTTL for the hashes among them.
func scanNode(ctx context.Context, node *redis.Client, pattern string, found func(*lockInfo)) error {
	var cursor uint64
	for {
		keys, next, err := node.Scan(ctx, cursor, pattern, scanCount).Result()
		if err != nil {
			return fmt.Errorf("scan %s: %w", node.Options().Addr, err)
		}
		if err := inspectKeys(ctx, node, keys, found); err != nil {
			return fmt.Errorf("scan %s: %w", node.Options().Addr, err)
		}
		if next == 0 {
			return nil
		}
		cursor = next
	}
}

func inspectKeys(ctx context.Context, node *redis.Client, keys []string, found func(*lockInfo)) error {
	if len(keys) == 0 {
		return nil
	}
	hashes, strs, err := byType(ctx, node, keys)
	if err != nil {
		return err
	}
	if err := inspectCounts(ctx, node, strs, found); err != nil {
		return err
	}
	return inspectHashes(ctx, node, hashes, found)
}

// byType sorts keys into hashes and strings, leaving out relock's own
// strings, by their TYPE in one pipeline.
func byType(ctx context.Context, node *redis.Client, keys []string) (hashes, strs []string, err error) {
	types := make([]*redis.StatusCmd, len(keys))
	if _, err := node.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, k := range keys {
			types[i] = p.Type(ctx, k)
		}
		return nil
	}); !isReply(err) {
		return nil, nil, err
	}
	for i, k := range keys {
		switch types[i].Val() {
		case "hash":
			hashes = append(hashes, k)
		case "string":
			if !ownKey(k) {
				strs = append(strs, k)
			}
		}
	}
	return hashes, strs, nil
}

// inspectHashes reports each of hashes that is a lock to found, with its
// TTL, reading a big one (a read-write lock with many readers) whole.
func inspectHashes(ctx context.Context, node *redis.Client, hashes []string, found func(*lockInfo)) error {
	if len(hashes) == 0 {
		return nil
	}
	scans := make([]*redis.ScanCmd, len(hashes))
	ttls := make([]*redis.DurationCmd, len(hashes))
	if _, err := node.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, k := range hashes {
			scans[i] = p.HScan(ctx, k, 0, "", hscanCount)
			ttls[i] = p.PTTL(ctx, k)
		}
		return nil
	}); !isReply(err) {
		return err
	}
	for i, k := range hashes {
		kv, cursor, err := scans[i].Result()
		if err != nil {
			continue // deleted or changed type since TYPE
		}
		fields := pairs(kv)
		if _, ok := parseLock(k, fields); !ok {
			continue
		}
		if cursor != 0 {
			// A big hash that looks like a lock so far: a read-write
			// lock with many readers. Read it whole.
			if fields, err = node.HGetAll(ctx, k).Result(); err != nil {
				continue
			}
		}
		li, ok := parseLock(k, fields)
		if !ok {
			continue
		}
		li.ttl = ttls[i].Val()
		if ttls[i].Err() != nil {
			li.ttl = -2 * time.Nanosecond
		}
		found(li)
	}
	return nil
}

// ofKind keeps the objects of kind among locks; all of them for "".
func ofKind(locks []*lockInfo, kind string) []*lockInfo {
	if kind == "" {
		return locks
	}
	var kept []*lockInfo
	for _, li := range locks {
		if li.kind == kind {
			kept = append(kept, li)
		}
	}
	return kept
}

// ownKey reports whether a string key is one of the lock layouts' own
// (fencing counters and token keys, request and release markers), never a
// synchronizer.
func ownKey(k string) bool {
	return strings.HasPrefix(k, layout.Own) || isCompanion(layout.Token, k) || isCompanion(layout.UnlockLatch, k)
}

// isCompanion reports whether key is a companion key of prefix (see
// layout.Companion).
func isCompanion(prefix, key string) bool {
	_, ok := layout.NameOf(prefix, key)
	return ok
}

// inspectCounts finds the synchronizers among string keys of one server: a
// permit semaphore (a number with its zset of held permits beside it, whose
// holders are its permits), and a semaphore or latch someone waits on (a
// number whose channel has subscribers; an idle one cannot be told from any
// counter, and is left to show). Their lockInfo carries count.
func inspectCounts(ctx context.Context, node *redis.Client, keys []string, found func(*lockInfo)) error {
	if len(keys) == 0 {
		return nil
	}
	values, held, err := readCounts(ctx, node, keys)
	if err != nil {
		return err
	}
	var idle []*lockInfo
	for i, k := range keys {
		n, err := strconv.ParseInt(values[i].Val(), 10, 64)
		if values[i].Err() != nil || err != nil {
			continue
		}
		li := &lockInfo{name: k, kind: kindPermits, ttl: -1, count: &counted{kind: kindPermits, count: n}}
		if ids := held[i].Val(); len(ids) > 0 {
			li.count.held = int64(len(ids))
			for _, id := range ids {
				li.holders = append(li.holders, permitHolder(id))
			}
			sort.Slice(li.holders, func(a, b int) bool { return li.holders[a].owner < li.holders[b].owner })
			found(li)
			continue
		}
		idle = append(idle, li)
	}
	return inspectIdle(ctx, node, idle, found)
}

// readCounts reads, in one pipeline, each string key's value and the ids
// of the permits held in the zset a permit semaphore of that name would
// have. A key's own error reply is left in its command.
func readCounts(ctx context.Context, node *redis.Client, keys []string) ([]*redis.StringCmd, []*redis.StringSliceCmd, error) {
	values := make([]*redis.StringCmd, len(keys))
	held := make([]*redis.StringSliceCmd, len(keys))
	if _, err := node.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, k := range keys {
			values[i] = p.Get(ctx, k)
			held[i] = p.ZRange(ctx, layout.PermitTimeouts(k), 0, -1)
		}
		return nil
	}); !isReply(err) {
		return nil, nil, err
	}
	return values, held, nil
}

// inspectIdle names the counts with no permit held by who listens on
// them: a count with calls subscribed to a semaphore's channel is a
// Semaphore, one with calls subscribed to a latch's a CountDownLatch;
// found gets those, and a count no one waits on is left out.
func inspectIdle(ctx context.Context, node *redis.Client, idle []*lockInfo, found func(*lockInfo)) error {
	var channels []string
	for _, li := range idle {
		k := li.name
		channels = append(channels, layout.Companion(layout.SemaphoreChannel, k), layout.LatchChannel(k, false), layout.LatchChannel(k, true))
	}
	subs, err := subscribersOf(ctx, node, channels)
	if err != nil {
		return err
	}
	for _, li := range idle {
		sem := subs[layout.Companion(layout.SemaphoreChannel, li.name)]
		latch := subs[layout.LatchChannel(li.name, false)] + subs[layout.LatchChannel(li.name, true)]
		switch {
		case sem > 0:
			li.kind, li.count.kind, li.count.waiting = kindSem, kindSem, sem
		case latch > 0:
			li.kind, li.count.kind, li.count.waiting = kindLatch, kindLatch, latch
		default:
			continue
		}
		found(li)
	}
	return nil
}

// isReply reports whether err is nil or a server's error reply, after
// which the other commands of a pipeline still have their own outcomes.
func isReply(err error) bool {
	var re redis.Error
	return err == nil || errors.As(err, &re)
}

// pairs turns an HSCAN reply [field, value, ...] into a map.
func pairs(kv []string) map[string]string {
	m := make(map[string]string, len(kv)/2)
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return m
}
