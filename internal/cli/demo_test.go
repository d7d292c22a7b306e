package cli

import (
	"bytes"
	"context"
	"errors"
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
		regexp.MustCompile(`lost-lock signal: a holder cut off from Redis was told at \S+; another client got the lock at \S+, when the holder's Err reported the loss`),
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

// TestDemoReportOutput pins what the report prints, on stdout and
// stderr, and its exit code, for a run that held, one that made fewer
// acquisitions than asked, one whose worker failed, one interrupted, and
// one that broke mutual exclusion in every way the report counts. The
// holds are recorded with fixed times, so that the handoff percentiles
// are exact.
func TestDemoReportOutput(t *testing.T) {
	ms := func(n int) time.Duration { return time.Duration(n) * time.Millisecond }
	// run is a demo of two locks whose holds took turns: x three times,
	// y twice.
	run := func(cfg demoConfig) *demo {
		d := &demo{cfg: cfg, rec: history.New()}
		x := &demoLock{name: "relock-demo:x", value: 3}
		x.acquired.Store(3)
		y := &demoLock{name: "relock-demo:y", value: 2}
		y.acquired.Store(2)
		d.locks = []*demoLock{x, y}
		d.rec.Add("w1", x.name, 1, ms(0), ms(10), false)
		d.rec.Add("w2", x.name, 2, ms(12), ms(20), false)
		d.rec.Add("w1", x.name, 3, ms(25), ms(30), false)
		d.rec.Add("w2", y.name, 4, ms(0), ms(5), false)
		d.rec.Add("w1", y.name, 5, ms(9), ms(15), false)
		return d
	}
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	tests := []struct {
		name           string
		demo           func() *demo
		ctx            context.Context
		code           int
		stdout, stderr string
	}{
		{
			name: "held",
			demo: func() *demo {
				d := run(demoConfig{workers: 4, acquisitions: 5})
				d.lost.Store(1)
				return d
			},
			code: exitOK,
			stdout: `lock           acquisitions  last token     counter
relock-demo:x             3           3           3
relock-demo:y             2           5           2

0 clients, 4 workers: 5 acquisitions in 2s (2/s); 0 lock calls waited, 0 release messages woke a waiter
warning: 1 holds were lost before their unlock
mutual exclusion held: 5 acquisitions, 0 overlaps, handoff p50 4ms p99 5ms
`,
		},
		{
			name: "fewer acquisitions than asked",
			demo: func() *demo { return run(demoConfig{workers: 4, acquisitions: 9}) },
			code: exitFailure,
			stdout: `lock           acquisitions  last token     counter
relock-demo:x             3           3           3
relock-demo:y             2           5           2

0 clients, 4 workers: 5 acquisitions in 2s (2/s); 0 lock calls waited, 0 release messages woke a waiter
mutual exclusion held: 5 acquisitions, 0 overlaps, handoff p50 4ms p99 5ms
`,
			stderr: `relock demo: made 5 acquisitions, want 9
`,
		},
		{
			name: "a worker failed",
			demo: func() *demo {
				d := run(demoConfig{workers: 4, acquisitions: 9})
				d.fail(errors.New("worker 3 (client 1): relock: connection refused"))
				return d
			},
			code: exitFailure,
			stdout: `lock           acquisitions  last token     counter
relock-demo:x             3           3           3
relock-demo:y             2           5           2

0 clients, 4 workers: 5 acquisitions in 2s (2/s); 0 lock calls waited, 0 release messages woke a waiter
mutual exclusion held: 5 acquisitions, 0 overlaps, handoff p50 4ms p99 5ms
`,
			stderr: `relock demo: worker 3 (client 1): connection refused
`,
		},
		{
			name: "interrupted",
			demo: func() *demo { return run(demoConfig{workers: 4, acquisitions: 9, scenes: true}) },
			ctx:  cancelled,
			code: exitInterrupted,
			stdout: `lock           acquisitions  last token     counter
relock-demo:x             3           3           3
relock-demo:y             2           5           2

0 clients, 4 workers: 5 acquisitions in 2s (2/s); 0 lock calls waited, 0 release messages woke a waiter
interrupted after 5 acquisitions
mutual exclusion held: 5 acquisitions, 0 overlaps, handoff p50 4ms p99 5ms
`,
		},
		{
			name: "violated",
			demo: func() *demo {
				d := run(demoConfig{workers: 4, duration: time.Second})
				d.locks[0].value = 1
				d.locks[1].crowded.Store(3)
				// Four holds of y at once, over both of its others, the
				// last with a token that went back: 14 overlaps, 1 token
				// out of order, all of one name (so in a fixed order).
				for _, token := range []uint64{6, 7, 8, 4} {
					d.rec.Add("w3", d.locks[1].name, token, ms(1), ms(14), false)
				}
				return d
			},
			code: exitFailure,
			stdout: `lock           acquisitions  last token     counter
relock-demo:x             3           3           1  (lost updates)
relock-demo:y             2           4           2

0 clients, 4 workers: 5 acquisitions in 2s (2/s); 0 lock calls waited, 0 release messages woke a waiter
violation: token-backwards on "relock-demo:y": hold #9 (w3) got token 4 after hold #8 (w3) got token 8
violation: overlap on "relock-demo:y": hold #6 (w3, token 6) began before the other ended: hold #4 (w2, token 4)
violation: overlap on "relock-demo:y": hold #7 (w3, token 7) began before the other ended: hold #4 (w2, token 4)
violation: overlap on "relock-demo:y": hold #7 (w3, token 7) began before the other ended: hold #6 (w3, token 6)
violation: overlap on "relock-demo:y": hold #8 (w3, token 8) began before the other ended: hold #4 (w2, token 4)
violation: overlap on "relock-demo:y": hold #8 (w3, token 8) began before the other ended: hold #6 (w3, token 6)
violation: overlap on "relock-demo:y": hold #8 (w3, token 8) began before the other ended: hold #7 (w3, token 7)
violation: overlap on "relock-demo:y": hold #9 (w3, token 4) began before the other ended: hold #4 (w2, token 4)
violation: overlap on "relock-demo:y": hold #9 (w3, token 4) began before the other ended: hold #6 (w3, token 6)
violation: overlap on "relock-demo:y": hold #9 (w3, token 4) began before the other ended: hold #7 (w3, token 7)
... and 5 more violations
violation: a worker found another inside the critical section 3 times
violation: the shared counters lost 2 updates
mutual exclusion VIOLATED: 5 acquisitions, 14 overlaps, 1 tokens out of order, 3 crowded critical sections, 2 lost counter updates, handoff p50 2ms p99 5ms
`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			d := tt.demo()
			d.e = &env{stdout: &stdout, stderr: &stderr}
			ctx := tt.ctx
			if ctx == nil {
				ctx = context.Background()
			}
			code := d.report(ctx, 2*time.Second)
			if code != tt.code || stdout.String() != tt.stdout || stderr.String() != tt.stderr {
				t.Errorf("exit %d, stdout\n%s\nstderr\n%s\nwant exit %d, stdout\n%s\nstderr\n%s",
					code, stdout.String(), stderr.String(), tt.code, tt.stdout, tt.stderr)
			}
		})
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
