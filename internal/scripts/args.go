package scripts

import (
	"strconv"
	"time"
)

// Script arguments boxed once, so that requests do not allocate for them.
var (
	argEmpty any = ""
	argZero  any = "0"
	argOne   any = "1"
	argTwo   any = "2"
)

// argFlag returns "1" for true and "0" for false, boxed.
func argFlag(b bool) any {
	if b {
		return argOne
	}
	return argZero
}

// Kind is a waiting call's kind in a lock's queue of waiters: the middle
// part of its member "<lease ms>|<kind>|<owner>" (see unlock.lua and
// rw_queue.lua).
type Kind uint8

// The kinds of waiters.
const (
	// NoQueue is a call that does not queue: it never waits, or spins.
	NoQueue Kind = iota
	// OneShot is a one-shot owner's call ("o"), which a release of any
	// client may grant the lock to.
	OneShot
	// Reentrant is a reentrant owner's call ("r"), never granted: it is
	// told to attempt.
	Reentrant
	// Synced is a one-shot owner's call of a Client that waits for
	// replicas ("w"), granted by its own Client's releases only.
	Synced
	// Reader is an RWMutex reader ("R"), never granted.
	Reader
	// Listening is an RWMutex one-shot writer that listens on the
	// release channel ("O"), as a holder that is not a relock writer may
	// only publish there.
	Listening
)

// kindArgs are the kinds as script arguments, boxed once.
var kindArgs = [...]any{NoQueue: "", OneShot: "o", Reentrant: "r", Synced: "w", Reader: "R", Listening: "O"}

// String returns the kind as the scripts write it in a member.
func (k Kind) String() string { return kindArgs[k].(string) }

func (k Kind) arg() any { return kindArgs[k] }

// Member returns a waiting call's member of a lock's queue of waiters,
// "<lease ms>|<kind>|<owner>", as the lock scripts make it.
func Member(lease time.Duration, kind Kind, owner string) string {
	return strconv.FormatInt(lease.Milliseconds(), 10) + "|" + kind.String() + "|" + owner
}

// withKey returns keys, shared and never modified, followed by key in a
// slice of its own.
func withKey(keys []any, key string) []any {
	return append(keys[:len(keys):len(keys)], key)
}

// boxKeys returns key names as command arguments, leaving out those that
// are "".
func boxKeys(names ...string) []any {
	keys := make([]any, 0, len(names))
	for _, n := range names {
		if n != "" {
			keys = append(keys, n)
		}
	}
	return keys
}
