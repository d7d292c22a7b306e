package cli

import (
	"bufio"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// promLine is a sample line of the Prometheus text format: a metric name,
// optional labels with quoted, escaped values, and a float value.
var promLine = regexp.MustCompile(`^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{([a-zA-Z_][a-zA-Z0-9_]*="(\\.|[^"\\])*")(,[a-zA-Z_][a-zA-Z0-9_]*="(\\.|[^"\\])*")*\})? (\S+)$`)

// parseProm checks text against the rules of the Prometheus text format
// (version 0.0.4) and returns its samples as "name{labels}" -> value:
// every line a HELP, a TYPE or a sample; a family's HELP and TYPE once,
// before its samples, and its samples together; no sample repeated.
func parseProm(t *testing.T, text string) map[string]float64 {
	t.Helper()
	samples := map[string]float64{}
	typed := map[string]bool{}
	helped := map[string]bool{}
	done := map[string]bool{} // families whose samples have ended
	current := ""
	sc := bufio.NewScanner(strings.NewReader(text))
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "# HELP "), strings.HasPrefix(line, "# TYPE "):
			f := strings.SplitN(line, " ", 4)
			if len(f) < 4 {
				t.Fatalf("line %d: %q", n, line)
			}
			seen := helped
			if f[1] == "TYPE" {
				seen = typed
				if f[3] != "gauge" && f[3] != "counter" && f[3] != "untyped" && f[3] != "histogram" && f[3] != "summary" {
					t.Fatalf("line %d: unknown type %q", n, f[3])
				}
			}
			if seen[f[2]] || done[f[2]] {
				t.Fatalf("line %d: %s of %s again or after its samples", n, f[1], f[2])
			}
			seen[f[2]] = true
		case strings.HasPrefix(line, "#"), line == "":
			t.Fatalf("line %d: %q is neither HELP, TYPE nor a sample", n, line)
		default:
			m := promLine.FindStringSubmatch(line)
			if m == nil {
				t.Fatalf("line %d: %q is not a sample", n, line)
			}
			name := m[1]
			if !typed[name] {
				t.Fatalf("line %d: sample of %s before its TYPE", n, name)
			}
			if name != current {
				if current != "" {
					done[current] = true
				}
				if done[name] {
					t.Fatalf("line %d: samples of %s are not together", n, name)
				}
				current = name
			}
			v, err := strconv.ParseFloat(m[len(m)-1], 64)
			if err != nil {
				t.Fatalf("line %d: value %q: %v", n, m[len(m)-1], err)
			}
			key := strings.TrimSuffix(line, " "+m[len(m)-1])
			if _, dup := samples[key]; dup {
				t.Fatalf("line %d: %s twice", n, key)
			}
			samples[key] = v
		}
	}
	return samples
}

// TestMetrics: /metrics follows the Prometheus text format and counts the
// objects, holders, holds and waiters by kind; relock_up says whether
// Redis could be read.
func TestMetrics(t *testing.T) {
	mr, _ := server(t)
	c := lockClient(t, mr)
	lock(t, c, "orders:7")
	lock(t, c, "orders:8")
	srv := webServer(t, mr.Addr())

	code, body := get(t, srv.URL+"/metrics")
	if code != http.StatusOK {
		t.Fatalf("GET /metrics: %d %s", code, body)
	}
	s := parseProm(t, body)
	for k, want := range map[string]float64{
		`relock_objects{kind="lock"}`: 2, `relock_holders{kind="lock"}`: 2, `relock_holds{kind="lock"}`: 2,
		`relock_objects{kind="fair"}`: 0, `relock_waiting{kind="lock"}`: 0, `relock_up`: 1,
	} {
		if got, ok := s[k]; !ok || got != want {
			t.Errorf("%s = %v (present %v), want %v", k, got, ok, want)
		}
	}
	if age, ok := s[`relock_oldest_hold_age_seconds{kind="lock"}`]; !ok || age < 0 {
		t.Errorf("oldest hold age %v (present %v), want a non-negative age", age, ok)
	}
	if ttl := s[`relock_lock_min_ttl_seconds{kind="lock"}`]; ttl <= 0 || ttl > 30 {
		t.Errorf("min TTL %v, want within the watchdog lease", ttl)
	}

	mr.Close()
	_, body = get(t, srv.URL+"/metrics")
	if s := parseProm(t, body); s["relock_up"] != 0 {
		t.Errorf("relock_up = %v with Redis down, want 0", s["relock_up"])
	}
}
