package cli

import (
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"

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
	for _, want := range []string{"state    held", "holder   " + me + "  " + owner + " (holds 1)", "token    1", "redisson_lock__channel:{orders:42}"} {
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
	if _, ok := parseLock("relock_fair_alive:{orders:42}", fields); ok {
		t.Fatal("the liveness hash was read as a lock")
	}
}

func TestCompanion(t *testing.T) {
	tests := []struct{ name, want string }{
		{"orders:42", "redisson_lock_token:{orders:42}"},
		{"{orders}:42", "redisson_lock_token:{orders}:42"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := companion(layout.Token, tt.name); got != tt.want {
				t.Errorf("companion(%q) = %q, want %q", tt.name, got, tt.want)
			}
		})
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
