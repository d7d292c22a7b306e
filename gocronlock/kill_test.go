package gocronlock_test

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/go-co-op/gocron/v2"
	"github.com/redis/go-redis/v9"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/gocronlock"
)

// The kill tests run one scheduler in a child process, the test binary
// started again with these variables set, and kill it with SIGKILL.
const (
	childEnv     = "GOCRONLOCK_TEST_CHILD" // "locker" or "elector"
	childAddrEnv = "GOCRONLOCK_TEST_ADDR"  // the Redis server
	childNameEnv = "GOCRONLOCK_TEST_NAME"  // the key prefix or election name
	// childWatchdog is the child Client's watchdog timeout: its locks
	// expire within it once it is killed.
	childWatchdog = time.Second
)

// runChild runs the child's scheduler until it is killed or its stdin is
// closed. It writes "run <tick>" on stdout at every run. As a Locker's
// scheduler, its first run never ends: it is killed holding the lock.
func runChild(mode string) int {
	rdb := redis.NewClient(&redis.Options{Addr: os.Getenv(childAddrEnv)})
	c, err := relock.New(rdb, relock.WithWatchdogTimeout(childWatchdog))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	name := os.Getenv(childNameEnv)
	var opt gocron.SchedulerOption
	block := make(chan struct{}) // never closed: a Locker's run lasts until the kill
	switch mode {
	case "locker":
		l, err := gocronlock.NewLocker(c, gocronlock.WithKeyPrefix(name+":"), gocronlock.WithSkew(testSkew))
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		opt = gocron.WithDistributedLocker(l)
	case "elector":
		e, err := gocronlock.NewElector(c.Election(name), "child")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		opt = gocron.WithDistributedElector(e)
		close(block)
	default:
		fmt.Fprintln(os.Stderr, "unknown mode", mode)
		return 1
	}
	s, err := gocron.NewScheduler(opt)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	var mu sync.Mutex // one line at a time
	job := func() {
		mu.Lock()
		fmt.Printf("run %d\n", tickOf(time.Now()))
		mu.Unlock()
		<-block
	}
	start := time.Now().Truncate(tickEvery).Add(tickEvery)
	if _, err := s.NewJob(gocron.DurationJob(tickEvery), gocron.NewTask(job),
		gocron.WithName("tick"), gocron.WithStartAt(gocron.WithStartDateTime(start))); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	s.Start()
	_, _ = io.Copy(io.Discard, os.Stdin) // until the test ends, should SIGKILL not come
	return 0
}

// child is a scheduler running in a child process.
type child struct {
	cmd   *exec.Cmd
	stdin io.Closer
	read  sync.WaitGroup // the goroutine reading its stdout
}

// startChild starts a child scheduler in mode on name, whose runs are
// recorded in tl as "child".
func startChild(t *testing.T, mode, name string, tl *tally) *child {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"="+mode, childAddrEnv+"="+redisAddr, childNameEnv+"="+name)
	cmd.Stderr = os.Stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	ch := &child{cmd: cmd, stdin: stdin}
	ch.read.Add(1)
	go func() {
		defer ch.read.Done()
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if tick, ok := strings.CutPrefix(sc.Text(), "run "); ok {
				n, err := strconv.ParseInt(tick, 10, 64)
				if err == nil {
					tl.add(run{who: "child", tick: n, at: time.Now()})
				}
			}
		}
	}()
	t.Cleanup(func() { ch.kill(t) })
	return ch
}

// kill kills the child with SIGKILL, once, and waits for it.
func (ch *child) kill(t *testing.T) {
	t.Helper()
	if ch.cmd.ProcessState != nil {
		return
	}
	if err := ch.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Error(err)
	}
	ch.read.Wait()
	_ = ch.stdin.Close()
	_ = ch.cmd.Wait()
}

// lastRun returns the last run in runs.
func lastRun(runs []run) run { return runs[len(runs)-1] }

// moved waits for the first run after kill elsewhere than the child, logs
// how long it took the jobs to move, and returns that run's tick.
func moved(t *testing.T, tl *tally, kill time.Time) int64 {
	t.Helper()
	runs := tl.waitFor(t, "a run on another scheduler", func(runs []run) bool {
		return len(runs) > 0 && lastRun(runs).who != "child"
	})
	r := lastRun(runs)
	t.Logf("jobs moved to %s %v after the kill (child's watchdog timeout %v, ticks every %v)",
		r.who, r.at.Sub(kill).Round(time.Millisecond), childWatchdog, tickEvery)
	return r.tick
}

// checkKill checks the runs of a kill test: no tick ran twice, the child
// ran none after its last before the kill, and every tick from the one the
// jobs moved with to last ran.
func checkKill(t *testing.T, runs []run, childLast, resumed, last int64) {
	t.Helper()
	checkOnce(t, runs, resumed, last)
	for _, r := range runs {
		if r.who == "child" && r.tick > childLast {
			t.Errorf("the child ran tick %d after it was killed at tick %d", r.tick, childLast)
		}
		if r.who != "child" && r.tick <= childLast {
			t.Errorf("%s ran tick %d, before the child was killed (at tick %d)", r.who, r.tick, childLast)
		}
	}
	ticks, n, dups := counts(runs)
	t.Logf("ticks %d, runs %d, duplicates %d", ticks, n, dups)
}

// TestLockerKilledHolder kills the scheduler whose run holds the job's
// lock: the other two skip the job until the lock expires, within the
// child's watchdog timeout, and then run it, each tick once.
func TestLockerKilledHolder(t *testing.T) {
	tl := newTally()
	ch := startChild(t, "locker", t.Name(), tl)
	held := tl.waitFor(t, "the child's run", func(runs []run) bool { return len(runs) > 0 })
	childLast := held[0].tick

	var schedulers []gocron.Scheduler
	for i, off := range offsets[:2] {
		l, err := gocronlock.NewLocker(newClient(t), gocronlock.WithKeyPrefix(t.Name()+":"), gocronlock.WithSkew(testSkew))
		if err != nil {
			t.Fatal(err)
		}
		schedulers = append(schedulers, startScheduler(t, fmt.Sprint("s", i), off, gocron.WithDistributedLocker(l), tl))
	}
	// Both skip the job while the child's run holds its lock.
	tl.wait(t, "a skip on each scheduler", func(_, skips []run) bool {
		return slices.ContainsFunc(skips, func(r run) bool { return r.who == "s0" }) &&
			slices.ContainsFunc(skips, func(r run) bool { return r.who == "s1" })
	})
	kill := time.Now()
	ch.kill(t)
	resumed := moved(t, tl, kill)
	last := resumed + 3
	tl.waitFor(t, fmt.Sprintf("tick %d", last+1), ranTick(last+1))
	shutdown(t, schedulers...)
	checkKill(t, tl.all(), childLast, resumed, last)
}

// TestElectorKilledLeader kills the scheduler that leads: the leadership,
// and with it the jobs, moves to one of the two others once the dead
// leader's lock expires, within the child's watchdog timeout, and no tick
// runs twice.
func TestElectorKilledLeader(t *testing.T) {
	tl := newTally()
	name := electionName(t)
	ch := startChild(t, "elector", name, tl)
	tl.waitFor(t, "the child's first run", func(runs []run) bool { return len(runs) > 0 })

	var schedulers []gocron.Scheduler
	var electors []*gocronlock.Elector
	for i, off := range offsets[:2] {
		who := fmt.Sprint("s", i)
		e, err := gocronlock.NewElector(newClient(t).Election(name), who)
		if err != nil {
			t.Fatal(err)
		}
		electors = append(electors, e)
		schedulers = append(schedulers, startScheduler(t, who, off, gocron.WithDistributedElector(e), tl))
	}
	runs := tl.waitFor(t, "two more runs of the child", func(runs []run) bool { return len(runs) >= 3 })
	kill := time.Now()
	ch.kill(t)
	var childLast int64
	for _, r := range tl.all() {
		if r.who == "child" {
			childLast = max(childLast, r.tick)
		}
	}
	if lastRun(runs).who != "child" {
		t.Fatalf("runs before the kill: %v, want all on the child", runs)
	}
	resumed := moved(t, tl, kill)
	last := resumed + 3
	tl.waitFor(t, fmt.Sprintf("tick %d", last+1), ranTick(last+1))
	shutdown(t, schedulers...)
	for _, e := range electors {
		if err := e.Close(); err != nil {
			t.Error(err)
		}
	}
	checkKill(t, tl.all(), childLast, resumed, last)
}
