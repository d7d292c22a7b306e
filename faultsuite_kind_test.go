package relock_test

import (
	"testing"

	"github.com/relock-go/relock"
)

// lockerOf returns the lock of a name through a Client, as one worker of
// a workload locks it.
type lockerOf func(c *relock.Client, name string) relock.Locker

// lockKind is a kind of lock the fault scenarios run over: how its
// workers lock a name exclusively, and, for a read-write lock, shared.
type lockKind struct {
	name string   // "mutex", "fair" or "rw": subtest names, and scenario names but the Mutex's
	lock lockerOf // the exclusive side
	read lockerOf // the shared side; nil when the kind has none
}

var (
	mutexKind = lockKind{
		name: "mutex",
		lock: func(c *relock.Client, name string) relock.Locker { return c.Mutex(name) },
	}
	fairKind = lockKind{
		name: "fair",
		lock: func(c *relock.Client, name string) relock.Locker { return c.FairMutex(name) },
	}
	rwKind = lockKind{
		name: "rw",
		lock: func(c *relock.Client, name string) relock.Locker { return c.RWMutex(name).WLocker() },
		read: func(c *relock.Client, name string) relock.Locker { return c.RWMutex(name).RLocker() },
	}
)

// lockKinds returns the kinds of lock a scenario runs over: the Mutex
// first, then the FairMutex and the RWMutex (writers, readers mixed in).
func lockKinds() []lockKind { return []lockKind{mutexKind, fairKind, rwKind} }

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

// reads adds the number of shared holds to a report's key-value pairs,
// for a kind that has them.
func (k lockKind) reads(o outcome, kv ...any) []any {
	if k.read == nil {
		return kv
	}
	return append(kv, "reads", o.Reads)
}

// requireReads fails the test if a kind with a shared side took no shared
// hold: the readers were not exercised.
func (k lockKind) requireReads(t testing.TB, o outcome, what string) {
	t.Helper()
	if k.read != nil && o.Reads == 0 {
		t.Errorf("%s: no read hold was taken", what)
	}
}
