package systest

import (
	"testing"

	"github.com/relock-go/relock"
)

// lockerOf returns the lock of a name through a Client, as one worker of
// a workload takes it.
type lockerOf func(c *relock.Client, name string) acquirer

// lockKind is a kind of lock the fault scenarios run over: how its
// workers lock a name exclusively, and, for a read-write lock, shared; or
// how they take one permit of a semaphore.
type lockKind struct {
	name string   // "mutex", "fair", "rw", "permits" or "semaphore": subtest names, and scenario names but the Mutex's
	lock lockerOf // the exclusive side, or a permit
	read lockerOf // the shared side; nil when the kind has none
	// permits is, for a semaphore, its number of permits, set on each
	// name before the first worker takes one; 0 for a lock.
	permits int
}

// kindPermits is the number of permits of the semaphores under test: few,
// so that a permit granted again shows as more holds than permits.
const kindPermits = 2

var (
	mutexKind = lockKind{
		name: "mutex",
		lock: func(c *relock.Client, name string) acquirer { return locking{c.Mutex(name)} },
	}
	fairKind = lockKind{
		name: "fair",
		lock: func(c *relock.Client, name string) acquirer { return locking{c.FairMutex(name)} },
	}
	rwKind = lockKind{
		name: "rw",
		lock: func(c *relock.Client, name string) acquirer { return locking{c.RWMutex(name).WLocker()} },
		read: func(c *relock.Client, name string) acquirer { return reading{locking{c.RWMutex(name).RLocker()}} },
	}
	permitKind = lockKind{
		name:    "permits",
		lock:    func(c *relock.Client, name string) acquirer { return permitting{c.PermitSemaphore(name), kindPermits} },
		permits: kindPermits,
	}
	semaphoreKind = lockKind{
		name:    "semaphore",
		lock:    func(c *relock.Client, name string) acquirer { return semaphoring{c.Semaphore(name), kindPermits} },
		permits: kindPermits,
	}
)

// lockKinds returns the kinds of lock a scenario runs over: the Mutex
// first, then the FairMutex and the RWMutex (writers, readers mixed in).
// The semaphores (permitKind, semaphoreKind) are added by the scenarios
// that run them.
func lockKinds() []lockKind { return []lockKind{mutexKind, fairKind, rwKind} }

// holders returns how many holders it takes to hold a name of the kind
// fully: one for a lock, all its permits for a semaphore.
func (k lockKind) holders() int { return max(1, k.permits) }

// scenario returns the name of scenario for the kind: scenario itself for
// the Mutex, so that its lines in the safety report keep their names,
// scenario-<kind> for the others.
func (k lockKind) scenario(scenario string) string {
	if k.name == mutexKind.name {
		return scenario
	}
	return scenario + "-" + k.name
}

// tag returns s prefixed with the kind, for worker and lock names.
func (k lockKind) tag(s string) string {
	if k.name == mutexKind.name {
		return s
	}
	return k.name + "." + s
}

// fields adds to a report's key-value pairs what the kind has beyond the
// common ones: the number of shared holds, for a kind that has them; the
// number of permits of a semaphore, and how many holds were in progress
// during its over-grants (which double_grants counts).
func (k lockKind) fields(o outcome, kv ...any) []any {
	if k.read != nil {
		kv = append(kv, "reads", o.Reads)
	}
	if k.permits > 0 {
		kv = append(kv, "permits", k.permits, "crowded_holds", o.Crowded)
	}
	return kv
}

// requireExercised fails the test if what sets a kind apart was not
// exercised: a kind with a shared side took no shared hold, or a
// semaphore never had all its permits held at once.
func (k lockKind) requireExercised(t testing.TB, o outcome, what string) {
	t.Helper()
	if k.read != nil && o.Reads == 0 {
		t.Errorf("%s: no read hold was taken", what)
	}
	if k.permits > 0 && o.Peak < k.permits {
		t.Errorf("%s: at most %d of %d permits were held at once", what, o.Peak, k.permits)
	}
}
