package relock

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/relock-go/relock/internal/door"
	"github.com/relock-go/relock/internal/layout"
	"github.com/relock-go/relock/internal/scripts"
)

// MaxValueLen is the longest value a leader may publish, in bytes.
const MaxValueLen = 64 << 10

// Election is a leader election on one name: of the callers that campaign
// for it, in any process, one at a time is the leader, and publishes a
// value (an address, say) that anyone can read or follow.
//
// It is built on a FairMutex: the leader is the holder of the lock
// "relock_election:{name}", kept alive by the watchdog while the leader's
// process lives and told of its loss as a Lease is, before any other
// campaigner can be elected. Campaigners are elected in the order they
// came, across processes, as by etcd's Election; one that died waiting
// keeps its place for its own Client's watchdog timeout at most, whatever
// the timeouts of those behind it. Every new leader gets a term, the
// fencing token of its hold, greater than every earlier leader's. The leader's
// record (value, term, host, process) lives in the lock's hash, and every
// change is appended to a short log, "relock_election_log:{name}" (about
// the last 128 changes, kept a minute after the last one), and announced
// on the channel "relock_election_channel:{name}", so that observers see
// each change in order. Waiting campaigners sleep as a FairMutex's waiters
// do: a resignation grants the lock to the next one, and a leader that dies
// is replaced once its lock expires, within the watchdog timeout.
//
// An Election is a cheap handle: make it with Client.Election. It is safe
// for concurrent use.
type Election struct {
	c       *Client
	name    string
	err     error      // an invalid name, returned by every call
	mu      *FairMutex // the election's lock: campaigners are elected in the order they came
	channel string
	log     string // the log of leader records

	keys *scripts.ElectionKeys // the lock and the log: KEYS of the election's scripts
}

// Election returns the Election of the given name. An invalid name is
// reported by every call on it with ErrInvalidName (Observe closes its
// channel at once).
func (c *Client) Election(name string) *Election {
	e := &Election{c: c, name: name}
	if e.err = checkName(name); e.err != nil {
		return e
	}
	// A campaigner that died waiting keeps its place for its own Client's
	// watchdog timeout at most, as a dead leader keeps the lock: its waiter
	// timeout, which bounds what it costs those behind it. The lock's name
	// is longer than the election's, whose check stands for it: an
	// election's name may be MaxNameLen bytes, as a lock's.
	e.mu = c.newFairMutex(layout.Companion(layout.Election, name), nil, []FairOption{WithWaiterTimeout(c.cfg.watchdog)})
	if e.err = e.mu.err; e.err != nil {
		return e
	}
	e.log = layout.Companion(layout.ElectionLog, name)
	e.channel = layout.Companion(layout.ElectionChannel, name)
	e.keys = scripts.NewElectionKeys(e.mu.name, e.log)
	return e
}

// Name returns the election's name.
func (e *Election) Name() string { return e.name }

func (e *Election) check() error {
	if e.err != nil {
		return e.err
	}
	return e.c.checkOpen()
}

// Campaign blocks until the caller is the leader, ctx ends, or the Client
// is closed, and then publishes value as the leader's: any bytes, which
// Leader and Observe return as they were given. Each call is a
// campaigner of its own (a ctx carrying WithOwner makes no difference): a
// second Campaign of the same process waits for the first to resign. opts
// are the lock options of the election's lock: WithLease gives a
// leadership that ends after that time, WithReplicaSync and WithSpin apply
// as to Mutex.Lock.
//
// When ctx ends the error wraps ctx.Err(), and nothing is left behind, as
// for Mutex.Lock. Other errors: ErrInvalidName, ErrInvalidValue (value
// longer than MaxValueLen), ErrInvalidOption, ErrClosed, ErrReplicaSync
// (the lock or the record too few replicas acknowledged: nothing is held
// then), and Redis errors, wrapped.
func (e *Election) Campaign(ctx context.Context, value string, opts ...LockOption) (*Leadership, error) {
	if err := e.check(); err != nil {
		return nil, err
	}
	if len(value) > MaxValueLen {
		return nil, fmt.Errorf("%w: %d bytes, the limit is %d", ErrInvalidValue, len(value), MaxValueLen)
	}
	if err := e.checkLog(ctx); err != nil {
		return nil, err
	}
	// A nil owner makes the lock call its own one-shot owner.
	ctx1 := context.WithValue(ctx, ownerKey{}, nil)
	for {
		lease, err := e.mu.Lock(ctx1, opts...)
		if err != nil {
			return nil, e.told("campaign", err)
		}
		l := &Leadership{e: e, lease: lease, value: value}
		ok, err := l.proclaim(ctx, value, true)
		if ok && err == nil {
			return l, nil
		}
		// Not published: give the lock up (even if ctx has ended); one lost
		// before it could be published is campaigned for again.
		_ = lease.Unlock(ctx)
		if err != nil {
			return nil, err
		}
	}
}

// checkLog fails with ErrWrongType when the election's log holds another
// type than a stream, before Campaign takes the lock: the leader's record,
// written once the lock is taken, would fail on it after the lock had
// drawn its fencing token. (A log that changes type while Campaign waits
// fails the record's write, and the lock is given up.)
func (e *Election) checkLog(ctx context.Context) error {
	kind, err := e.c.door.Command(ctx, door.Cmd{Args: []any{"type", e.log}, Key: 1}).Text()
	if err != nil {
		return opError(ctx, "campaign", e.name, err)
	}
	if kind != "stream" && kind != "none" {
		return fmt.Errorf("relock: campaign %q: %w: its log %s holds a %s", e.name, ErrWrongType, e.log, kind)
	}
	return nil
}

// Leader returns the current leader. With no leader (none elected, the
// last one resigned or lost its lock, or one elected a moment ago has not
// published its value yet) it returns an error wrapping ErrNoLeader.
// Other errors: ErrInvalidName, ErrClosed, and Redis errors, wrapped.
func (e *Election) Leader(ctx context.Context) (Leader, error) {
	if err := e.check(); err != nil {
		return Leader{}, err
	}
	r, err := e.read(ctx, "", 0)
	if err != nil {
		return Leader{}, err
	}
	if r.leader.Holder == "" {
		return Leader{}, fmt.Errorf("relock: leader of %q: %w", e.name, ErrNoLeader)
	}
	return r.leader, nil
}

// Leader is an election's leader, as Election.Leader and Election.Observe
// report it.
type Leader struct {
	// Value is the value the leader published, byte for byte: any bytes,
	// UTF-8 or not.
	Value string `json:"value"`
	// Term is the leader's fencing token: every new leader of the name has
	// a greater one. Proclaim keeps it.
	Term uint64 `json:"term"`
	// Holder is the leader's owner id, "<uuid>:<n>", whose uuid names its
	// Client. An Observe value with an empty Holder says that the election
	// has no leader now: the leader of Term resigned or lost its lock.
	Holder string `json:"holder"`
	// Where the leader runs: its host, process id and program, and the
	// name given by WithClientName.
	Host    string `json:"host,omitempty"`
	PID     int    `json:"pid,omitempty"`
	Program string `json:"program,omitempty"`
	Client  string `json:"client,omitempty"`
	// Since is when the term began, by the Redis server's clock (for a
	// value without a leader: when the term ended).
	Since time.Time `json:"since"`
}

// record is a leader's record as stored: Leader with Since in unix ms.
type record struct {
	Since int64 `json:"since"`
	recordBody
}

// recordBody is a record without its start, which election_proclaim.lua
// writes by the server's clock. A value that is not UTF-8, which a JSON
// string cannot carry, is kept in Value64 (base64 in the record); Value
// then holds it with its invalid bytes replaced by U+FFFD, for readers
// that know only "value" (the command line, older releases).
type recordBody struct {
	Term    uint64 `json:"term"`
	Value   string `json:"value"`
	Value64 []byte `json:"value64,omitempty"`
	Holder  string `json:"holder"`
	Host    string `json:"host,omitempty"`
	PID     int    `json:"pid,omitempty"`
	Program string `json:"program,omitempty"`
	Client  string `json:"client,omitempty"`
}

func parseRecord(s string) (Leader, error) {
	var r record
	if err := json.Unmarshal([]byte(s), &r); err != nil {
		return Leader{}, fmt.Errorf("relock: unreadable leader record: %w", err)
	}
	value := r.Value
	if r.Value64 != nil {
		value = string(r.Value64)
	}
	return Leader{Value: value, Term: r.Term, Holder: r.Holder, Host: r.Host, PID: r.PID,
		Program: r.Program, Client: r.Client, Since: time.UnixMilli(r.Since)}, nil
}

// reading is one read of an election (election_read.lua).
type reading struct {
	leader  Leader        // the current leader; Holder is "" for none
	ttl     time.Duration // the lock's PTTL
	last    string        // the id of the log's newest entry, "" for no log
	ids     []string      // the entries read, oldest first
	entries []Leader
}

// read reads the election's leader and up to n log entries after the
// entry after (none when after is "").
func (e *Election) read(ctx context.Context, after string, n int) (reading, error) {
	keys, args := scripts.ElectionReadRequest{Keys: e.keys, After: after, Max: n}.Build()
	v, err := e.c.door.Run(ctx, scripts.ElectionRead, keys, args...).Slice()
	if err != nil {
		return reading{}, opError(ctx, "read leader", e.name, err)
	}
	got, err := scripts.ElectionReadingOf(v)
	if err != nil {
		return reading{}, fmt.Errorf("relock: read leader %q: %w", e.name, err)
	}
	r := reading{ttl: got.TTL, last: got.Last}
	if got.Record != "" {
		if r.leader, err = parseRecord(got.Record); err != nil {
			return r, err
		}
	}
	for _, entry := range got.Entries {
		l, err := parseRecord(entry.Record)
		if err != nil {
			return r, err
		}
		r.ids = append(r.ids, entry.ID)
		r.entries = append(r.entries, l)
	}
	return r, nil
}

// recheck returns when an observer that made reading r looks again
// without being woken: just after the leader's lock would expire, or,
// with no leader (or a lock without a TTL), after idle. A PTTL of 0 is a
// lock that expires within the millisecond: it is looked at again then,
// not after idle.
func (r reading) recheck(idle time.Duration) time.Duration {
	if r.leader.Holder != "" && r.ttl >= 0 {
		return r.ttl + time.Millisecond
	}
	return idle
}

// told returns err, an error of the election's lock, told as an error of
// op on the election: a caller who campaigned for "sched" reads
// `campaign "sched"`, not the name of the lock behind it. The error
// matches what err matches.
func (e *Election) told(op string, err error) error {
	if err == nil {
		return nil
	}
	msg, key := err.Error(), strconv.Quote(e.mu.name)
	i := strings.Index(msg, key)
	if i < 0 {
		return err
	}
	name := strconv.Quote(e.name)
	head, ok := strings.CutPrefix(msg[:i], "relock: ")
	if rest, after := strings.CutPrefix(msg[i+len(key):], ": "); ok && after && !strings.Contains(head, ":") {
		// "relock: <op> <lock>: ..." is the lock's call, which was op.
		msg = "relock: " + op + " " + name + ": " + rest
	}
	return &electionError{msg: strings.ReplaceAll(msg, key, name), err: err}
}

// electionError is an error of an election's lock, told as the
// election's (see Election.told).
type electionError struct {
	msg string
	err error
}

func (e *electionError) Error() string { return e.msg }
func (e *electionError) Unwrap() error { return e.err }
