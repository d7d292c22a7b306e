package relock

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sync"
	"unicode/utf8"

	"github.com/relock-go/relock/internal/scripts"
)

// Leadership is a won election: the leader's hold of the election's lock.
// It ends when Resign is called or the lock is lost, which Done and Err
// report as a Lease's do. A Leadership is safe for concurrent use.
type Leadership struct {
	e     *Election
	lease *Lease

	mu    sync.Mutex // serialises Proclaim and Resign
	value string
}

// Name returns the election's name.
func (l *Leadership) Name() string { return l.e.name }

// Term returns the leadership's term: a fencing token greater than every
// earlier leader's of the election, to give to the storage the leader
// writes to, as Lease.Token.
func (l *Leadership) Term() uint64 { return l.lease.Token() }

// Value returns the value last published.
func (l *Leadership) Value() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.value
}

// Done returns a channel closed when the leadership ends: resigned, or
// lost (the lock expired or was deleted, or the Client was closed). A
// leadership whose lock could not be renewed is ended by its local
// deadline, before the lock expires in Redis: before any other campaigner
// can be elected.
func (l *Leadership) Done() <-chan struct{} { return l.lease.Done() }

// Err returns nil while the leadership holds, and after it ended
// ErrReleased (resigned) or an error wrapping ErrLockLost (lost).
func (l *Leadership) Err() error { return l.lease.Err() }

// Context returns a copy of parent that is cancelled when the leadership
// ends, with Err as its cause; call cancel when done with it.
func (l *Leadership) Context(parent context.Context) (context.Context, context.CancelFunc) {
	return l.lease.Context(parent)
}

// Proclaim publishes a new value, any bytes, without a new election: the
// term stays, and observers see the change. It returns an error wrapping ErrNotHeld
// when the leadership has ended, ErrInvalidValue for a value longer than
// MaxValueLen, and Redis errors, wrapped. With replica sync, a value too
// few replicas acknowledged stays published on the master, with an error
// wrapping ErrUnconfirmed.
func (l *Leadership) Proclaim(ctx context.Context, value string) error {
	if len(value) > MaxValueLen {
		return fmt.Errorf("%w: %d bytes, the limit is %d", ErrInvalidValue, len(value), MaxValueLen)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.lease.Err(); err != nil {
		return fmt.Errorf("relock: proclaim %q: %w (%w)", l.e.name, ErrNotHeld, err)
	}
	ok, err := l.proclaim(ctx, value, false)
	if ok && (err == nil || errors.Is(err, ErrUnconfirmed)) {
		l.value = value
	}
	if err == nil && !ok {
		return fmt.Errorf("relock: proclaim %q: %w", l.e.name, ErrNotHeld)
	}
	return err
}

// proclaim writes the leader's record with value (election_proclaim.lua),
// for a new term when first, and reports whether the hold was still there
// to write it.
func (l *Leadership) proclaim(ctx context.Context, value string, first bool) (bool, error) {
	c := l.e.c
	rb := recordBody{Term: l.lease.token, Value: value, Holder: l.lease.field,
		Host: c.infoField("host"), PID: os.Getpid(), Program: c.infoField("program"), Client: c.cfg.name}
	if !utf8.ValidString(value) {
		rb.Value64 = []byte(value)
	}
	body, err := json.Marshal(rb)
	if err != nil {
		return false, err
	}
	keys, args := scripts.ElectionProclaimRequest{Keys: l.e.keys, Holder: l.lease.field, Record: string(body), NewTerm: first,
		Publish: c.argPublish, LogTTL: c.argMarkerTTL, Term: l.lease.token, Channel: l.e.channel}.Build()
	v, err := c.write(ctx, writeCall{name: l.e.mu.name, script: scripts.ElectionProclaim, keys: keys, args: args, changed: isOne})
	if err != nil {
		return scripts.Written(v), l.e.told("proclaim", opError(ctx, "proclaim", l.e.name, err))
	}
	return scripts.Written(v), nil
}

// Resign ends the leadership: the record is withdrawn (observers see the
// term end), then the lock is released and granted to the next campaigner.
// It returns an error wrapping ErrNotHeld when the leadership had already
// ended. Resign goes out even when ctx has ended, bounded as
// Lease.Unlock's is. If it fails, the error says whether it was not sent,
// got no answer or was refused, and the leadership is no longer renewed:
// it ends within its lease (Done closes, Err reports ErrLockLost), when
// the next campaigner can be elected, unless Resign, called again
// meanwhile, ends it at once.
func (l *Leadership) Resign(ctx context.Context) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	c := l.e.c
	if err := c.checkOpen(); err != nil {
		return err
	}
	rctx, cancel := c.releaseContext(ctx)
	defer cancel()
	keys, args := scripts.ElectionResignRequest{Keys: l.e.keys, Holder: l.lease.field, Term: l.lease.token,
		Publish: c.argPublish, LogTTL: c.argMarkerTTL, Channel: l.e.channel}.Build()
	_, err := c.write(rctx, writeCall{name: l.e.mu.name, script: scripts.ElectionResign, keys: keys, args: args, changed: isOne})
	if err != nil && !errors.Is(err, ErrUnconfirmed) {
		// The record stays, and so does the lock, until it expires.
		l.lease.mu.Lock()
		if !l.lease.released {
			l.lease.abandon()
		}
		l.lease.mu.Unlock()
		return notReleased(rctx, "resign", l.e.name, err)
	}
	// A hold gone already makes Unlock report ErrNotHeld.
	return l.e.told("resign", l.lease.Unlock(ctx))
}
