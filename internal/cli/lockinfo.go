package cli

import (
	"sort"
	"strconv"
	"strings"
	"time"
)

// Key prefixes of the lock layout shared with Redisson.
const (
	lockChannelPrefix = "redisson_lock__channel"
	tokenPrefix       = "redisson_lock_token"
	// The liveness hash of a fair lock's relock waiters: owner ids mapped
	// to deadlines, which must not be read as a lock.
	fairAlivePrefix = "relock_fair_alive:"
)

// tokenField is the field of a lock hash in which relock records the
// holder's fencing token.
const tokenField = "relock_token"

// companion returns the companion key or channel of a lock: "prefix:{name}",
// or "prefix:name" when the name carries its own hash tag, so that it
// hashes to the lock's cluster slot.
func companion(prefix, name string) string {
	if strings.IndexByte(name, '{') >= 0 {
		return prefix + ":" + name
	}
	return prefix + ":{" + name + "}"
}

// lockInfo is what a lock hash says.
type lockInfo struct {
	name    string
	kind    string // "lock", or "read"/"write" for a read-write lock
	holders []holder
	ttl     time.Duration // as PTTL: -1 for no expiry
	token   string        // the holder's fencing token; "" when none is recorded
}

// holder is one owner and its hold count.
type holder struct {
	owner string
	write bool // the write side of a read-write lock
	count int64
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
	if len(fields) == 0 || strings.HasPrefix(name, fairAlivePrefix) {
		return nil, false
	}
	li := &lockInfo{name: name, kind: "lock"}
	if mode, ok := fields["mode"]; ok {
		if mode != "read" && mode != "write" {
			return nil, false
		}
		li.kind = mode
	}
	for f, v := range fields {
		if f == "mode" {
			continue
		}
		if f == tokenField {
			li.token = v
			continue
		}
		h := holder{owner: f}
		if li.kind != "lock" {
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

// owners formats the holders as "owner" or "owner ×n", comma-separated.
func (li *lockInfo) owners() string {
	parts := make([]string, len(li.holders))
	for i, h := range li.holders {
		s := h.owner
		if h.write {
			s += " (write)"
		}
		if h.count > 1 {
			s += " ×" + strconv.FormatInt(h.count, 10)
		}
		parts[i] = s
	}
	return strings.Join(parts, ", ")
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
