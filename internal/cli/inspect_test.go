package cli

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/layout"
)

func TestLsAndShow(t *testing.T) {
	mr, url := server(t)
	c := lockClient(t, mr)
	l := lock(t, c, "orders:42")
	lock(t, c, "jobs:nightly")
	mr.HSet("not-a-lock", "field", "value")
	mr.HSet("counts", "3d80591e-b910-4177-9960-909de4858747:1", "many")
	mr.Set("plain", "x")

	r := relockCmd(t, "ls", "--redis", url)
	if r.code != exitOK {
		t.Fatalf("ls: exit %d", r.code)
	}
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	if len(lines) != 3 || !strings.HasPrefix(lines[1], "jobs:nightly ") || !strings.HasPrefix(lines[2], "orders:42 ") {
		t.Fatalf("ls listed %q, want a header and the two locks in order", lines)
	}
	// Holders show as their Clients: host, pid and program.
	host, _ := os.Hostname()
	me := host + " pid " + strconv.Itoa(os.Getpid()) + " " + filepath.Base(os.Args[0])
	if !strings.HasSuffix(lines[2], me) {
		t.Errorf("ls line %q does not end with the holder's Client %q", lines[2], me)
	}
	r = relockCmd(t, "ls", "--redis", url, "--ids")
	fields := strings.Fields(strings.Split(strings.TrimSpace(r.stdout), "\n")[2])
	owner := fields[len(fields)-1]
	if r.code != exitOK || !isOwner(owner) {
		t.Fatalf("ls --ids: exit %d, last column %q is not an owner id", r.code, owner)
	}

	r = relockCmd(t, "ls", "--redis", url, "--match", "orders:*")
	if r.code != exitOK || strings.Contains(r.stdout, "jobs:nightly") || !strings.Contains(r.stdout, "orders:42") {
		t.Fatalf("ls --match: exit %d, stdout %q", r.code, r.stdout)
	}

	r = relockCmd(t, "show", "--redis", url, "orders:42")
	if r.code != exitOK {
		t.Fatalf("show: exit %d", r.code)
	}
	// The holder's columns are padded to the widest of their rows.
	holderLine := regexp.MustCompile(`(?m)^holder   ` + regexp.QuoteMeta(me) + ` {2,}` + regexp.QuoteMeta(owner) + ` \(holds 1\)$`)
	if !holderLine.MatchString(r.stdout) {
		t.Errorf("show lacks the holder's line: %s, %s (holds 1)", me, owner)
	}
	for _, want := range []string{"state    held", "token    1", layout.Companion(layout.LockChannel, "orders:42")} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("show lacks %q", want)
		}
	}
	if l.Token() != 1 {
		t.Errorf("token %d, want 1", l.Token())
	}

	r = relockCmd(t, "show", "--redis", url, "free")
	if r.code != exitOK || !strings.Contains(r.stdout, "state    free") {
		t.Fatalf("show free: exit %d, stdout %q", r.code, r.stdout)
	}
	r = relockCmd(t, "show", "--redis", url, "plain")
	if r.code != exitFailure || !strings.Contains(r.stdout, "not a lock") {
		t.Fatalf("show plain: exit %d, stdout %q", r.code, r.stdout)
	}
}

func TestParseLock(t *testing.T) {
	const a = "3d80591e-b910-4177-9960-909de4858747"
	tests := []struct {
		name   string
		fields map[string]string
		ok     bool
		kind   string
		holds  int64
	}{
		{"mutex", map[string]string{a + ":1": "2"}, true, "lock", 2},
		{"read-write lock, readers", map[string]string{"mode": "read", a + ":1": "1", a + ":2": "3"}, true, "read", 4},
		{"read-write lock, writer", map[string]string{"mode": "write", a + ":1:write": "1"}, true, "write", 1},
		{"other hash", map[string]string{"name": "x"}, false, "", 0},
		{"count not a number", map[string]string{a + ":1": "x"}, false, "", 0},
		{"zero count", map[string]string{a + ":1": "0"}, false, "", 0},
		{"owner without number", map[string]string{a + ":": "1"}, false, "", 0},
		{"short uuid", map[string]string{"3d80591e:1": "1"}, false, "", 0},
		{"bad mode", map[string]string{"mode": "other", a + ":1": "1"}, false, "", 0},
		{"mode alone", map[string]string{"mode": "read"}, false, "", 0},
		{"empty", nil, false, "", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			li, ok := parseLock("k", tt.fields)
			if ok != tt.ok {
				t.Fatalf("parseLock ok = %v, want %v", ok, tt.ok)
			}
			if ok && (li.kind != tt.kind || li.holds() != tt.holds) {
				t.Errorf("kind %q, holds %d; want %q, %d", li.kind, li.holds(), tt.kind, tt.holds)
			}
		})
	}
}

// TestParseLockFairLiveness: a fair lock's liveness hash maps owner ids
// to deadlines, and is not a lock.
func TestParseLockFairLiveness(t *testing.T) {
	fields := map[string]string{"3d80591e-b910-4177-9960-909de4858747:1": "1795000000000"}
	if _, ok := parseLock(layout.Companion(layout.FairAlive, "orders:42"), fields); ok {
		t.Fatal("the liveness hash was read as a lock")
	}
}

// TestVersion: relock version prints the library's version and the
// toolchain it was built with, and takes no arguments.
func TestVersion(t *testing.T) {
	r := relockCmd(t, "version")
	want := "relock " + relock.Version() + " " + runtime.Version() + " "
	if r.code != exitOK || !strings.HasPrefix(r.stdout, want) {
		t.Fatalf("version: exit %d, stdout %q, want it to begin %q", r.code, r.stdout, want)
	}
	if r := relockCmd(t, "version", "extra"); r.code != exitUsage {
		t.Fatalf("version extra: exit %d, want %d", r.code, exitUsage)
	}
}

// TestLsAndShowJSON: ls --json and show --json print the documented
// schema: every lock with its kind, TTL, holders (owner id, count, and the
// holder's Client: host, pid, program) and waiters; a free name and a key
// that is not a lock say so.
func TestLsAndShowJSON(t *testing.T) {
	mr, url := server(t)
	c := lockClient(t, mr)
	lock(t, c, "orders:42")
	mr.Set("plain", "x")
	host, _ := os.Hostname()

	r := relockCmd(t, "ls", "--redis", url, "--json")
	var l listing
	if err := json.Unmarshal([]byte(r.stdout), &l); r.code != exitOK || err != nil {
		t.Fatalf("ls --json: exit %d, %v: %q", r.code, err, r.stdout)
	}
	if len(l.Locks) != 1 || l.Locks[0].Name != "orders:42" || l.Locks[0].Kind != kindLock || l.Locks[0].TTLms <= 0 {
		t.Fatalf("ls --json locks = %+v", l.Locks)
	}
	h := l.Locks[0].Holders
	if len(h) != 1 || !isOwner(h[0].Owner) || h[0].Count != 1 || h[0].Client == nil ||
		h[0].Client.Host != host || h[0].Client.PID != strconv.Itoa(os.Getpid()) {
		t.Fatalf("ls --json holders = %+v", h)
	}

	r = relockCmd(t, "show", "--redis", url, "--json", "orders:42")
	var s shown
	if err := json.Unmarshal([]byte(r.stdout), &s); r.code != exitOK || err != nil {
		t.Fatalf("show --json: exit %d, %v: %q", r.code, err, r.stdout)
	}
	if s.State != "held" || s.Kind != kindLock || s.TTLms == nil || *s.TTLms <= 0 || s.Token != "1" ||
		len(s.Holders) != 1 || s.Holders[0].Client == nil || s.Holders[0].Client.Host != host {
		t.Fatalf("show --json = %+v", s)
	}

	for name, want := range map[string]struct {
		state string
		code  int
	}{"free": {"free", exitOK}, "plain": {"not-a-lock", exitFailure}} {
		r = relockCmd(t, "show", "--redis", url, "--json", name)
		s = shown{}
		if err := json.Unmarshal([]byte(r.stdout), &s); r.code != want.code || err != nil || s.State != want.state {
			t.Fatalf("show --json %s: exit %d, %v, state %q; want exit %d, state %q", name, r.code, err, s.State, want.code, want.state)
		}
	}
}

// TestShowLockWaiters: show lists a lock's waiting relock calls in the
// order they came, each with its Client (host and pid) and how long it has
// waited.
func TestShowLockWaiters(t *testing.T) {
	srv, url := realServer(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	holder := realClient(t, srv)
	lock(t, holder, "job")
	waiter := realClient(t, srv)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = waiter.Mutex("job").Lock(ctx) // until cancelled
	}()
	rdb := srv.Client()
	defer rdb.Close()
	deadline := time.Now().Add(10 * time.Second)
	for n, _ := rdb.ZCard(ctx, layout.Companion(layout.LockQueue, "job")).Result(); n != 1; n, _ = rdb.ZCard(ctx, layout.Companion(layout.LockQueue, "job")).Result() {
		if time.Now().After(deadline) {
			t.Fatal("the waiting call did not queue within 10s")
		}
		time.Sleep(5 * time.Millisecond)
	}
	r := relockCmd(t, "show", "--redis", url, "--json", "job")
	var s shown
	if err := json.Unmarshal([]byte(r.stdout), &s); err != nil {
		t.Fatal(err)
	}
	if since, err := time.Parse(time.RFC3339Nano, s.Since); err != nil || time.Since(since) < 0 || time.Since(since) > time.Minute {
		t.Errorf("since %q (%v): want when the lock was granted, a moment ago", s.Since, err)
	}
	if len(s.Queue) != 1 || s.Queue[0].Client == nil || s.Queue[0].Client.PID != strconv.Itoa(os.Getpid()) {
		t.Fatalf("queue %+v; want the one waiting call with this process as its client", s.Queue)
	}
	if r := relockCmd(t, "show", "--redis", url, "job"); !strings.Contains(r.stdout, "queued 1") || !strings.Contains(r.stdout, "waiting for") || !strings.Contains(r.stdout, "held for") {
		t.Fatalf("show does not list the waiter: %q", r.stdout)
	}
	cancel()
	<-done
}
