package cli

import (
	"bytes"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/relock-go/relock/internal/history"
)

var heldLine = regexp.MustCompile(`^mutual exclusion held: (\d+) acquisitions, 0 overlaps, handoff p50 \S+ p99 \S+$`)

func TestDemoEmbedded(t *testing.T) {
	t.Setenv(envRedisURL, "")
	r := relockCmd(t, "demo", "--acquisitions", "300", "--workers", "6", "--locks", "2")
	if r.code != exitOK {
		t.Fatalf("exit %d, want 0", r.code)
	}
	m := heldLine.FindStringSubmatch(r.lastLine())
	if m == nil || m[1] != "300" {
		t.Fatalf("last line %q, want the verdict for 300 acquisitions", r.lastLine())
	}
	if !strings.Contains(r.stderr, "embedded") {
		t.Errorf("stderr does not say the demo runs on an embedded Redis")
	}
	for _, name := range []string{"relock-demo:0", "relock-demo:1"} {
		if !strings.Contains(r.stdout, name) {
			t.Errorf("the table lacks %s", name)
		}
	}
	// The scenes show, and checked, what else relock does.
	for _, re := range []*regexp.Regexp{
		regexp.MustCompile(`watchdog: a 2s hold under a 500ms lease stayed held`),
		regexp.MustCompile(`lost-lock signal: a holder cut off from Redis was told at \S+; another client got the lock at \S+, after it`),
		regexp.MustCompile(`fencing: the store took token (\d+) from the new holder and refused the stale holder's token (\d+)`),
		regexp.MustCompile(`election: leader node-a \(term \d+\) died without resigning; node-b was elected \S+ later with term \d+, and Leader names it`),
	} {
		if !re.MatchString(r.stdout) {
			t.Errorf("the demo lacks a line matching %q", re)
		}
	}
	if strings.Contains(r.stdout, "scene failed") {
		t.Errorf("a scene failed:\n%s", r.stdout)
	}
}

// TestDemoFirstRunIsQuiet: the first command a newcomer runs, the demo on
// the embedded Redis, prints no warning: nothing in it is about their
// setup.
func TestDemoFirstRunIsQuiet(t *testing.T) {
	t.Setenv(envRedisURL, "")
	r := relockCmd(t, "demo", "--acquisitions", "50", "--workers", "2", "--locks", "1")
	if r.code != exitOK {
		t.Fatalf("exit %d, want 0", r.code)
	}
	for _, line := range strings.Split(r.stdout+r.stderr, "\n") {
		if strings.Contains(line, "WARN") || strings.Contains(line, "ERROR") {
			t.Errorf("the demo printed %q", line)
		}
	}
}

func TestDemoOnServerForDuration(t *testing.T) {
	_, url := server(t)
	r := relockCmd(t, "demo", "--redis", url, "--acquisitions", "0", "--duration", "300ms",
		"--clients", "3", "--workers", "4", "--locks", "1", "--prefix", "t:demo", "--progress", "100ms",
		"--scenes=false") // a test miniredis: its keys never expire

	if r.code != exitOK {
		t.Fatalf("exit %d, want 0", r.code)
	}
	if !heldLine.MatchString(r.lastLine()) {
		t.Fatalf("last line %q, want the verdict", r.lastLine())
	}
	if strings.Count(r.stderr, "acquisitions ") < 2 {
		t.Errorf("want progress lines on stderr")
	}
}

// TestDemoScenesOnServer: on a real server the scenes pass too, and the
// verdict stays the last line.
func TestDemoScenesOnServer(t *testing.T) {
	_, url := realServer(t)
	r := relockCmd(t, "demo", "--redis", url, "--acquisitions", "100", "--workers", "2", "--locks", "1")
	if r.code != exitOK || !heldLine.MatchString(r.lastLine()) {
		t.Fatalf("exit %d, last line %q", r.code, r.lastLine())
	}
	for _, want := range []string{"watchdog: ", "lost-lock signal: ", "fencing: the store took token", "election: leader node-a"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("the demo lacks %q", want)
		}
	}
}

func TestDemoUsage(t *testing.T) {
	tests := []struct {
		name string
		args []string
	}{
		{"no limit", []string{"--acquisitions", "0"}},
		{"no workers", []string{"--workers", "0"}},
		{"no locks", []string{"--locks", "0"}},
		{"stray argument", []string{"extra"}},
		{"bad URL", []string{"--redis", "nonsense"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := relockCmd(t, append([]string{"demo"}, tt.args...)...)
			if r.code != exitUsage {
				t.Fatalf("exit %d, want %d", r.code, exitUsage)
			}
		})
	}
}

// TestDemoReportsViolations feeds the report a broken history: it must
// say VIOLATED on its last line and exit 1.
func TestDemoReportsViolations(t *testing.T) {
	var out bytes.Buffer
	d := &demo{
		e:   &env{stdout: &out, stderr: &out},
		cfg: demoConfig{workers: 2, duration: time.Second},
		rec: history.New(),
	}
	l := &demoLock{name: "x", value: 1}
	l.acquired.Store(2)
	d.locks = []*demoLock{l}
	a := d.rec.Begin("w1", "x", 2)
	b := d.rec.Begin("w2", "x", 1)
	a.End()
	b.End()
	code := d.report(t.Context(), time.Second)
	t.Logf("report:\n%s", out.String())
	if code != exitFailure {
		t.Errorf("exit %d, want %d", code, exitFailure)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	last := lines[len(lines)-1]
	want := "mutual exclusion VIOLATED: 2 acquisitions, 1 overlaps, 1 tokens out of order, 1 lost counter updates, handoff p50"
	if !strings.HasPrefix(last, want) {
		t.Errorf("last line %q, want it to start with %q", last, want)
	}
}

func TestFmtDuration(t *testing.T) {
	tests := []struct {
		d    time.Duration
		want string
	}{
		{0, "0s"},
		{850 * time.Nanosecond, "850ns"},
		{123456 * time.Nanosecond, "123µs"},
		{2123456 * time.Nanosecond, "2.1ms"},
		{35400 * time.Microsecond, "35ms"},
		{1254 * time.Millisecond, "1.25s"},
	}
	for _, tt := range tests {
		t.Run(tt.want, func(t *testing.T) {
			if got := fmtDuration(tt.d); got != tt.want {
				t.Errorf("fmtDuration(%v) = %q, want %q", tt.d, got, tt.want)
			}
		})
	}
}
