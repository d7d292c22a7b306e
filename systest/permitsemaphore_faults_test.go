package systest

import (
	"bufio"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/layout"
	"github.com/relock-go/relock/internal/testkit"
)

const permitHelperEnv = "RELOCK_TEST_PERMIT_HOLDER"

// permitHolderProcess is a permit-holder child process (role
// "permit-holder"): it takes a permit of the semaphore named by the
// environment with a watchdog, says "held <id>", and waits to be killed.
func permitHolderProcess() int {
	name := os.Getenv(permitHelperEnv)
	timeout, _ := time.ParseDuration(os.Getenv("RELOCK_TEST_WATCHDOG"))
	c, err := relock.New(redis.NewClient(&redis.Options{Addr: os.Getenv("RELOCK_TEST_ADDR")}), relock.WithWatchdogTimeout(timeout))
	if err != nil {
		fmt.Println("error", err)
		os.Exit(1)
	}
	p, err := c.PermitSemaphore(name).Acquire(context.Background())
	if err != nil {
		fmt.Println("error", err)
		os.Exit(1)
	}
	fmt.Println("held", p.ID())
	select {}
}

// TestPermitHolderKilled: a holder process killed with SIGKILL leaves its
// permit to expire within the watchdog timeout, and a waiter gets it.
func TestPermitHolderKilled(t *testing.T) {
	const timeout = 500 * time.Millisecond
	c := testkit.Topologies()[0].NewClient(t)
	ps := testkit.NewPermits(t, c, 1)
	cmd := childCommand("permit-holder", permitHelperEnv+"="+ps.Name(), "RELOCK_TEST_ADDR="+testkit.Standalone.Addr,
		"RELOCK_TEST_WATCHDOG="+timeout.String())
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "held ") {
		t.Fatalf("holder process said %q, %v", line, err)
	}
	dead := strings.TrimSpace(strings.TrimPrefix(line, "held "))
	ctx := testkit.CtxTimeout(t, 10*time.Second)
	if _, err := ps.TryAcquire(ctx); !errors.Is(err, relock.ErrNotAcquired) {
		t.Fatalf("TryAcquire while the child holds: %v", err)
	}
	got := make(chan *relock.Permit, 1)
	go func() {
		p, err := ps.Acquire(ctx)
		if err != nil {
			t.Error(err)
		}
		got <- p
	}()
	testkit.Eventually(t, 5*time.Second, "the waiter to sleep", func() bool { return c.Stats().Asleep == 1 })
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	p := <-got
	if p == nil {
		t.FailNow()
	}
	raw, _ := hex.DecodeString(dead)
	if _, err := testkit.Standalone.Client().ZScore(ctx, layout.PermitTimeouts(ps.Name()), string(raw)).Result(); !errors.Is(err, redis.Nil) {
		t.Fatalf("the dead holder's permit is still held: %v", err)
	}
	if err := p.Release(ctx); err != nil {
		t.Fatal(err)
	}
}
