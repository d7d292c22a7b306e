package relock

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/relock-go/relock/internal/layout"
	"github.com/relock-go/relock/internal/slots"
)

// MaxNameLen is the longest name relock accepts, in bytes, for every
// primitive: the name the caller gives, not the keys made from it.
const MaxNameLen = 1024

// Key prefixes (internal/layout names them for the command line too).
const (
	lockChannelPrefix  = layout.LockChannel
	tokenPrefix        = layout.Token // only with WithPerNameTokens
	unlockLatchPrefix  = layout.UnlockLatch
	requestPrefix      = layout.LockRequest
	fairQueuePrefix    = layout.FairQueue
	fairTimeoutPrefix  = layout.FairTimeout
	fairAlivePrefix    = layout.FairAlive
	rwChannelPrefix    = layout.RWChannel
	lockQueuePrefix    = layout.LockQueue    // see grant.go
	rwQueuePrefix      = layout.RWQueue      // see rw_queue.lua
	permitQueuePrefix  = layout.PermitQueue  // see permit_lib.lua
	grantChannelPrefix = layout.GrantChannel // see grant.go
)

// Keys and channels of the synchronizers (Semaphore, PermitSemaphore,
// CountDownLatch); see permitTimeoutKey and latchChannel for the rest.
const (
	semaphoreChannelPrefix = layout.SemaphoreChannel    // "redisson_sc:{name}", as Redisson
	semRequestPrefix       = "relock_semaphore_request" // request markers of semaphore calls
	latchRequestPrefix     = "relock_latch_request"     // request markers of latch calls
)

// permitTimeoutKey returns the zset of a permit semaphore's held permits.
func permitTimeoutKey(name string) string { return layout.PermitTimeouts(name) }

// latchChannel returns a countdown latch's channel (layout.LatchChannel).
func latchChannel(name string, cluster bool) string { return layout.LatchChannel(name, cluster) }

// fencingCounter is the key of the fencing counter of a standalone server;
// a cluster has one per hash slot in use, "relock_fencing:{<tag>}" (see
// fencingKey).
const fencingCounter = "relock_fencing"

// fencingKey returns the fencing counter that serves name: the one counter
// of a standalone server, or on a cluster the counter of name's slot, in
// that slot.
func fencingKey(name string, cluster bool) string {
	if !cluster {
		return fencingCounter
	}
	return fencingCounter + ":{" + slots.Tag(slot(name)) + "}"
}

// withNamed returns keys followed by named, the lock's own token key, when
// the Client keeps one (see Client.tokenKeys): the KEYS of a script that
// draws or reads fencing tokens, which takes the key, when given, after
// its fixed keys (see fence.lua). A request or release marker, when a
// call has one, goes last.
func withNamed(named string, keys ...any) []any {
	if named != "" {
		keys = append(keys, named)
	}
	return keys
}

// with returns keys, a primitive's KEYS for one-shot owners' calls (shared,
// never modified), followed by key in a slice of its own: a reentrant
// owner's request or release marker, which goes last, or the hold key a
// one-shot reader's lock call writes (see rw_read_lock.lua).
func with(keys []any, key string) []any {
	return append(keys[:len(keys):len(keys)], key)
}

// Release messages published on a lock's channel.
const (
	msgUnlock     = "0"
	msgReadUnlock = "1"
)

// Script arguments boxed once, so that calls do not allocate for them.
var (
	argEmpty any = ""
	argZero  any = "0"
	argOne   any = "1"
)

// companion returns the key or channel "prefix:{name}" that hashes to the
// same cluster slot as name (see layout.Companion).
func companion(prefix, name string) string { return layout.Companion(prefix, name) }

// tagged returns "{name}", or name itself when it has its own hash tag:
// the start of the read-write lock's reader hold keys
// "<tagged>:<owner>:rwlock_timeout:<i>", which hash to name's slot.
func tagged(name string) string {
	if strings.IndexByte(name, '{') >= 0 {
		return name
	}
	return "{" + name + "}"
}

// readerHold returns the key of a read-write lock's reader hold i of
// owner: "<tagged>:<owner>:rwlock_timeout:<i>" (Redisson's layout).
func readerHold(name, owner string, i int) string {
	return tagged(name) + ":" + owner + ":rwlock_timeout:" + strconv.Itoa(i)
}

// suffixed returns companion(prefix, name) + ":" + suffix.
func suffixed(prefix, name, suffix string) string {
	return companion(prefix, name) + ":" + suffix
}

// checkName reports whether name can be used as a lock name on any
// topology: not empty, at most MaxNameLen bytes, and either free of braces
// or carrying a proper hash tag, so that the lock and its companion keys
// always hash to one cluster slot.
func checkName(name string) error {
	if name == "" {
		return fmt.Errorf("%w: empty", ErrInvalidName)
	}
	if len(name) > MaxNameLen {
		return fmt.Errorf("%w: %d bytes, the limit is %d", ErrInvalidName, len(name), MaxNameLen)
	}
	open := strings.IndexByte(name, '{')
	if open < 0 {
		if strings.IndexByte(name, '}') >= 0 {
			return fmt.Errorf("%w: %q has '}' without '{': its companion keys would hash to another cluster slot", ErrInvalidName, name)
		}
		return nil
	}
	if end := strings.IndexByte(name[open+1:], '}'); end <= 0 {
		return fmt.Errorf("%w: %q has no non-empty {hash tag}: its companion keys would hash to another cluster slot", ErrInvalidName, name)
	}
	return nil
}

// slot returns the Redis Cluster hash slot of key.
func slot(key string) int { return slots.Of(key) }
