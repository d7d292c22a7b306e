package systest

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/internal/testkit"
)

// pausedHolderEnv names the lock a paused-holder child process takes.
const pausedHolderEnv = "RELOCK_FAULT_PAUSED_HOLDER"

// pausedHolderProcess is the child process of TestFaultHolderPaused
// (role "paused-holder"). It takes the lock, says
// "held <token>", and checks Err every millisecond. The parent stops it
// (SIGSTOP) for longer than the lease; the child recognises its first
// check after it runs again by the gap since the previous one, and says
// what Err returned there:
//
//	resumed gap=<d> lost=<bool> err=<err> done_before=<bool> done_after=<bool>
//
// done_before tells whether Done was closed before that Err call (by the
// watchdog's timer, if it ran first), done_after whether it was after. If
// the stop fell inside a check, the child cannot tell which side of the
// pause Err judged, and says "ambiguous". If the hold is lost before the
// pause (the machine so busy that no renewal was confirmed in time), it
// says "lost before the pause".
func pausedHolderProcess() int {
	name := os.Getenv(pausedHolderEnv)
	timeout, _ := time.ParseDuration(os.Getenv("RELOCK_TEST_WATCHDOG"))
	c, err := relock.New(redis.NewClient(&redis.Options{Addr: os.Getenv("RELOCK_TEST_ADDR")}), relock.WithWatchdogTimeout(timeout))
	if err != nil {
		fmt.Println("error", err)
		os.Exit(1)
	}
	l, err := c.Mutex(name).Lock(context.Background())
	if err != nil {
		fmt.Println("error", err)
		os.Exit(1)
	}
	// The clock is read before saying "held": the parent may stop the
	// process right after, and the gap must include that stop.
	held := time.Now()
	prev := held
	fmt.Println("held", l.Token())
	closed := func() bool {
		select {
		case <-l.Done():
			return true
		default:
			return false
		}
	}
	for {
		time.Sleep(time.Millisecond)
		before := time.Now()
		doneBefore := closed()
		err := l.Err()
		after := time.Now()
		switch {
		case after.Sub(before) > timeout:
			fmt.Println("ambiguous")
			os.Exit(0)
		case before.Sub(prev) > timeout:
			fmt.Printf("resumed gap=%v lost=%v err=%v done_before=%v done_after=%v\n",
				before.Sub(prev), errors.Is(err, relock.ErrLockLost), err, doneBefore, closed())
			os.Exit(0)
		case err != nil:
			fmt.Printf("lost before the pause, %v after taking the lock: %v\n", time.Since(held), err)
			os.Exit(0)
		}
		prev = after
	}
}

// TestFaultHolderPaused: a holder process stopped (SIGSTOP) past its
// lease while another client takes the lock. The moment it runs again,
// its first Err call reports ErrLockLost, judged against the hold's local
// deadline whether or not the watchdog's timer has run yet, and Done is
// closed by then.
func TestFaultHolderPaused(t *testing.T) {
	t.Parallel()
	const lease = time.Second
	srv := redistest.Standalone(t)
	n := testkit.Rounds(1, 10)
	for r := 0; r < n; r++ {
		report, ok := pausedHolder(t, srv, lease)
		for attempt := 0; !ok && attempt < 3; attempt++ {
			t.Logf("inconclusive (%s); again", report)
			report, ok = pausedHolder(t, srv, lease)
		}
		if !ok {
			t.Fatalf("inconclusive four times in a row: %s", report)
		}
		f := fields(report)
		if f["lost"] != "true" {
			t.Fatalf("round %d: first Err after the pause: %s, want ErrLockLost (child said %q)", r, f["err"], report)
		}
		if f["done_after"] != "true" {
			t.Fatalf("round %d: Done not closed when Err reported the loss (child said %q)", r, report)
		}
		t.Logf("round %d: %s", r, report)
	}
	testkit.Safety(t, "holder-process-paused", "runs", n, "double_grants", 0, "loss_before_next", n, "loss_after_next", 0, "first_err_after_resume", "ErrLockLost")
}

// pausedHolder runs one child holding a lock on srv: it returns the
// child's report, and false if the run is inconclusive: the child could
// not tell which side of the pause its check fell on, or lost the hold
// before the pause.
func pausedHolder(t *testing.T, srv *redistest.Server, lease time.Duration) (string, bool) {
	t.Helper()
	name := testkit.LockName(t)
	cmd := childCommand("paused-holder", pausedHolderEnv+"="+name, "RELOCK_TEST_ADDR="+srv.Addr,
		"RELOCK_TEST_WATCHDOG="+lease.String())
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		_ = cmd.Process.Signal(syscall.SIGCONT)
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	}()
	lines := bufio.NewReader(out)
	line, err := lines.ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "held ") {
		t.Fatalf("holder process said %q, %v", line, err)
	}
	token, _ := strconv.ParseUint(strings.TrimSpace(strings.TrimPrefix(line, "held ")), 10, 64)

	if err := cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	stopped := time.Now()
	c := testkit.Deployment{Addr: srv.Addr}.Open(t)
	ctx := testkit.CtxTimeout(t, 10*time.Second)
	l, err := c.Mutex(name).Lock(ctx) // granted once the stopped holder's key expires
	if err != nil {
		t.Fatal(err)
	}
	if l.Token() <= token {
		t.Fatalf("token %d after the stopped holder's %d", l.Token(), token)
	}
	// Keep it stopped for more than the child's gap threshold (one lease).
	time.Sleep(time.Until(stopped.Add(2 * lease)))
	if err := cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	report, err := lines.ReadString('\n')
	if err != nil {
		t.Fatalf("holder process after the pause: %q, %v", report, err)
	}
	report = strings.TrimSpace(report)
	if err := l.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if report == "ambiguous" || strings.HasPrefix(report, "lost before the pause") {
		return report, false
	}
	if !strings.HasPrefix(report, "resumed ") {
		t.Fatalf("holder process said %q", report)
	}
	return report, true
}

// fields parses "word k=v k=v ..." (values without spaces, except err,
// which runs up to the next " done_").
func fields(s string) map[string]string {
	m := make(map[string]string)
	if i := strings.Index(s, " err="); i >= 0 {
		rest := s[i+len(" err="):]
		j := strings.Index(rest, " done_")
		if j < 0 {
			j = len(rest)
		}
		m["err"] = rest[:j]
		s = s[:i] + rest[j:]
	}
	for _, f := range strings.Fields(s) {
		if k, v, ok := strings.Cut(f, "="); ok {
			m[k] = v
		}
	}
	return m
}
