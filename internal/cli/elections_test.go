package cli

import (
	"context"
	"encoding/json"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/relock-go/relock/internal/layout"
)

// TestElectionByName: an election is listed, shown and linked by the name
// it was given, with kind election, in ls (text, --json, --match, --kind),
// show, unlock --force, the web view (its page, its links, /locks.json, an
// object page and its force-unlock) and /metrics; its lock key
// relock_election:{NAME} appears nowhere. A Mutex of the same name is
// another object, listed and linked apart.
func TestElectionByName(t *testing.T) {
	srv, url := realServer(t)
	ctx := context.Background()
	c := realClient(t, srv)
	if _, err := c.Election("scheduler").Campaign(ctx, "10.0.0.7:8080"); err != nil {
		t.Fatal(err)
	}
	lock(t, c, "orders:7")
	const internal = layout.Election

	// ls: its row, found by --match and --kind, is named scheduler.
	for _, args := range [][]string{{}, {"--match", "sched*"}, {"--kind", "election"}} {
		r := relockCmd(t, append([]string{"ls", "--redis", url}, args...)...)
		if strings.Contains(r.stdout, internal) {
			t.Errorf("ls %v shows the lock key:\n%s", args, r.stdout)
		}
		if !regexp.MustCompile(`(?m)^scheduler +election `).MatchString(r.stdout) {
			t.Errorf("ls %v does not list scheduler as an election:\n%s", args, r.stdout)
		}
		if len(args) > 0 && strings.Contains(r.stdout, "orders:7") {
			t.Errorf("ls %v lists orders:7", args)
		}
	}
	r := relockCmd(t, "ls", "--redis", url, "--json", "--match", "scheduler")
	var l listing
	if err := json.Unmarshal([]byte(r.stdout), &l); err != nil || len(l.Locks) != 1 || l.Locks[0].Name != "scheduler" || l.Locks[0].Kind != kindElection || l.Locks[0].Leader == nil {
		t.Fatalf("ls --json --match scheduler: %+v, %v; want the election named scheduler with its leader", l.Locks, err)
	}

	// show, by name or by lock key, names it scheduler (the key of its
	// queue is named only where the waiters counted are said).
	for _, name := range []string{"scheduler", layout.Companion(layout.Election, "scheduler")} {
		r := relockCmd(t, "show", "--redis", url, name)
		named := regexp.MustCompile(`(?m)^waiters .*$`).ReplaceAllString(r.stdout, "")
		if r.code != exitOK || !strings.Contains(strings.Join(strings.Fields(r.stdout), " "), "name scheduler state held (election)") || strings.Contains(named, internal) {
			t.Errorf("show %s: exit %d:\n%s\nwant it named scheduler, held (election)", name, r.code, r.stdout)
		}
		r = relockCmd(t, "show", "--redis", url, "--json", name)
		var s shown
		if err := json.Unmarshal([]byte(r.stdout), &s); err != nil || s.Name != "scheduler" || s.Kind != kindElection {
			t.Errorf("show --json %s: name %q kind %q (%v); want scheduler, election", name, s.Name, s.Kind, err)
		}
	}

	// A Mutex named scheduler too: two rows, each linked to its own page.
	lock(t, c, "scheduler")
	web := webServerWith(t, srv.Addr, webConfig{refresh: 100 * time.Millisecond, history: time.Minute, unlocker: realClient(t, srv)})
	code, body := get(t, web.URL+"/locks.json")
	if code != http.StatusOK {
		t.Fatalf("GET /locks.json: %d %s", code, body)
	}
	l = listing{}
	if err := json.Unmarshal([]byte(body), &l); err != nil {
		t.Fatal(err)
	}
	kinds := map[string]bool{}
	for _, row := range l.Locks {
		if row.Name == "scheduler" {
			kinds[row.Kind] = true
		}
	}
	if !kinds[kindElection] || !kinds[kindLock] || strings.Contains(body, internal) {
		t.Errorf("/locks.json: scheduler as %v; want an election and a lock, and no lock key:\n%s", kinds, body)
	}
	_, page := get(t, web.URL+"/")
	if !strings.Contains(page, `href="object?name=scheduler&amp;kind=election"`) || !strings.Contains(page, `href="object?name=scheduler"`) || strings.Contains(page, internal) {
		t.Errorf("the page does not link the election and the lock named scheduler apart, or shows the lock key:\n%s", page)
	}
	if _, metrics := get(t, web.URL+"/metrics"); !strings.Contains(metrics, `relock_objects{kind="election"} 1`) {
		t.Errorf("/metrics does not count the election:\n%s", metrics)
	}
	obj := openEvents(t, web.URL+"/events?object=scheduler&kind=election")
	var o objectView
	for o.Row == nil {
		o = objectView{}
		obj.next(t, &o)
	}
	if o.Name != "scheduler" || o.Kind != kindElection || o.Row.Kind != kindElection || o.Row.Leader == nil {
		t.Fatalf("object view %+v (row %+v); want the election scheduler", o, o.Row)
	}
	lockObj := openEvents(t, web.URL+"/events?object=scheduler")
	o = objectView{}
	for o.Row == nil {
		o = objectView{}
		lockObj.next(t, &o)
	}
	if o.Row.Kind != kindLock {
		t.Fatalf("object scheduler without kind: row %+v; want the Mutex", o.Row)
	}

	// Force-unlock from the election's page takes the election, not the
	// Mutex of the same name.
	_, page = get(t, web.URL+"/object?name=scheduler&kind=election")
	m := regexp.MustCompile(`name="token" value="([0-9a-f]+)"`).FindStringSubmatch(page)
	if m == nil || !strings.Contains(page, `name="kind" value="election"`) {
		t.Fatalf("the election's object page has no token or kind:\n%s", page)
	}
	code, body = post(t, web.URL+"/unlock", "name=scheduler&kind=election&token="+m[1], map[string]string{"Sec-Fetch-Site": "same-origin"})
	if code != http.StatusOK || !strings.Contains(body, `"name":"scheduler"`) || !strings.Contains(body, `"kind":"election"`) {
		t.Fatalf("force-unlock of the election: %d %s", code, body)
	}
	rdb := srv.Client()
	defer rdb.Close()
	if n := rdb.Exists(ctx, "scheduler").Val(); n != 1 {
		t.Fatalf("the force-unlock of the election deleted the Mutex scheduler")
	}
	for !strings.Contains(eventKinds(o.Events), "force-unlocked") || o.Kind != kindElection {
		o = objectView{}
		obj.next(t, &o)
	}

	// unlock --force names it too.
	if _, err := realClient(t, srv).Election("nightly").Campaign(ctx, "x"); err != nil {
		t.Fatal(err)
	}
	if r := relockCmd(t, "unlock", "--force", "--redis", url, "nightly"); r.code != exitOK || r.stdout != "nightly: force-unlocked (election)\n" {
		t.Errorf("unlock --force nightly: exit %d, %q", r.code, r.stdout)
	}
}

// TestParseLeaderBytes: a leader's value that is not UTF-8 is shown with
// its bytes as they are, not replaced.
func TestParseLeaderBytes(t *testing.T) {
	value := "\x96\x01\xff\xfe"
	rec, err := json.Marshal(map[string]any{"value": value, "value64": []byte(value), "term": 7, "holder": "h:1", "since": 0})
	if err != nil {
		t.Fatal(err)
	}
	l := parseLeader(map[string]string{layout.LeaderField: string(rec), layout.LeaderHolderField: "h:1", "h:1": "1"})
	if l == nil {
		t.Fatal("no leader parsed")
	}
	if l.Value != value || !strings.Contains(l.describe(), `"\x96\x01\xff\xfe"`) {
		t.Fatalf("value %q, described %s; want the bytes %q", l.Value, l.describe(), value)
	}
}
