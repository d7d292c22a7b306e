package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/relock-go/relock"
)

// The demo's scenes: after the contention run, what a lock needs and a
// bare SET NX lock does not give, each shown and checked on the same
// Redis: the watchdog keeping a long hold alive, the holder told it lost
// the lock before anyone else can have it, fencing tokens refusing the
// stale holder's write, and a leader election surviving its leader's
// death.

// sceneLease is the watchdog timeout of the scenes' clients: short, so
// that the scenes take seconds.
const sceneLease = 500 * time.Millisecond

// fencedStore is a resource that remembers the highest fencing token it
// has seen and refuses writes that carry a lower one.
type fencedStore struct {
	mu   sync.Mutex
	last uint64
}

func (s *fencedStore) write(token uint64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if token < s.last {
		return false
	}
	s.last = token
	return true
}

// scenes runs the scenes, printing a line each, and returns a failure for
// each property that did not hold. mr, when not nil, is the embedded
// Redis, whose clock only moves when told to: the scenes move it with
// real time, so that keys expire.
func (d *demo) scenes(ctx context.Context, t *target, mr *miniredis.Miniredis) []string {
	out := d.e.stdout
	// Each scene takes a few leases; a Redis whose keys never expire (a
	// miniredis whose clock nobody moves) would keep the last one waiting.
	ctx, cancel := context.WithTimeout(ctx, 20*sceneLease)
	defer cancel()
	if mr != nil {
		defer moveClock(mr)()
	}
	open := sceneClients(ctx, t)
	fmt.Fprintf(out, "\nwhat else relock does (watchdog lease %v):\n", sceneLease)
	var failed []string
	if msg, err := d.watchdogScene(ctx, open); err != nil {
		failed = append(failed, "watchdog: "+err.Error())
	} else {
		fmt.Fprintln(out, "  "+msg)
	}
	msgs, err := d.lossScene(ctx, open)
	for _, m := range msgs {
		fmt.Fprintln(out, "  "+m)
	}
	if err != nil {
		failed = append(failed, err.Error())
	}
	if msg, err := d.electionScene(ctx, open); err != nil {
		failed = append(failed, "election: "+err.Error())
	} else {
		fmt.Fprintln(out, "  "+msg)
	}
	return failed
}

// clockStep is the longest step of the embedded Redis's clock: below the
// drift margin of the demo's shortest lease (500ms/100 + 2ms).
const clockStep = 2 * time.Millisecond

// moveClock moves mr's clock with real time, so that its keys expire,
// until the function it returns is called; that function returns once the
// clock has stopped. The clock moves in steps of at most clockStep: a key
// set just before a step loses the whole step from its TTL, so a longer
// step, after this goroutine was kept waiting, would expire keys earlier
// than Redis does, by more than a hold's drift margin. Kept waiting, the
// clock falls behind instead, and keys expire late.
func moveClock(mr *miniredis.Miniredis) (stop func()) {
	stopc := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(clockStep)
		defer tick.Stop()
		last := time.Now()
		for {
			select {
			case now := <-tick.C:
				mr.FastForward(min(now.Sub(last), clockStep))
				last = now
			case <-stopc:
				return
			}
		}
	}()
	return func() { close(stopc); <-done }
}

// sceneClients returns how the scenes open a Redis connection to t with a
// relock Client over it: the scene's short watchdog lease, and a logger
// that keeps quiet, since the losses here are on purpose.
func sceneClients(ctx context.Context, t *target) func() (redis.UniversalClient, *relock.Client, error) {
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	return func() (redis.UniversalClient, *relock.Client, error) {
		rdb, err := t.connect(ctx)
		if err != nil {
			return nil, nil, err
		}
		c, err := relock.New(rdb, relock.WithWatchdogTimeout(sceneLease), relock.WithLogger(quiet),
			relock.WithClientName("relock demo"))
		if err != nil {
			rdb.Close()
			return nil, nil, err
		}
		return rdb, c, nil
	}
}

// electionScene elects a leader whose process then dies without resigning
// (its Client closes, and nothing renews its lock): the campaigner waiting
// behind it is elected once the lock expires, with a greater term, and
// Leader names it.
func (d *demo) electionScene(ctx context.Context, open func() (redis.UniversalClient, *relock.Client, error)) (string, error) {
	name := d.cfg.prefix + ":leader"
	rdbA, a, err := open()
	if err != nil {
		return "", err
	}
	defer rdbA.Close()
	defer a.Close()
	rdbB, b, err := open()
	if err != nil {
		return "", err
	}
	defer rdbB.Close()
	defer b.Close()
	first, err := a.Election(name).Campaign(ctx, "node-a")
	if err != nil {
		return "", err
	}
	type won struct {
		l   *relock.Leadership
		at  time.Time
		err error
	}
	second := make(chan won, 1)
	go func() {
		l, err := b.Election(name).Campaign(ctx, "node-b")
		second <- won{l, time.Now(), err}
	}()
	died := time.Now()
	_ = a.Close() // node-a dies: nothing renews its leadership any more
	w := <-second
	if w.err != nil {
		return "", w.err
	}
	defer w.l.Resign(context.WithoutCancel(ctx))
	leader, err := b.Election(name).Leader(ctx)
	switch {
	case err != nil:
		return "", err
	case w.l.Term() <= first.Term():
		return "", fmt.Errorf("term %d after %d", w.l.Term(), first.Term())
	case leader.Value != "node-b" || leader.Term != w.l.Term():
		return "", fmt.Errorf("the leader read back is %q in term %d, want node-b in term %d", leader.Value, leader.Term, w.l.Term())
	}
	return fmt.Sprintf("election: leader node-a (term %d) died without resigning; node-b was elected %v later with term %d, and Leader names it",
		first.Term(), w.at.Sub(died).Round(time.Millisecond), w.l.Term()), nil
}

// watchdogScene holds a lock four leases long: the watchdog renews it in
// the background, and the hold is never lost.
func (d *demo) watchdogScene(ctx context.Context, open func() (redis.UniversalClient, *relock.Client, error)) (string, error) {
	rdb, c, err := open()
	if err != nil {
		return "", err
	}
	defer rdb.Close()
	defer c.Close()
	l, err := c.Mutex(d.cfg.prefix + ":watchdog").Lock(ctx)
	if err != nil {
		return "", err
	}
	defer l.Unlock(context.WithoutCancel(ctx))
	hold := 4 * sceneLease
	select {
	case <-l.Done():
		return "", fmt.Errorf("the hold was lost after less than %v: %v", hold, l.Err())
	case <-time.After(hold):
	case <-ctx.Done():
		return "", ctx.Err()
	}
	if err := l.Err(); err != nil {
		return "", fmt.Errorf("the hold ended: %v", err)
	}
	ttl, err := c.Mutex(l.Name()).TTL(ctx)
	if err != nil || ttl <= 0 {
		return "", fmt.Errorf("the lock has TTL %v (%v) after %v", ttl, err, hold)
	}
	return fmt.Sprintf("watchdog: a %v hold under a %v lease stayed held, renewed in the background (TTL now %v)",
		hold, sceneLease, ttl.Round(time.Millisecond)), nil
}

// lossScene cuts a holder off from Redis: it is told it lost the lock
// before another client gets it, and when it writes anyway, its stale
// fencing token is refused.
func (d *demo) lossScene(ctx context.Context, open func() (redis.UniversalClient, *relock.Client, error)) ([]string, error) {
	name := d.cfg.prefix + ":fenced"
	hrdb, holder, err := open()
	if err != nil {
		return nil, err
	}
	defer holder.Close()
	ordb, other, err := open()
	if err != nil {
		hrdb.Close()
		return nil, err
	}
	defer ordb.Close()
	defer other.Close()

	var store fencedStore
	held, err := holder.Mutex(name).Lock(ctx)
	if err != nil {
		hrdb.Close()
		return nil, err
	}
	if !store.write(held.Token()) {
		hrdb.Close()
		return nil, errors.New("fencing: the store refused the first holder's write")
	}
	start := time.Now()
	hrdb.Close() // the holder can no longer reach Redis: its renewals fail

	told, g, err := takeOver(ctx, held, other.Mutex(name), start)
	if err != nil {
		return nil, err
	}
	defer g.l.Unlock(context.WithoutCancel(ctx))
	return judgeLoss(held, g, told, &store)
}

// takeover is the lock the other client of the loss scene got: its lease,
// or why it got none, and when, counted from the holder's cut, with what
// the stale holder's Err said at that moment.
type takeover struct {
	l     *relock.Lease
	err   error
	at    time.Duration
	stale error
}

// takeOver locks m for another client while held, cut off from Redis at
// start, waits to be told it lost the lock. It returns when the holder
// was told, and the other client's lock once it has it.
func takeOver(ctx context.Context, held *relock.Lease, m *relock.Mutex, start time.Time) (time.Duration, takeover, error) {
	gotc := make(chan takeover, 1)
	go func() {
		l, err := m.Lock(ctx)
		gotc <- takeover{l, err, time.Since(start), held.Err()}
	}()
	var told time.Duration
	select {
	case <-held.Done():
		told = time.Since(start)
	case <-ctx.Done():
		return 0, takeover{}, ctx.Err()
	}
	g := <-gotc
	if g.err != nil {
		return 0, takeover{}, g.err
	}
	return told, g, nil
}

// judgeLoss checks what the loss scene showed: the stale holder's Err
// reported the loss when the other client got the lock (Err judges the
// hold's local deadline itself; Done, closed at told, is the same news
// pushed by a timer), and store takes the new holder's token and refuses
// the stale holder's. It returns a line for each property shown, and an
// error for the first that did not hold.
func judgeLoss(held *relock.Lease, g takeover, told time.Duration, store *fencedStore) ([]string, error) {
	msgs := []string{fmt.Sprintf("lost-lock signal: a holder cut off from Redis was told at %v; another client got the lock at %v, when the holder's Err reported the loss",
		told.Round(time.Millisecond), g.at.Round(time.Millisecond))}
	if !errors.Is(g.stale, relock.ErrLockLost) {
		return msgs, fmt.Errorf("lost-lock signal: when the other client got the lock at %v, the holder's Err was %v", g.at, g.stale)
	}
	if !store.write(g.l.Token()) {
		return msgs, fmt.Errorf("fencing: the store refused the new holder's token %d", g.l.Token())
	}
	if store.write(held.Token()) {
		return msgs, fmt.Errorf("fencing: the store took the stale holder's token %d after %d", held.Token(), g.l.Token())
	}
	msgs = append(msgs, fmt.Sprintf("fencing: the store took token %d from the new holder and refused the stale holder's token %d",
		g.l.Token(), held.Token()))
	return msgs, nil
}
