package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/relock-go/relock/internal/layout"
)

// kindElection is the kind of an election's lock (relock.Election): a
// fair lock whose holder leads, with the leader's record in its hash.
const kindElection = "election"

// isElection reports whether the lock key name is an election's.
func isElection(name string) bool { return isCompanion(layout.Election, name) }

// electionKey returns the lock key of the election name.
func electionKey(name string) string { return layout.Companion(layout.Election, name) }

// electionName returns the name of the election whose lock key is key
// (electionKey's inverse), and whether key is an election's.
func electionName(key string) (string, bool) { return layout.NameOf(layout.Election, key) }

// label returns the name operators gave the object whose key is key, as
// ls, show and the web view list it: an election's own name for its lock
// key, else the key.
func label(key string) string {
	name, _ := electionName(key)
	return name
}

// leaderRow is an election's leader as ls --json, show --json and the web
// view show it (docs/cli.md).
type leaderRow struct {
	Value string `json:"value"`
	// Value64 carries a value that is not UTF-8, byte for byte (base64
	// in JSON); Value then shows it with its bad bytes replaced.
	Value64 []byte `json:"value64,omitempty"`
	Term    uint64 `json:"term"`
	Holder  string `json:"holder"`
	Host    string `json:"host,omitempty"`
	PID     int    `json:"pid,omitempty"`
	Program string `json:"program,omitempty"`
	Client  string `json:"client,omitempty"`
	Since   string `json:"since"` // RFC 3339, by the server's clock
}

// parseLeader reads the leader's record of an election's lock hash, and
// returns nil when there is none or its writer no longer holds the lock.
func parseLeader(fields map[string]string) *leaderRow {
	rec, holder := fields[layout.LeaderField], fields[layout.LeaderHolderField]
	if rec == "" || fields[holder] == "" {
		return nil
	}
	var r struct {
		leaderRow
		SinceMs int64 `json:"since"`
	}
	if err := json.Unmarshal([]byte(rec), &r); err != nil || r.Holder != holder {
		return nil
	}
	l := r.leaderRow
	if l.Value64 != nil {
		l.Value = string(l.Value64) // describe quotes the bytes as they are
	}
	l.Since = time.UnixMilli(r.SinceMs).UTC().Format(time.RFC3339)
	return &l
}

// describe renders a leader for ls and the web view.
func (l *leaderRow) describe() string {
	return fmt.Sprintf("leader %q, term %d, since %s", l.Value, l.Term, l.Since)
}

// resolveElection returns the election's lock key when name itself is not
// a key but the election of that name exists: show takes either.
func resolveElection(ctx context.Context, rdb redis.UniversalClient, name string) (string, error) {
	if isElection(name) {
		return name, nil
	}
	n, err := rdb.Exists(ctx, name).Result()
	if err != nil || n > 0 {
		return name, err
	}
	key := electionKey(name)
	if n, err = rdb.Exists(ctx, key, layout.Companion(layout.FairQueue, key)).Result(); err != nil || n == 0 {
		return name, err
	}
	return key, nil
}
