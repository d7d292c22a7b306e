package scripts

import (
	"fmt"
	"time"
)

// The election's scripts (see election_proclaim.lua).
var (
	ElectionProclaim = loadWith("election_proclaim", "clock")
	ElectionResign   = loadWith("election_resign", "clock")
	ElectionRead     = load("election_read")
)

// ElectionKeys are the keys of an election's scripts: made once per
// election handle, boxed once.
type ElectionKeys struct {
	Lock string // the election's lock hash (a Mutex's)
	Log  string // the election's log, a stream of records

	args []any
}

// NewElectionKeys returns the keys of an election's scripts.
func NewElectionKeys(lock, log string) *ElectionKeys {
	return &ElectionKeys{Lock: lock, Log: log, args: boxKeys(lock, log)}
}

// ElectionProclaimRequest is a call of election_proclaim.lua: publish the
// leader's record, for a new term or a new value in the same term, if the
// caller still holds the election's lock. Its reply is 1 when the record
// was written (see Written).
type ElectionProclaimRequest struct {
	Keys    *ElectionKeys
	Holder  string // the holder's owner id, its field in the lock hash
	Record  string // the record without its start: a JSON object
	NewTerm bool   // a new term; false for a new value of the same term
	Publish any    // "publish" or "spublish"
	LogTTL  any    // the log's lifetime in ms
	Term    uint64 // published on Channel
	Channel any    // the election's channel, told the term of every change
}

// Build returns the request's KEYS and ARGV.
func (r ElectionProclaimRequest) Build() (keys, args []any) {
	return r.Keys.args, []any{r.Holder, r.Record, argFlag(r.NewTerm), r.Publish, r.LogTTL, int64(r.Term), r.Channel}
}

// ElectionResignRequest is a call of election_resign.lua: withdraw the
// leader's record before its lock is released, and log that the term
// ended. Its reply is 1 when the record was withdrawn (see Written).
type ElectionResignRequest struct {
	Keys    *ElectionKeys
	Holder  string // the holder's owner id
	Term    uint64 // the term that ends
	Publish any    // "publish" or "spublish"
	LogTTL  any    // the log's lifetime in ms
	Channel any    // the election's channel, told the term that ends
}

// Build returns the request's KEYS and ARGV.
func (r ElectionResignRequest) Build() (keys, args []any) {
	return r.Keys.args, []any{r.Holder, int64(r.Term), r.Publish, r.LogTTL, r.Channel}
}

// Written reads the reply of election_proclaim.lua or
// election_resign.lua: whether the caller still held the lock, and the
// record was written or withdrawn.
func Written(r int64) bool { return r == 1 }

// ElectionReadRequest is a call of election_read.lua: read the leader,
// and up to Max log entries after After ("" to read none).
type ElectionReadRequest struct {
	Keys  *ElectionKeys
	After string
	Max   int
}

// Build returns the request's KEYS and ARGV.
func (r ElectionReadRequest) Build() (keys, args []any) {
	return r.Keys.args, []any{r.After, r.Max}
}

// ElectionReading is election_read.lua's answer.
type ElectionReading struct {
	// Record is the leader's record, "" when there is no leader (no
	// lock, or its holder has not published a record).
	Record string
	TTL    time.Duration // the lock's PTTL
	Last   string        // the id of the log's newest entry, "" for no log
	// Entries are the log entries read, oldest first.
	Entries []LogEntry
}

// LogEntry is one entry of an election's log.
type LogEntry struct {
	ID, Record string
}

// ElectionReadingOf decodes election_read.lua's reply: {record, pttl,
// last, id1, record1, ...}.
func ElectionReadingOf(v []any) (ElectionReading, error) {
	if len(v) < 3 {
		return ElectionReading{}, fmt.Errorf("unexpected reply %v", v)
	}
	var r ElectionReading
	r.Record, _ = v[0].(string)
	r.TTL = time.Duration(toInt64(v[1])) * time.Millisecond
	r.Last, _ = v[2].(string)
	for i := 3; i+1 < len(v); i += 2 {
		id, _ := v[i].(string)
		rec, _ := v[i+1].(string)
		r.Entries = append(r.Entries, LogEntry{ID: id, Record: rec})
	}
	return r, nil
}
