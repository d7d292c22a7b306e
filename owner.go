package relock

import (
	"context"
	"strconv"
	"sync/atomic"
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
// A lock call whose ctx carries no owner is its own, one-shot owner: it is
// never reentrant, so a second Lock of a held name blocks, as with
// sync.Mutex.
func WithOwner(ctx context.Context) context.Context {
	return context.WithValue(ctx, ownerKey{}, ownerSeq.Add(1))
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
