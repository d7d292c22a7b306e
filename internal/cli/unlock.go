package cli

import (
	"context"
	"errors"
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/relock-go/relock"
)

var unlockCommand = &command{
	name:    "unlock",
	summary: "delete a lock whoever holds it (needs --force)",
	run:     runUnlock,
}

const unlockAbout = `
Deletes the lock NAME whoever holds it and wakes its waiters, as its kind
requires: a lock's next waiter, the first owner queued for a fair lock,
every waiter of a read-write lock (whose reader hold keys go too). The
holder is not asked: a relock run holding it kills its command at once, but
other holders may still act as if they held the lock until their Client
hears of it. Hence --force.

A key that is not a lock (relock show says "not a lock": an application's
hash, a string, a semaphore or latch) is left alone, and relock exits 1.`

func runUnlock(ctx context.Context, e *env, args []string) int {
	fs := newFlagSet(e, "unlock", "--force [flags] NAME", unlockAbout)
	rf := addRedisFlags(fs)
	force := fs.Bool("force", false, "really delete the lock")
	if code, done := parse(e, fs, args); done {
		return code
	}
	if fs.NArg() != 1 {
		return usageError(e, fs, "want one lock NAME, got %d arguments", fs.NArg())
	}
	name := fs.Arg(0)
	if !*force {
		return usageError(e, fs, "refusing to delete %q without --force: its holder may go on as if it held it until its Client hears of it", name)
	}
	rdb, code := rf.open(ctx, e, fs)
	if rdb == nil {
		return code
	}
	defer rdb.Close()
	c, err := relock.New(rdb)
	if err != nil {
		return fail(e, fs, err)
	}
	defer c.Close()
	name, kind, held, err := forceUnlock(ctx, c, rdb, name)
	if errors.Is(err, errNotALock) || errors.Is(err, relock.ErrWrongType) {
		// The exit of show for a key that is not a lock.
		fmt.Fprintf(e.stderr, "%s: %s: %s; nothing deleted\n", fs.Name(), label(name), plain(err))
		return exitFailure
	}
	if err != nil {
		return fail(e, fs, err)
	}
	if held {
		fmt.Fprintf(e.stdout, "%s: force-unlocked (%s)\n", label(name), kindName(kind))
	} else {
		fmt.Fprintf(e.stdout, "%s: was not locked\n", label(name))
	}
	return exitOK
}

// errNotALock is returned by forceUnlock for a key that holds something
// other than a lock, which it leaves alone.
var errNotALock = errors.New("not a lock")

// forceUnlock deletes the lock name (or the election of that name) as its
// kind requires, and returns the key it acted on, the kind, and whether it
// was held. A key that show would call no lock (an application's hash, a
// string, a semaphore) is refused with errNotALock, and the library
// refuses one that changed since with relock.ErrWrongType.
func forceUnlock(ctx context.Context, c *relock.Client, rdb redis.UniversalClient, name string) (key, kind string, held bool, err error) {
	if name, err = resolveElection(ctx, rdb, name); err != nil {
		return name, "", false, err
	}
	s, err := inspectLock(ctx, rdb, name)
	if err != nil {
		return name, "", false, err
	}
	if s.lock == nil && s.kind != "none" {
		return name, "", false, fmt.Errorf("%w: the key holds a %s", errNotALock, s.kind)
	}
	if kind, err = lockKind(ctx, rdb, name); err != nil {
		return name, "", false, err
	}
	switch {
	case kind == kindFair || kind == kindElection:
		held, err = c.FairMutex(name).ForceUnlock(ctx)
	case isRW(kind):
		held, err = c.RWMutex(name).ForceUnlock(ctx)
	default:
		held, err = c.Mutex(name).ForceUnlock(ctx)
	}
	return name, kind, held, err
}

// kindName describes a lock kind for messages.
func kindName(kind string) string {
	switch {
	case kind == kindFair:
		return "fair lock"
	case kind == kindElection:
		return "election"
	case isRW(kind):
		return "read-write lock"
	}
	return "lock"
}
