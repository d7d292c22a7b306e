package main

import (
	"context"
	"math/rand/v2"
	"time"
)

// readHeavy is 8 workers on one key whose cycles are reads 9 times in 10.
// A library with a read lock (an rlocker) takes it for reads and shares
// the key among readers; the others take their exclusive lock for reads
// too, which is what the comparison is about.
var readHeavy = workload{
	name:    "readheavy",
	title:   "read-heavy: 8 workers on one key, 90% reads (100µs hold, 500µs think)",
	workers: 8,
	shared:  true,
	hold:    100 * time.Microsecond,
	think:   500 * time.Microsecond,
	reads:   0.9,
	ref:     "relock-rw",
}

// mixSeed is the second half of every worker's generator seed.
const mixSeed = 0x5eed

// mix decides, cycle by cycle, whether a worker reads or writes.
type mix struct {
	rng   *rand.Rand // nil: every cycle writes
	reads float64
}

// newMix returns worker i's decisions for w, the same in every run.
func newMix(w workload, i int) mix {
	if w.reads == 0 {
		return mix{}
	}
	return mix{rng: rand.New(rand.NewPCG(uint64(i), mixSeed)), reads: w.reads}
}

// read reports whether the next cycle is a read.
func (m mix) read() bool { return m.rng != nil && m.rng.Float64() < m.reads }

// take makes a cycle's lock call: the read lock for a read if lk has one,
// the lock (or a permit) otherwise. It reports whether the hold is meant
// to exclude every other.
func take(ctx context.Context, w workload, lk locker, read bool) (unlock func(context.Context) error, exclusive bool, err error) {
	if w.permits > 0 {
		unlock, err = lk.Lock(ctx)
		return unlock, false, err
	}
	if rl, ok := lk.(rlocker); ok && read {
		unlock, err = rl.RLock(ctx)
		return unlock, false, err
	}
	unlock, err = lk.Lock(ctx)
	return unlock, true, err
}
