package cli

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/redistest"
)

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "relock-cli-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "FAIL:", err)
		os.Exit(1)
	}
	binDir = dir
	code := m.Run()
	os.RemoveAll(dir)
	if code == 0 {
		if err := redistest.Leaks(); err != nil {
			fmt.Fprintln(os.Stderr, "FAIL: leaked goroutines:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// binDir holds the relock binary the process tests build.
var binDir string

var built struct {
	once sync.Once
	path string
	err  error
}

// relockBinary builds the relock command once for the package's tests and
// returns its path.
func relockBinary(t *testing.T) string {
	t.Helper()
	built.once.Do(func() {
		path := filepath.Join(binDir, "relock")
		out, err := exec.Command("go", "build", "-o", path, "github.com/relock-go/relock/cmd/relock").CombinedOutput()
		if err != nil {
			built.err = fmt.Errorf("go build: %v\n%s", err, out)
		}
		built.path = path
	})
	if built.err != nil {
		t.Fatal(built.err)
	}
	return built.path
}

// realServer starts a server for one test and returns it with its
// URL.
func realServer(t *testing.T) (*redistest.Server, string) {
	t.Helper()
	srv := redistest.Standalone(t)
	return srv, "redis://" + srv.Addr
}

// realClient returns a relock Client on srv, closed with the test.
func realClient(t *testing.T, srv *redistest.Server) *relock.Client {
	t.Helper()
	return clientOn(t, srv.Addr)
}

// result is one in-process run of the relock command.
type result struct {
	code           int
	stdout, stderr string
}

// lastLine returns the last non-empty line of the output.
func (r result) lastLine() string {
	lines := strings.Split(strings.TrimRight(r.stdout, "\n"), "\n")
	return lines[len(lines)-1]
}

// relockCmd runs the relock command in-process.
func relockCmd(t *testing.T, args ...string) result {
	t.Helper()
	var out, errb bytes.Buffer
	code := Main(args, &out, &errb)
	r := result{code: code, stdout: out.String(), stderr: errb.String()}
	t.Logf("relock %s: exit %d\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), code, r.stdout, r.stderr)
	return r
}

// server starts a miniredis for one test and returns its URL.
func server(t *testing.T) (*miniredis.Miniredis, string) {
	t.Helper()
	mr := miniredis.RunT(t)
	return mr, "redis://" + mr.Addr()
}

// lockClient returns a relock Client on the server, closed with the test.
func lockClient(t *testing.T, mr *miniredis.Miniredis) *relock.Client {
	t.Helper()
	return clientOn(t, mr.Addr())
}

// clientOn returns a relock Client on the server at addr, closed with the
// test.
func clientOn(t *testing.T, addr string) *relock.Client {
	t.Helper()
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	c, err := relock.New(rdb)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		c.Close()
		rdb.Close()
	})
	return c
}

// lock takes name on the server for the rest of the test.
func lock(t *testing.T, c *relock.Client, name string) *relock.Lease {
	t.Helper()
	l, err := c.Mutex(name).Lock(context.Background())
	if err != nil {
		t.Fatalf("lock %s: %v", name, err)
	}
	t.Cleanup(func() { l.Unlock(context.Background()) })
	return l
}

func TestHelp(t *testing.T) {
	tests := []struct {
		name string
		args []string
		code int
		want string
	}{
		{"help", []string{"help"}, exitOK, "Commands:"},
		{"help of a command", []string{"help", "run"}, exitOK, "Usage: relock run"},
		{"no arguments", nil, exitUsage, ""},
		{"unknown command", []string{"frobnicate"}, exitUsage, ""},
		{"help of an unknown command", []string{"help", "frobnicate"}, exitUsage, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := relockCmd(t, tt.args...)
			if r.code != tt.code {
				t.Fatalf("exit %d, want %d", r.code, tt.code)
			}
			if !strings.Contains(r.stdout, tt.want) {
				t.Errorf("stdout lacks %q", tt.want)
			}
		})
	}
}
