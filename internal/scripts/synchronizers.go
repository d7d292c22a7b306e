package scripts

import "time"

// The synchronizers' scripts: Semaphore (Redisson's RSemaphore layout),
// PermitSemaphore (RPermitExpirableSemaphore) and CountDownLatch
// (RCountDownLatch). Each file's header names its KEYS, ARGV and return
// values. The permit semaphore's scripts have the functions of clock.lua
// and permit_lib.lua put between their header and their body.
var (
	SemAcquire       = loadWith("sem_acquire", "request")
	SemUndo          = load("sem_undo")
	SemRelease       = loadWith("sem_release", "request")
	SemTrySetPermits = loadWith("sem_trysetpermits", "request", "tryset")
	SemDrain         = loadWith("sem_drain", "request")

	PermitAcquire     = loadPermit("permit_acquire")
	PermitRelease     = loadPermit("permit_release")
	PermitAvailable   = loadPermit("permit_available")
	PermitUpdateLease = loadPermit("permit_updatelease")
	PermitRenew       = loadPermit("permit_renew")

	LatchTrySetCount = loadWith("latch_trysetcount", "request", "tryset")
	LatchCountDown   = loadWith("latch_countdown", "request")
)

// SynchronizerScripts lists the synchronizers' scripts, for tests.
var SynchronizerScripts = []*Script{
	SemAcquire, SemUndo, SemRelease, SemTrySetPermits, SemDrain,
	PermitAcquire, PermitRelease, PermitAvailable, PermitUpdateLease, PermitRenew,
	LatchTrySetCount, LatchCountDown,
}

func loadPermit(name string) *Script { return loadWith(name, "clock", "queue", "permit_lib") }

// PermitKeys are the keys of a permit semaphore's scripts: made once per
// semaphore handle, boxed once.
type PermitKeys struct {
	Free  string // the free permits
	Held  string // the held permits, by expiry
	Guard string // the semaphore's channel, as a guard
	Queue string // the queue of waiting calls (permit_lib.lua)

	args []any
}

// NewPermitKeys returns the keys of a permit semaphore's scripts.
func NewPermitKeys(free, held, guard, queue string) *PermitKeys {
	return &PermitKeys{Free: free, Held: held, Guard: guard, Queue: queue, args: boxKeys(free, held, guard, queue)}
}

// counts are the KEYS of the scripts that take no guard and do not look
// at the queue; guarded, with the guard; all, with the queue too.
func (k *PermitKeys) counts() []any  { return k.args[:2:2] }
func (k *PermitKeys) guarded() []any { return k.args[:3:3] }

// PermitAcquireRequest is a call of permit_acquire.lua: take a permit, or
// keep the call's place in the queue of waiting calls. Fields of type any
// are boxed once, as LockRequest's.
type PermitAcquireRequest struct {
	Keys  *PermitKeys
	ID    any // the permit id (raw bytes); a retried request carries the same
	Lease any // the lease in ms
	// Member is the call's queue member, "" for a call that does not
	// queue; Queued says an earlier attempt may have queued the call.
	Member   string
	Queued   bool
	Publish  any // "publish" or "spublish"
	QueueTTL any // ms the queue outlives the earliest expiry, at least

	args [6]any
}

// Build returns the request's KEYS and ARGV, the queue among the KEYS
// only for a call that queues or may be queued. The ARGV are the
// request's own.
func (r *PermitAcquireRequest) Build() (keys, args []any) {
	keys = r.Keys.args
	if r.Member == "" && !r.Queued {
		keys = r.Keys.guarded()
	}
	return keys, append(r.args[:0], r.ID, r.Lease, r.Publish, argOrEmpty(r.Member), r.QueueTTL, argFlag(r.Queued))
}

// PermitAcquireReply is permit_acquire.lua's answer.
type PermitAcquireReply struct {
	Acquired bool
	// ExpiresIn is, when no permit is free, how long until the earliest
	// held permit expires; negative when none does.
	ExpiresIn time.Duration
}

// PermitAcquireReplyOf decodes permit_acquire.lua's reply: 0 acquired, r >
// 0 the earliest expiry in r ms, -1 none.
func PermitAcquireReplyOf(r int64) PermitAcquireReply {
	switch {
	case r == 0:
		return PermitAcquireReply{Acquired: true}
	case r > 0:
		return PermitAcquireReply{ExpiresIn: time.Duration(r) * time.Millisecond}
	}
	return PermitAcquireReply{ExpiresIn: -1}
}

// PermitReleaseRequest is a call of permit_release.lua: release a permit,
// or take a call out of the queue, releasing the permit it was granted
// meanwhile. Fields of type any are boxed once, as LockRequest's.
type PermitReleaseRequest struct {
	Keys     *PermitKeys
	ID       any // the permit id (raw bytes)
	Publish  any // "publish" or "spublish"
	Numsub   any // "numsub" or "shardnumsub"
	ClientID any // the releasing Client's "<uuid>"
	Grants   any // the releasing Client's grant channel
	GrantTTL any // the longest a granted permit is held before its call renews it, ms
	// Grant gives the permit to the first queued call.
	Grant bool
	// Leaving is the member of a call leaving the queue, "" for none.
	Leaving string
}

// Build returns the request's KEYS and ARGV, the queue among the KEYS
// only where the call looks at it: to grant the permit, or to take a call
// out.
func (r PermitReleaseRequest) Build() (keys, args []any) {
	keys = r.Keys.args
	if !r.Grant && r.Leaving == "" {
		keys = r.Keys.guarded()
	}
	return keys, []any{r.ID, r.Publish, r.Numsub, r.ClientID, r.Grants, r.GrantTTL, argFlag(r.Grant), argOrEmpty(r.Leaving)}
}

// PermitReleased is what permit_release.lua did.
type PermitReleased uint8

// What a permit release did.
const (
	// PermitUnknown: no permit of that id is held (released, reclaimed,
	// or never acquired).
	PermitUnknown PermitReleased = iota
	// PermitFreed: released.
	PermitFreed
	// PermitExpired: the permit had expired, and is reclaimed now.
	PermitExpired
)

// PermitReleasedBy decodes permit_release.lua's reply.
func PermitReleasedBy(r int64) PermitReleased {
	switch r {
	case 1:
		return PermitFreed
	case 2:
		return PermitExpired
	}
	return PermitUnknown
}

// PermitAvailableRequest is a call of permit_available.lua: the number of
// free permits, after reclaiming expired ones.
type PermitAvailableRequest struct {
	Keys    *PermitKeys
	Publish any // "publish" or "spublish"
	Channel any // told the number free when expired permits come back
}

// Build returns the request's KEYS and ARGV.
func (r PermitAvailableRequest) Build() (keys, args []any) {
	return r.Keys.counts(), []any{r.Publish, r.Channel}
}

// PermitUpdateLeaseRequest is a call of permit_updatelease.lua: set a
// held permit's lease. Its reply is 1 when the permit was held (see
// Updated).
type PermitUpdateLeaseRequest struct {
	Keys    *PermitKeys
	ID      any // the permit id (raw bytes)
	Lease   time.Duration
	Publish any // "publish" or "spublish"
	Channel any // told the number free when the lease cut short is now the first to end
}

// Build returns the request's KEYS and ARGV.
func (r PermitUpdateLeaseRequest) Build() (keys, args []any) {
	return r.Keys.counts(), []any{r.ID, r.Lease.Milliseconds(), r.Publish, r.Channel}
}

// Updated reads the reply of permit_updatelease.lua: whether the permit
// was held.
func Updated(r int64) bool { return r == 1 }

// The Semaphore's and the CountDownLatch's calls apply once per request
// marker (request.lua): their KEYS are the count, a permit semaphore's
// held permits where its call checks them, the call's marker and the
// markers of answered requests to delete (Marked), which the Client's
// request bookkeeping hands out.

// MaxForget is the most markers of answered requests one call deletes.
const MaxForget = 8

// Marked are the KEYS of a call that applies once per request marker.
type Marked struct {
	Count string // the count: a semaphore's permits, a latch's count
	// Held is a permit semaphore's held permits, boxed once, for a call
	// that checks them too; nil for the others.
	Held   any
	Marker string // the call's request marker

	forget [MaxForget]string
	n      int
}

// Forget has the call delete the markers of answered requests ms, as many
// as it takes (MaxForget at most), and returns how many: those last in ms.
func (k *Marked) Forget(ms []string) int {
	k.n = copy(k.forget[:], ms[max(len(ms)-MaxForget, 0):])
	return k.n
}

// keys returns the call's KEYS.
func (k *Marked) keys() []any {
	keys := make([]any, 0, 3+k.n)
	keys = append(keys, k.Count)
	if k.Held != nil {
		keys = append(keys, k.Held)
	}
	keys = append(keys, k.Marker)
	for _, m := range k.forget[:k.n] {
		keys = append(keys, m)
	}
	return keys
}

// SemAcquireRequest is a call of sem_acquire.lua: take N permits. Its
// reply is 1 when they were taken (see Taken).
type SemAcquireRequest struct {
	Keys      Marked
	N         int
	MarkerTTL any // the request marker's lifetime in ms
}

// Build returns the request's KEYS and ARGV.
func (r SemAcquireRequest) Build() (keys, args []any) {
	return r.Keys.keys(), []any{r.N, r.MarkerTTL}
}

// Taken reads sem_acquire.lua's reply: whether the permits were taken.
func Taken(r int64) bool { return r == 1 }

// SemUndoRequest is a call of sem_undo.lua: undo an acquisition whose
// reply was lost.
type SemUndoRequest struct {
	Permits   string // the permits' key
	Marker    string // the acquisition's request marker
	N         int
	Publish   any // "publish" or "spublish"
	MarkerTTL any
	Channel   any // told the new number available
}

// Build returns the request's KEYS and ARGV.
func (r SemUndoRequest) Build() (keys, args []any) {
	return boxKeys(r.Permits, r.Marker), []any{r.N, r.Publish, r.MarkerTTL, r.Channel}
}

// SemReleaseRequest is a call of sem_release.lua: give N permits (take
// them away for a negative N), handing Hand of them to the releasing
// Client's own waiting calls when no one else listens. A permit
// semaphore's call (Keys.Held) hands none.
type SemReleaseRequest struct {
	Keys      Marked
	N         int
	Publish   any // "publish" or "spublish"
	MarkerTTL any
	Channel   any // told the new number available
	// Hand is k, 0 < k <= N, the permits handed to the releasing Client's
	// calls; 0 for none. Numsub, "numsub" or "shardnumsub", goes with it.
	Hand   int
	Numsub any
}

// Build returns the request's KEYS and ARGV.
func (r SemReleaseRequest) Build() (keys, args []any) {
	switch {
	case r.Keys.Held != nil:
		args = []any{r.N, r.Publish, r.MarkerTTL, r.Channel, argEmpty, argEmpty, argOne}
	case r.Hand > 0:
		args = []any{r.N, r.Publish, r.MarkerTTL, r.Channel, r.Hand, r.Numsub}
	default:
		args = []any{r.N, r.Publish, r.MarkerTTL, r.Channel}
	}
	return r.Keys.keys(), args
}

// SemReleaseReply is sem_release.lua's answer.
type SemReleaseReply struct {
	Available int64 // the permits available after the call
	Handed    bool  // the Hand permits were handed, left out of Available
}

// SemReleaseReplyOf decodes sem_release.lua's reply to a request that
// handed (2 available + 1 when handed) or did not.
func SemReleaseReplyOf(r int64, hand bool) SemReleaseReply {
	if !hand {
		return SemReleaseReply{Available: r}
	}
	return SemReleaseReply{Available: r >> 1, Handed: r&1 == 1}
}

// TrySetRequest is a call of sem_trysetpermits.lua or
// latch_trysetcount.lua (tryset.lua): set the count to N if it is not
// set; a permit semaphore's call (Keys.Held) checks its held permits too.
// Its reply is 1 when it set the count (see Set).
type TrySetRequest struct {
	Keys      Marked
	N         int
	Publish   any // "publish" or "spublish"
	MarkerTTL any
	Channel   any // told the count set
}

// Build returns the request's KEYS and ARGV.
func (r TrySetRequest) Build() (keys, args []any) {
	if r.Keys.Held != nil {
		return r.Keys.keys(), []any{r.N, r.Publish, r.MarkerTTL, r.Channel, argOne}
	}
	return r.Keys.keys(), []any{r.N, r.Publish, r.MarkerTTL, r.Channel}
}

// Set reads tryset.lua's reply: whether the count was set.
func Set(r int64) bool { return r == 1 }

// SemDrainRequest is a call of sem_drain.lua: take every available
// permit. Its reply is the number taken.
type SemDrainRequest struct {
	Keys      Marked
	MarkerTTL any
}

// Build returns the request's KEYS and ARGV.
func (r SemDrainRequest) Build() (keys, args []any) { return r.Keys.keys(), []any{r.MarkerTTL} }

// LatchCountDownRequest is a call of latch_countdown.lua: count a latch
// down by one.
type LatchCountDownRequest struct {
	Keys      Marked
	Publish   any // "publish" or "spublish"
	MarkerTTL any
	Channel   any // told "0" when the count reaches zero
}

// Build returns the request's KEYS and ARGV.
func (r LatchCountDownRequest) Build() (keys, args []any) {
	return r.Keys.keys(), []any{r.Publish, r.MarkerTTL, r.Channel}
}

// LatchCountDownReply is latch_countdown.lua's answer.
type LatchCountDownReply struct {
	NotSet bool  // the latch was not set: nothing changed
	Left   int64 // the count left (0: this call opened the latch)
}

// LatchCountDownReplyOf decodes latch_countdown.lua's reply: the count
// left, or -1 when the latch was not set.
func LatchCountDownReplyOf(r int64) LatchCountDownReply {
	if r < 0 {
		return LatchCountDownReply{NotSet: true}
	}
	return LatchCountDownReply{Left: r}
}
