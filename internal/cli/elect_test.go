package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/layout"
)

func TestElectRunsWhileLeader(t *testing.T) {
	needCommand(t, "sh")
	mr, url := server(t)
	r := relockCmd(t, "elect", "--redis", url, "--value", "10.0.0.1:80", "jobs", "--", "sh", "-c", `echo "$RELOCK_ELECTION $RELOCK_TERM $RELOCK_VALUE"`)
	if r.code != exitOK || strings.TrimSpace(r.stdout) != "jobs 1 10.0.0.1:80" {
		t.Fatalf("exit %d, stdout %q; want 0 and %q", r.code, r.stdout, "jobs 1 10.0.0.1:80")
	}
	if mr.Exists(layout.Companion(layout.Election, "jobs")) {
		t.Errorf("still leader after the command ended")
	}
}

func TestElectNotElected(t *testing.T) {
	mr, url := server(t)
	l, err := lockClient(t, mr).Election("jobs").Campaign(context.Background(), "other")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Resign(context.Background())
	r := relockCmd(t, "elect", "--redis", url, "--wait", "100ms", "jobs", "--", "true")
	if r.code != exitNotAcquired {
		t.Fatalf("exit %d, want %d", r.code, exitNotAcquired)
	}
}

func TestElectUsage(t *testing.T) {
	for _, args := range [][]string{
		{"elect", "jobs"},
		{"elect", "--wait", "0", "jobs", "--", "true"},
		{"elect", "--json", "jobs", "--", "true"},
		{"elect", "--observe"},
		{"elect", "--observe", "jobs", "extra"},
		{"elect", "--value", strings.Repeat("v", relock.MaxValueLen+1), "jobs", "--", "true"},
	} {
		if r := relockCmd(t, args...); r.code != exitUsage {
			t.Errorf("relock %v: exit %d, want %d", args, r.code, exitUsage)
		}
	}
}

// TestElectAgainAndObserve: on a real server, relock elect --again runs
// its command once per term, leadership lost by the command's own
// deletion of the lock ends that term with exit 4 and a new campaign, and
// relock elect --observe --json prints every term in increasing order.
func TestElectAgainAndObserve(t *testing.T) {
	needCommand(t, "sh")
	srv, url := realServer(t)
	ctx := context.Background()
	first, err := realClient(t, srv).Election("jobs").Campaign(ctx, "first")
	if err != nil {
		t.Fatal(err)
	}
	obs := startRelock(t, "elect", "--redis", url, "--observe", "--json", "jobs")
	var l relock.Leader
	if err := json.Unmarshal([]byte(obs.line(t)), &l); err != nil || l.Value != "first" || l.Term != first.Term() {
		t.Fatalf("observer starts with %+v, %v; want the first leader", l, err)
	}
	if err := first.Resign(ctx); err != nil {
		t.Fatal(err)
	}
	// The command prints its term and ends after a short while; relock
	// resigns and campaigns again.
	leader := startRelock(t, "elect", "--redis", url, "--again", "--value", "v", "jobs", "--", "sh", "-c", `echo "$RELOCK_TERM"; sleep 0.2`)
	var terms []uint64
	for len(terms) < 3 {
		var term uint64
		if _, err := fmt.Sscan(leader.line(t), &term); err != nil {
			t.Fatal(err)
		}
		if len(terms) > 0 && term <= terms[len(terms)-1] {
			t.Fatalf("term %d after %v", term, terms)
		}
		terms = append(terms, term)
	}
	leader.signal(t, syscall.SIGTERM)
	if code := leader.exitCode(t); code != 128+int(syscall.SIGTERM) {
		t.Fatalf("relock elect --again exit %d after SIGTERM; want %d", code, 128+int(syscall.SIGTERM))
	}
	// The observer saw each term begin (value v) and end, in order.
	var seen []string
	deadline := time.Now().Add(processDeadline)
	for want := 2 * len(terms); len(seen) < want && time.Now().Before(deadline); {
		var l relock.Leader
		if err := json.Unmarshal([]byte(obs.line(t)), &l); err != nil {
			t.Fatal(err)
		}
		if l.Term < terms[0] {
			continue // the first leader's end
		}
		s := fmt.Sprintf("%d:-", l.Term)
		if l.Holder != "" {
			s = fmt.Sprintf("%d:%s", l.Term, l.Value)
		}
		seen = append(seen, s)
	}
	for i, term := range terms {
		if got, want := seen[2*i:2*i+2], []string{fmt.Sprintf("%d:v", term), fmt.Sprintf("%d:-", term)}; got[0] != want[0] || got[1] != want[1] {
			t.Fatalf("observed %v; want every term begun and ended in order: %v", seen, terms)
		}
	}
	obs.signal(t, syscall.SIGINT)
	if code := obs.exitCode(t); code != 130 {
		t.Fatalf("observer exit %d after SIGINT; want 130", code)
	}
}

// TestElectStopsCommandOnLoss: a leadership whose lock is deleted is lost
// at the watchdog's next renewal; relock elect stops the command and exits
// with code 4.
func TestElectStopsCommandOnLoss(t *testing.T) {
	needCommand(t, "sh")
	srv, url := realServer(t)
	p := startRelock(t, append([]string{"elect", "--redis", url, "--watchdog", "600ms", "--grace", "2s", "jobs", "--"}, holdingCommand...)...)
	pid := p.childPID(t)
	rdb := srv.Client()
	defer rdb.Close()
	if err := rdb.Del(context.Background(), layout.Companion(layout.Election, "jobs")).Err(); err != nil {
		t.Fatal(err)
	}
	if code := p.exitCode(t); code != exitLost {
		t.Fatalf("exit %d, want %d", code, exitLost)
	}
	processGone(t, pid)
	if !strings.Contains(p.stderr.String(), "leadership of \"jobs\"") {
		t.Errorf("stderr does not name the lost leadership")
	}
}

// TestElectionListed: an election held by a test program shows in ls
// (text, --json, --kind election) and show (by its name) with its leader's
// value, term and holder's pid; unlock --force takes its name too.
func TestElectionListed(t *testing.T) {
	srv, url := realServer(t)
	ctx := context.Background()
	l, err := realClient(t, srv).Election("jobs").Campaign(ctx, "10.0.0.1:80")
	if err != nil {
		t.Fatal(err)
	}
	r := relockCmd(t, "ls", "--redis", url, "--json", "--kind", "election")
	var listed struct {
		Locks []lockRow `json:"locks"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &listed); err != nil || len(listed.Locks) != 1 {
		t.Fatalf("ls --json --kind election: %v, %d rows; want one", err, len(listed.Locks))
	}
	row := listed.Locks[0]
	if row.Name != "jobs" || row.Kind != kindElection || row.Leader == nil ||
		row.Leader.Value != "10.0.0.1:80" || row.Leader.Term != l.Term() || len(row.Holders) != 1 ||
		row.Holders[0].Client == nil || row.Holders[0].Client.PID != strconv.Itoa(os.Getpid()) {
		t.Fatalf("ls row %+v (leader %+v); want the election with its leader and this process as holder", row, row.Leader)
	}
	if r := relockCmd(t, "ls", "--redis", url); !strings.Contains(r.stdout, `leader "10.0.0.1:80", term `+strconv.FormatUint(l.Term(), 10)) {
		t.Errorf("ls does not show the leader: %q", r.stdout)
	}
	r = relockCmd(t, "show", "--redis", url, "--json", "jobs")
	var s shown
	if err := json.Unmarshal([]byte(r.stdout), &s); err != nil || s.Kind != kindElection || s.State != "held" || s.Leader == nil || s.Leader.Value != "10.0.0.1:80" {
		t.Fatalf("show --json jobs: %+v, %v; want the held election with its leader", s, err)
	}
	if r := relockCmd(t, "unlock", "--force", "--redis", url, "jobs"); r.code != exitOK || !strings.Contains(r.stdout, "force-unlocked (election)") {
		t.Fatalf("unlock --force jobs: exit %d, %q", r.code, r.stdout)
	}
	rdb := srv.Client()
	defer rdb.Close()
	if n, err := rdb.Exists(ctx, layout.Companion(layout.Election, "jobs")).Result(); err != nil || n != 0 {
		t.Fatalf("the election's lock is still there after unlock --force: %d, %v", n, err)
	}
}

// TestElectCommandNotFound: a command that cannot be started is refused
// with 127 before campaigning, leaving no election behind.
func TestElectCommandNotFound(t *testing.T) {
	mr, url := server(t)
	if r := relockCmd(t, "elect", "--redis", url, "jobs", "--", "relock-no-such-command"); r.code != 127 {
		t.Fatalf("exit %d, want 127", r.code)
	}
	if keys := mr.Keys(); len(keys) != 0 {
		t.Fatalf("keys left: %v", keys)
	}
}
