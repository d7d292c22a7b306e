package relock

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"strconv"
	"sync/atomic"
	"time"
)

// ownerSeq numbers owners process-wide, so that an owner number is never
// reused by any Client of the process.
var ownerSeq atomic.Uint64

type ownerKey struct{}

// WithOwner returns a copy of ctx that carries a fresh owner identity.
// Every lock taken with a context carrying it is reentrant for that owner:
// locking a name it already holds adds a hold instead of blocking, and the
// lock is released when every Lease of the owner has been unlocked.
//
// The owner is the context value, not a goroutine: two goroutines that
// lock with contexts carrying the same owner are both let in, and are in
// the critical section at once, since the second re-enters the first's
// hold. Give each goroutine (each task that must exclude the others) an
// owner of its own, and share one only along a single line of calls, as
// a Java thread re-enters its own locks.
//
// A lock call whose ctx carries no owner is its own, one-shot owner: it is
// never reentrant, so a second Lock of a held name blocks, as with
// sync.Mutex.
func WithOwner(ctx context.Context) context.Context {
	return context.WithValue(ctx, ownerKey{}, ownerSeq.Add(1))
}

// clockArg is the current second as a script argument: the unix time in
// ms, rounded down to the second, boxed once per second.
type clockArg struct {
	sec int64
	arg any
}

// nowArg returns the Client's clock as a lock script records it in
// relock_since, without an allocation but once a second.
func (c *Client) nowArg() any {
	sec := time.Now().Unix()
	if p := c.clock.Load(); p != nil && p.sec == sec {
		return p.arg
	}
	p := &clockArg{sec: sec, arg: strconv.FormatInt(sec*1000, 10)}
	c.clock.Store(p)
	return p.arg
}

// owner returns the owner id for a lock call with ctx, "<uuid>:<n>" as in
// Redisson, and whether it is a reentrant owner.
func (c *Client) owner(ctx context.Context) (string, bool) {
	n, reentrant := ctx.Value(ownerKey{}).(uint64)
	if !reentrant {
		n = ownerSeq.Add(1)
	}
	var b [64]byte
	id := strconv.AppendUint(append(append(b[:0], c.id...), ':'), n, 10)
	return string(id), reentrant
}

// newUUID returns a random (version 4) UUID: a Client's id, the start of
// its owner ids.
func newUUID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	var s [36]byte
	hex.Encode(s[0:8], b[0:4])
	s[8] = '-'
	hex.Encode(s[9:13], b[4:6])
	s[13] = '-'
	hex.Encode(s[14:18], b[6:8])
	s[18] = '-'
	hex.Encode(s[19:23], b[8:10])
	s[23] = '-'
	hex.Encode(s[24:], b[10:])
	return string(s[:])
}
