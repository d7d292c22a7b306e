package scripts

import (
	"fmt"
	"strconv"
	"time"
)

// RenewHold is one hold a renewal call renews or checks.
type RenewHold struct {
	Key   string        // the lock hash, or a permit semaphore's held permits
	Owner string        // the hold's field, or the permit's id
	Lease time.Duration // the new lease; 0 checks the hold without extending it
	// ReaderHolds is, for a reader's hold (rw_renew.lua), the rule of the
	// reader hold keys of its lock.
	ReaderHolds string
}

// RenewRequest is a call of renew.lua, rw_renew.lua or permit_renew.lua:
// renew or check many holds of one kind, their keys of one slot.
type RenewRequest struct {
	Holds   []RenewHold
	Readers bool // rw_renew.lua's: the rules of the reader hold keys follow
}

// Build returns the request's KEYS and ARGV.
func (r RenewRequest) Build() (keys, args []any) {
	n := len(r.Holds)
	keys = make([]any, n)
	size := 2 * n
	if r.Readers {
		size += n
	}
	args = make([]any, 0, size)
	for i, h := range r.Holds {
		keys[i] = h.Key
		args = append(args, h.Owner, strconv.FormatInt(h.Lease.Milliseconds(), 10))
	}
	if r.Readers {
		for _, h := range r.Holds {
			args = append(args, h.ReaderHolds)
		}
	}
	return keys, args
}

// RenewReplyOf decodes a renewal's reply for n holds: whether each is
// still held by its owner.
func RenewReplyOf(v []int64, n int) ([]bool, error) {
	if len(v) != n {
		return nil, fmt.Errorf("relock: renewal of %d holds answered %d", n, len(v))
	}
	held := make([]bool, n)
	for i, h := range v {
		held[i] = h == 1
	}
	return held, nil
}
