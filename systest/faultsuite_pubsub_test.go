package systest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/internal/testkit"
)

// TestFaultPubSubKilled: the server closes every pub/sub connection again
// and again (CLIENT KILL TYPE pubsub) while 16 goroutines contend for two
// locks, for each kind of lock in turn: the Mutex, whose waiters share
// the lock's channel; the FairMutex, whose waiters each listen on a
// channel of their own; the RWMutex, with a reader among every four
// workers; then for two semaphores of kindPermits permits each: a
// PermitSemaphore and a Semaphore, whose waiters share the semaphore's
// channel. The holders keep the default 30s watchdog lease, so a waiter
// that missed a release and were left to its timer would wait far past
// the bound (a PermitSemaphore's waiter too: it sleeps until the earliest
// held permit expires; a Semaphore's rechecks every 2s). Every Lock (or
// Acquire) returns within the bound, every acquisition completes, no two
// holds of a lock overlap (but readers', with each other) and no more
// holds of a semaphore are in progress than it has permits. The cluster
// variant runs in TestFaultCluster.
func TestFaultPubSubKilled(t *testing.T) {
	t.Parallel()
	srv := redistest.Standalone(t)
	for _, k := range append(lockKinds(), permitKind, semaphoreKind) {
		t.Run(k.name, func(t *testing.T) {
			o, kills := pubsubStorm(t, k, testkit.Deployment{Addr: srv.Addr}, srv.KillPubSubClients)
			o.report(t, k.scenario("pubsub-killed-standalone"), 1, k.fields(o, "sync", "n/a", "kills", kills)...)
		})
	}
}

// pubsubStorm runs the contention on locks of kind k while kill closes
// pub/sub connections every few milliseconds, checks the outcome and
// returns it with the number of connections killed.
func pubsubStorm(t *testing.T, k lockKind, d testkit.Deployment, kill func(context.Context) (int, error), opts ...relock.Option) (outcome, int) {
	t.Helper()
	const workers = 16
	per := testkit.Rounds(25, 500)
	clients := []*relock.Client{d.Open(t, opts...), d.Open(t, opts...)}
	w := newWorkloadOf(t, k, 10*time.Second)
	locks := names(t, "ps", 2)
	var dones []chan struct{}
	for i := range workers {
		done := make(chan struct{})
		dones = append(dones, done)
		repeat := w.repeat
		if k.read != nil && i%4 == 3 {
			repeat = w.repeatRead
		}
		repeat(fmt.Sprintf("c%d.w%d", i%2, i), clients[i%2], locks, holdFor(0, time.Millisecond), per, done)
	}
	all := make(chan struct{})
	go func() {
		for _, d := range dones {
			<-d
		}
		close(all)
	}()
	kills := 0
	ctx := testkit.CtxTimeout(t, 5*time.Minute)
	for stormy := true; stormy; {
		select {
		case <-all:
			stormy = false
		case <-time.After(time.Duration(2+rand.N(20)) * time.Millisecond):
			n, err := kill(ctx)
			if err != nil {
				t.Fatal(err)
			}
			kills += n
		case <-ctx.Done():
			t.Fatal("the contention did not complete")
		}
	}
	w.stop(10 * time.Second)
	o := w.outcome()
	o.requireSafe(t, "pub/sub killed")
	k.requireExercised(t, o, "pub/sub killed")
	if o.Holds != workers*per {
		t.Errorf("%d acquisitions, want %d", o.Holds, workers*per)
	}
	if kills == 0 {
		t.Error("no pub/sub connection was killed")
	}
	w.logNotes()
	return o, kills
}
