package systest

import (
	"bufio"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/redis/go-redis/v9"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/history"
	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/internal/testkit"
)

// campaignerEnv names the election a campaigner child process runs for.
const campaignerEnv = "RELOCK_TEST_CAMPAIGNER"

// monoNow reads CLOCK_MONOTONIC, which every process of the machine
// shares: the campaigners' reports from several processes are compared on
// it.
func monoNow() time.Duration {
	var ts syscall.Timespec
	if _, _, e := syscall.Syscall(syscall.SYS_CLOCK_GETTIME, 1, uintptr(unsafe.Pointer(&ts)), 0); e != 0 {
		panic(e)
	}
	return time.Duration(ts.Nano())
}

// campaign is one campaigner's loop, until ctx ends: campaign, lead for a
// random while, and resign. report is told "begin" with the term and the
// time of the first check that found the leadership held, "act" with the
// time of each later such check (times are read before the check), and
// "end" or "lost" with the time of the last one. A term that the first
// check already finds lost (the process stood still between the election
// and the check, past its lease) is told as "void": it never acted. A
// leader acts only where it reports so: the history checker compares
// these intervals.
func campaign(ctx context.Context, e *relock.Election, who string, seed uint64, report func(kind string, term uint64, at time.Duration)) {
	rnd := rand.New(rand.NewPCG(seed, 1))
	for ctx.Err() == nil {
		l, err := e.Campaign(ctx, who)
		if err != nil {
			continue // ctx ended, or a refusal the next round retries
		}
		term, last := l.Term(), monoNow()
		if l.Err() != nil {
			report("void", term, last)
			continue
		}
		report("begin", term, last)
		lead := time.Duration(20+rnd.IntN(180)) * time.Millisecond
		deadline := time.Now().Add(lead)
		kept := true
		for time.Now().Before(deadline) && ctx.Err() == nil {
			t := monoNow()
			if l.Err() != nil {
				kept = false
				break
			}
			last = t
			report("act", term, t)
			time.Sleep(2 * time.Millisecond)
		}
		if !kept {
			report("lost", term, last)
			continue
		}
		report("end", term, last)
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		_ = l.Resign(rctx)
		cancel()
	}
}

// campaignerProcess is a campaigner child process (role "campaigner"): it
// campaigns until killed, printing its reports as "<kind> <term> <ns>".
func campaignerProcess() int {
	name := os.Getenv(campaignerEnv)
	timeout, _ := time.ParseDuration(os.Getenv("RELOCK_TEST_WATCHDOG"))
	c, err := relock.New(topologyClient(os.Getenv("RELOCK_TEST_TOPOLOGY")), relock.WithWatchdogTimeout(timeout))
	if err != nil {
		fmt.Println("error", err)
		return 1
	}
	out := bufio.NewWriter(os.Stdout)
	var mu sync.Mutex
	campaign(context.Background(), c.Election(name), fmt.Sprintf("pid %d", os.Getpid()), uint64(os.Getpid()), func(kind string, term uint64, at time.Duration) {
		mu.Lock()
		defer mu.Unlock()
		fmt.Fprintf(out, "%s %d %d\n", kind, term, at)
		_ = out.Flush()
	})
	return 0
}

// topologyClient returns a go-redis client for a topology described as
// "standalone <addr>", "cluster <addr>,<addr>..." or "sentinel <master>
// <addr>,<addr>...".
func topologyClient(desc string) redis.UniversalClient {
	f := strings.Fields(desc)
	switch f[0] {
	case "cluster":
		return redis.NewClusterClient(&redis.ClusterOptions{Addrs: strings.Split(f[1], ",")})
	case "sentinel":
		return redis.NewFailoverClient(&redis.FailoverOptions{MasterName: f[1], SentinelAddrs: strings.Split(f[2], ",")})
	}
	return redis.NewClient(&redis.Options{Addr: f[1]})
}

// term is what the hammer learned of one term.
type term struct {
	who        string
	begin, end time.Duration
	lost, over bool
	void       bool     // won and lost before its first check: it never acted
	others     []string // other campaigners that reported the term: a term given twice
}

// terms collects the campaigners' reports.
type terms struct {
	mu     sync.Mutex
	byTerm map[uint64]*term
}

func (ts *terms) report(who, kind string, n uint64, at time.Duration) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	t := ts.byTerm[n]
	if t == nil {
		t = &term{who: who, begin: at, end: at}
		ts.byTerm[n] = t
	}
	if t.who != who && !slices.Contains(t.others, who) {
		t.others = append(t.others, who)
	}
	t.end = max(t.end, at)
	switch kind {
	case "lost":
		t.lost, t.over = true, true
	case "end":
		t.over = true
	case "void":
		t.void, t.over = true, true
	}
}

// leader returns the open term with the greatest number and its
// campaigner, if any.
func (ts *terms) leader() (uint64, string) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	var top uint64
	who := ""
	for n, t := range ts.byTerm {
		if n > top {
			top, who = n, ""
			if !t.over {
				who = t.who
			}
		}
	}
	return top, who
}

// child is one campaigner process.
type child struct {
	cmd  *exec.Cmd
	who  string
	done chan struct{}
}

// TestElectionHammer: campaigners in three processes and two Clients of
// the test's own run for one election while processes are killed (-9) and
// stopped (SIGSTOP past the watchdog timeout). Never two leaders at once
// (the history checker, on the intervals each leader reported acting in),
// terms strictly growing, a killed leader replaced within the watchdog
// timeout (plus scheduling slack), and an observer sees every term, in
// increasing order. On standalone, cluster, and Sentinel with replica
// sync.
func TestElectionHammer(t *testing.T) {
	const watchdog = 600 * time.Millisecond
	tops := []struct {
		name string
		desc func(t *testing.T) string
	}{
		{"standalone", func(*testing.T) string { return "standalone " + testkit.Standalone.Addr }},
		{"cluster", func(*testing.T) string { return "cluster " + strings.Join(testkit.Cluster.Addrs(), ",") }},
		{"sentinel", func(t *testing.T) string {
			s := redistest.NewSentinel(t)
			return "sentinel " + s.MasterName + " " + strings.Join(s.SentinelAddrs(), ",")
		}},
	}
	for _, top := range tops {
		t.Run(top.name, func(t *testing.T) {
			t.Parallel()
			hammerElection(t, top.desc(t), watchdog, time.Duration(testkit.Rounds(6, 30))*time.Second)
		})
	}
}

func hammerElection(t *testing.T, desc string, watchdog, run time.Duration) {
	name := testkit.LockName(t)
	ctx := testkit.CtxTimeout(t, run+time.Minute)
	ts := &terms{byTerm: make(map[uint64]*term)}

	// The observer, on a Client of its own.
	oc := testkit.NewClient(t, testkit.CloseLater(t, topologyClient(desc)))
	octx, stopObserving := context.WithCancel(ctx)
	defer stopObserving()
	type seen struct {
		l  relock.Leader
		at time.Duration
	}
	var obsMu sync.Mutex
	var observed []seen
	observing := make(chan struct{})
	go func() {
		defer close(observing)
		for l := range oc.Election(name).Observe(octx) {
			obsMu.Lock()
			observed = append(observed, seen{l, monoNow()})
			obsMu.Unlock()
		}
	}()

	// Campaigners of this process.
	cctx, stopCampaigns := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for i := range 2 {
		c := testkit.NewClient(t, testkit.CloseLater(t, topologyClient(desc)), relock.WithWatchdogTimeout(watchdog))
		who := fmt.Sprintf("client %d", i)
		wg.Add(1)
		go func() {
			defer wg.Done()
			campaign(cctx, c.Election(name), who, uint64(i), func(kind string, n uint64, at time.Duration) { ts.report(who, kind, n, at) })
		}()
	}

	// Campaigner processes, replaced when killed.
	var mu sync.Mutex
	children := map[string]*child{}
	start := func() {
		cmd := childCommand("campaigner", campaignerEnv+"="+name, "RELOCK_TEST_TOPOLOGY="+desc, "RELOCK_TEST_WATCHDOG="+watchdog.String())
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		ch := &child{cmd: cmd, who: fmt.Sprintf("pid %d", cmd.Process.Pid), done: make(chan struct{})}
		mu.Lock()
		children[ch.who] = ch
		mu.Unlock()
		go func() {
			defer close(ch.done)
			sc := bufio.NewScanner(out)
			for sc.Scan() {
				var kind string
				var n uint64
				var at int64
				if _, err := fmt.Sscan(sc.Text(), &kind, &n, &at); err != nil {
					t.Errorf("%s said %q", ch.who, sc.Text())
					continue
				}
				ts.report(ch.who, kind, n, time.Duration(at))
			}
			_ = cmd.Wait()
		}()
	}
	for range 3 {
		start()
	}
	stopAll := func() {
		mu.Lock()
		defer mu.Unlock()
		for _, ch := range children {
			_ = ch.cmd.Process.Signal(syscall.SIGCONT)
			_ = ch.cmd.Process.Kill()
			<-ch.done
		}
	}
	defer stopAll()

	// Faults every 300ms, in turn: kill the leading process, stop it past
	// its lease, kill it, and stop it or rest.
	rnd := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 2))
	var failovers []time.Duration
	var kills, stops int
	type pending struct {
		after uint64
		at    time.Duration
	}
	var killed []pending
	step := 0
	end := time.Now().Add(run)
	for time.Now().Before(end) {
		time.Sleep(300 * time.Millisecond)
		top, who := ts.leader()
		mu.Lock()
		ch := children[who]
		var some *child
		for _, c := range children {
			some = c
			break
		}
		mu.Unlock()
		step++
		switch step % 4 {
		case 0, 2: // kill the leader once a process leads (else any process)
			for wait := time.Now().Add(time.Second); ch == nil && time.Now().Before(wait); {
				time.Sleep(5 * time.Millisecond)
				top, who = ts.leader()
				mu.Lock()
				ch = children[who]
				mu.Unlock()
			}
			if ch == nil {
				ch, top = some, 0
			}
			if ch == nil {
				continue
			}
			at := monoNow()
			_ = ch.cmd.Process.Kill()
			<-ch.done
			mu.Lock()
			delete(children, ch.who)
			mu.Unlock()
			if top != 0 {
				killed = append(killed, pending{top, at})
			}
			kills++
			start()
		case 1, 3: // stop the leading process (else any) past its lease
			if ch != nil {
				some = ch
			}
			if some == nil || step%4 == 3 && rnd.IntN(2) == 0 {
				continue
			}
			_ = some.cmd.Process.Signal(syscall.SIGSTOP)
			time.Sleep(2 * watchdog)
			_ = some.cmd.Process.Signal(syscall.SIGCONT)
			stops++
		}
	}
	stopCampaigns()
	wg.Wait()
	stopAll()

	// No two leaders at once; terms grow.
	ts.mu.Lock()
	numbers := make([]uint64, 0, len(ts.byTerm))
	for n := range ts.byTerm {
		numbers = append(numbers, n)
	}
	slices.Sort(numbers)
	rec := history.New()
	voids := 0
	for _, n := range numbers {
		tm := ts.byTerm[n]
		if tm.void {
			voids++ // observers see it; no campaigner acted in it
			continue
		}
		rec.Add(tm.who, name, n, tm.begin, tm.end, tm.lost)
	}
	begins := make(map[uint64]time.Duration)
	for n, tm := range ts.byTerm {
		begins[n] = tm.begin
	}
	ts.mu.Unlock()
	for _, v := range rec.Check() {
		t.Error(v)
	}
	for _, n := range numbers {
		if tm := ts.byTerm[n]; len(tm.others) > 0 {
			t.Errorf("term %d given to %s and %v", n, tm.who, tm.others)
		}
	}
	if len(numbers) < 10 || kills == 0 || stops == 0 || len(killed) == 0 {
		t.Fatalf("%d terms, %d kills, %d stops: the hammer did not exercise the election", len(numbers), kills, stops)
	}

	// A killed leader is replaced within the watchdog timeout.
	for _, k := range killed {
		for _, n := range numbers {
			if n > k.after {
				failovers = append(failovers, max(begins[n]-k.at, 0))
				break
			}
		}
	}
	slices.Sort(failovers)
	for _, d := range failovers {
		if d > watchdog+3*time.Second {
			t.Errorf("a killed leader was replaced after %v; the watchdog timeout is %v", d, watchdog)
		}
	}

	// The observer saw every term, in increasing order.
	last := numbers[len(numbers)-1]
	ended := func() bool {
		obsMu.Lock()
		defer obsMu.Unlock()
		n := len(observed)
		return n > 0 && observed[n-1].l.Term >= last && observed[n-1].l.Holder == ""
	}
	for wait := time.Now().Add(3*watchdog + 10*time.Second); !ended(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(wait) {
			obsMu.Lock()
			for _, s := range observed[max(0, len(observed)-5):] {
				t.Logf("observed at %v: %+v", s.at, s.l)
			}
			obsMu.Unlock()
			for _, n := range numbers[max(0, len(numbers)-5):] {
				t.Logf("term %d: %+v", n, *ts.byTerm[n])
			}
			t.Fatalf("the observer did not see the last term (%d) end", last)
		}
	}
	stopObserving()
	<-observing
	var lags []time.Duration
	var prev uint64
	got := map[uint64]bool{}
	for _, s := range observed {
		if s.l.Term < prev {
			t.Fatalf("observer saw term %d after %d", s.l.Term, prev)
		}
		if s.l.Holder != "" && !got[s.l.Term] {
			got[s.l.Term] = true
			lags = append(lags, max(s.at-begins[s.l.Term], 0))
		}
		prev = s.l.Term
	}
	for _, n := range numbers {
		if !got[n] {
			t.Errorf("observer missed term %d", n)
		}
	}
	slices.Sort(lags)
	leads := map[string]int{}
	for _, n := range numbers {
		leads[ts.byTerm[n].who]++
	}
	t.Logf("terms by campaigner: %v", leads)
	t.Logf("%d terms (%d void), %d kills (%d of the leader), %d stops; failover after a kill p50 %v max %v; observer lag p50 %v p99 %v",
		len(numbers), voids, kills, len(killed), stops, pct(failovers, 50), pct(failovers, 100), pct(lags, 50), pct(lags, 99))
}

// pct returns the p-th percentile of sorted ds, 0 for none.
func pct(ds []time.Duration, p int) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	return ds[min(len(ds)-1, len(ds)*p/100)]
}
