// Package relock provides distributed locks on Redis with the semantics of
// Redisson's lock family: a reentrant Mutex kept alive by a watchdog while
// its holder lives, waiters woken by pub/sub instead of polling, fencing
// tokens, and a signal when a lock is lost, before it can expire on the
// server.
//
// # Primitives
//
//	Mutex            reentrant exclusive lock; watchdog lease or fixed lease (WithLease)
//	FairMutex        FIFO Mutex across processes; only the head waiter is woken
//	RWMutex          many readers or one writer; downgrade allowed, upgrade refused (ErrUpgrade)
//	MultiLock        all or nothing over any Lockers, on any Clients and cluster slots (Multi)
//	RedLock          quorum lock over independent masters (NewRedLock)
//	Semaphore        counting semaphore; permits not bound to an owner
//	PermitSemaphore  semaphore whose permits have ids and leases (Permit)
//	CountDownLatch   wait until a count reaches zero
//
// WithSpin makes a Mutex, FairMutex or RWMutex lock call, or a
// PermitSemaphore's Acquire, wait by jittered backoff instead of pub/sub.
//
// A Client (New) owns the watchdog, the owner ids and the shared pub/sub
// connections; primitives such as [Client.Mutex] are cheap handles made from
// it. New takes a go-redis v9 client; the modules relockvalkey and
// relockrueidis (github.com/relock-go/relock/relockvalkey, .../relockrueidis)
// make a Client on a valkey-go or a rueidis client, with everything else
// the same. Every acquisition returns a [Lease]: its Done channel closes and its
// Err turns to [ErrLockLost] when the hold is found gone or can no longer
// be trusted (see What is guaranteed).
// [Lease.Unlock] (like every release: Permit.Release, Semaphore.Release,
// Leadership.Resign) goes out even when its context has ended, within the
// Client's cleanup timeout (a server that does not answer at all holds it
// for the Redis client's read timeout), and stops renewal whatever its outcome: a
// hold whose release failed expires within its lease. [Lease.Extend]
// lengthens a fixed lease (WithLease).
//
// # Ownership
//
// Go has no thread identity, so ownership is explicit. A lock call whose
// context carries no owner is its own owner and is never reentrant: a
// second Lock of the same name blocks, as with sync.Mutex. [WithOwner]
// puts an owner into a context; locks taken with it are reentrant, and the
// lock is freed when all of the owner's leases are unlocked. The owner is
// the context's, not a goroutine's: goroutines sharing one owner context
// are all let in at once.
//
// # How a lock moves: grant, pass, wake
//
// Three verbs say how a lock, or a semaphore's permits, go from one caller
// to the next; the code, its comments and the docs use no others.
//
//   - Grant: Redis gives the lock to a queued waiter, in the script of the
//     release that frees it, so that the lock is never free between two
//     holders. A waiter of another Client learns of its grant on its
//     Client's grant channel and returns without a round trip of its own.
//   - Pass: a release gives what it frees to a waiting call of its own
//     Client, in process: the call returns with its Lease (or permits) as
//     the release's script, or the switch that records the new holder,
//     runs. [Stats].Handoffs counts the acquisitions that came by a pass
//     or a grant.
//   - Wake: a waiter is told to attempt, now or by a time: by a message on
//     a release channel, or by a fellow call of its Client that knows
//     better.
//
// # Options and Try calls
//
// Settings come as options of three scopes, each checked where it is given
// and refused with [ErrInvalidOption]: an [Option] configures the Client
// (New fails), a [LockOption] one lock call such as Lock or Acquire (that
// call fails), and a [FairOption] or [RedLockOption] the handle made by
// Client.FairMutex or NewRedLock (every call on the handle fails, as for an
// invalid name). Every Try call (TryLock, TryRLock, TryAcquire) makes one
// attempt and returns [ErrNotAcquired] when what it asks for is taken, and
// returns within a bound whatever its ctx: an answer that will not change
// (a refused password, a busy server) comes back at once, a cluster without
// a master for the slot is asked again for 5 seconds at most, and a server
// that does not answer holds it for the Redis client's read timeout (times
// its retries); TrySetPermits and TrySetCount, Redisson's names for "set if
// not set", report with a bool whether they set it.
//
// # What is guaranteed
//
//   - Mutual exclusion while Redis keeps its data: at most one owner holds
//     a name at a time.
//   - A hold is reported lost (Done closed, Err = ErrLockLost) before the
//     key can expire on the server, provided the client's and the server's
//     clocks run at nearly the same rate: each hold has a local deadline of
//     the time its acquisition or last confirmed renewal was sent, plus the
//     lease, minus lease/100 + 2ms.
//   - A hold taken away on the server (a ForceUnlock, a restart without
//     persistence, a failover that lost it) is reported when the holder's
//     Client hears of it: at once after a ForceUnlock by relock while the
//     Client listens on its grant channel, or made the ForceUnlock itself;
//     at once after that channel's pub/sub connection is made again;
//     otherwise at the hold's next renewal (every watchdog timeout/3) or
//     its local deadline, whichever comes first. On a standalone server or
//     under Sentinel a Client listens while it holds a lock, a permit or a
//     leadership (from a round trip after its first hold until a second or
//     two after its last) or has a call waiting; on a cluster only while
//     it has a call waiting for a lock of the same hash slot. A Redisson
//     holder hears at its own next renewal.
//   - Fencing tokens only grow per name, so a resource that checks them
//     refuses a holder that lost its lock to a newer one. They come from
//     counters shared by the names of a server (or of a cluster hash
//     slot), so locking any number of names leaves no key per name.
//   - With replica sync (on by default where the master has replicas; see
//     [WithReplicaSync]) no lock or permit is passed or granted before the
//     replicas acknowledged it with WAIT; one too few acknowledged is
//     released and fails with [ErrReplicaSync]. The synchronizers' other
//     writes (releases, counts) return only once acknowledged too, or
//     report with [ErrReplicaSync] and [ErrUnconfirmed] that they were
//     applied on the master alone. This narrows the failover window below, it does not close it:
//     WAIT is not consensus.
//   - No call waits on an answer that will not change. On a cluster a call
//     redirected (MOVED, ASK, TRYAGAIN) is sent again until it runs, its
//     ctx ends or the Client closes; one answered CLUSTERDOWN is sent again
//     for 5 seconds at most, which covers a replica's takeover of a failed
//     master, and then fails with the server's CLUSTERDOWN, whatever its
//     ctx. Every other answer (a refused password, a busy server) is
//     returned at once.
//
// # What is not guaranteed
//
//   - Redis replication is asynchronous: a master that fails after granting
//     a lock and before a replica saw it can be replaced by a replica that
//     grants it again, and the fencing counter can lose increments too.
//     Replica sync makes this rarer; see docs/design.md for its limits.
//   - A process paused longer than its lease (GC, SIGSTOP, a VM migration)
//     learns of the loss only when it runs again; use fencing tokens where
//     a late write would do harm.
//   - An evicting maxmemory-policy can delete lock keys; relock logs a
//     warning when it sees one.
//   - RedLock adds availability across independent masters, not
//     correctness under arbitrary pauses or clock jumps; see docs/redlock.md.
//
// Keys follow Redisson's layout (see docs/design.md), so Go services using
// relock and Java services using Redisson exclude each other on the same
// lock names.
package relock
