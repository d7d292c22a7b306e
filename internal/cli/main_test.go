package cli

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/relock-go/relock"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
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
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
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
