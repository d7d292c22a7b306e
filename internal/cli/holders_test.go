package cli

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/layout"
	"github.com/relock-go/relock/internal/redistest"
)

// namedClient returns a relock Client on srv with the given WithClientName,
// closed with the test.
func namedClient(t *testing.T, srv *redistest.Server, name string) *relock.Client {
	t.Helper()
	rdb := srv.Client()
	c, err := relock.New(rdb, relock.WithClientName(name))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		c.Close()
		rdb.Close()
	})
	return c
}

// TestEveryHolderIdentified: every holder relock granted, of every
// primitive that has holders, is shown with its Client's host, pid,
// program and name in ls, ls --json, show, show --json and the web view:
// a Mutex's, a FairMutex's, an RWMutex's readers and writer, an election's
// leader, and a PermitSemaphore's permits, taken by an attempt or granted
// by a release to a queued call. A permit of Redisson's (a 16-byte id)
// stays anonymous, and show says that a Semaphore's permits have no owner.
func TestEveryHolderIdentified(t *testing.T) {
	srv, url := realServer(t)
	ctx := context.Background()
	must := func(_ any, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(namedClient(t, srv, "mutex").Mutex("m").Lock(ctx))
	must(namedClient(t, srv, "fair").FairMutex("f").Lock(ctx))
	must(namedClient(t, srv, "reader1").RWMutex("rw-read").RLock(ctx))
	must(namedClient(t, srv, "reader2").RWMutex("rw-read").RLock(ctx))
	must(namedClient(t, srv, "writer").RWMutex("rw-write").Lock(ctx))
	must(namedClient(t, srv, "leader").Election("sched").Campaign(ctx, "10.0.0.1:80"))

	workers := namedClient(t, srv, "permits").PermitSemaphore("pool:workers")
	must(workers.TrySetPermits(ctx, 3))
	must(workers.Acquire(ctx))
	must(workers.Acquire(ctx, relock.WithLease(time.Minute)))

	// pool:full's one permit goes from "first" to the call of "granted"
	// waiting in the queue, by the release's grant.
	full := namedClient(t, srv, "first").PermitSemaphore("pool:full")
	must(full.TrySetPermits(ctx, 1))
	first, err := full.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	granted := namedClient(t, srv, "granted")
	got := make(chan error, 1)
	go func() {
		_, err := granted.PermitSemaphore("pool:full").Acquire(ctx)
		got <- err
	}()
	until(t, "the permit call queued", func(ctx context.Context, rdb *redis.Client) bool {
		return rdb.ZCard(ctx, layout.Companion(layout.PermitQueue, "pool:full")).Val() == 1
	}, srv)
	if err := first.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Fatal(err)
	}
	if h := granted.Stats().Handoffs; h != 1 {
		t.Fatalf("%d grants: want the permit granted to the queued call", h)
	}

	// A Redisson permit: 16 random bytes.
	rdb := srv.Client()
	defer rdb.Close()
	must(rdb.ZAdd(ctx, layout.PermitTimeouts("pool:workers"), redis.Z{Score: float64(time.Now().Add(time.Minute).UnixMilli()), Member: "0123456789abcdef"}).Result())
	must(rdb.Decr(ctx, "pool:workers").Result())

	sem := namedClient(t, srv, "sem").Semaphore("sem")
	must(sem.TrySetPermits(ctx, 1))
	if err := sem.Acquire(ctx, 1); err != nil {
		t.Fatal(err)
	}
	startCall(t, func(ctx context.Context) error {
		return namedClient(t, srv, "semwaiter").Semaphore("sem").Acquire(ctx, 1)
	})
	until(t, "semaphore waiter", subscribed(layout.Companion(layout.SemaphoreChannel, "sem")), srv)

	want := map[string][]string{
		"m":            {"mutex"},
		"f":            {"fair"},
		"rw-read":      {"reader1", "reader2"},
		"rw-write":     {"writer"},
		"sched":        {"leader"},
		"pool:workers": {"", "permits", "permits"}, // sorted: Redisson's permit has no Client
		"pool:full":    {"granted"},
	}
	host, _ := os.Hostname()
	pid := strconv.Itoa(os.Getpid())
	names := func(hs []holderRow) []string {
		var out []string
		for _, h := range hs {
			if h.Client == nil {
				out = append(out, "")
				continue
			}
			if h.Client.Host != host || h.Client.PID != pid || h.Client.Program == "" {
				t.Errorf("holder %s: client %+v; want host %s, pid %s and a program", h.Owner, h.Client, host, pid)
			}
			out = append(out, h.Client.Name)
		}
		slices.Sort(out)
		return out
	}
	check := func(where string, rows []lockRow) {
		t.Helper()
		seen := map[string]bool{}
		for _, r := range rows {
			w, ok := want[r.Name]
			if !ok {
				continue
			}
			seen[r.Name] = true
			if got := names(r.Holders); strings.Join(got, ",") != strings.Join(w, ",") {
				t.Errorf("%s %s: holders %q, want %q", where, r.Name, got, w)
			}
		}
		for name := range want {
			if !seen[name] {
				t.Errorf("%s does not list %s", where, name)
			}
		}
	}

	r := relockCmd(t, "ls", "--redis", url, "--json")
	var l listing
	if err := json.Unmarshal([]byte(r.stdout), &l); err != nil {
		t.Fatal(err)
	}
	check("ls --json", l.Locks)
	web := webServer(t, srv.Addr)
	code, body := get(t, web.URL+"/locks.json")
	if code != http.StatusOK {
		t.Fatalf("GET /locks.json: %d %s", code, body)
	}
	l = listing{}
	if err := json.Unmarshal([]byte(body), &l); err != nil {
		t.Fatal(err)
	}
	check("/locks.json", l.Locks)
	_, page := get(t, web.URL+"/")

	r = relockCmd(t, "ls", "--redis", url)
	lines := map[string]string{}
	for _, line := range strings.Split(r.stdout, "\n") {
		if f := strings.Fields(line); len(f) > 0 {
			lines[f[0]] = line
		}
	}
	for name, clients := range want {
		r := relockCmd(t, "show", "--redis", url, name)
		var s shown
		if err := json.Unmarshal([]byte(relockCmd(t, "show", "--redis", url, "--json", name).stdout), &s); err != nil {
			t.Fatal(err)
		}
		if got := names(s.Holders); strings.Join(got, ",") != strings.Join(clients, ",") {
			t.Errorf("show --json %s: holders %q, want %q", name, got, clients)
		}
		for _, c := range clients {
			who := "unknown client"
			if c != "" {
				who = "pid " + pid + " "
			}
			for where, out := range map[string]string{"ls": lines[name], "show": r.stdout} {
				if !strings.Contains(out, who) || c != "" && !strings.Contains(out, "("+c+")") {
					t.Errorf("%s %s does not show its holder %q:\n%s", where, name, c, out)
				}
			}
			if c != "" && !strings.Contains(page, "("+c+")") {
				t.Errorf("the web page does not show %s's holder %q", name, c)
			}
		}
	}
	var s shown
	if err := json.Unmarshal([]byte(relockCmd(t, "show", "--redis", url, "--json", "pool:workers").stdout), &s); err != nil {
		t.Fatal(err)
	}
	for _, p := range s.Permits {
		if len(p.ID) == 48 && (p.Client == nil || p.Client.Name != "permits" || !isOwner(p.Owner) || !strings.HasPrefix(strings.ReplaceAll(p.Owner, "-", ""), p.ID[:32])) {
			t.Errorf("show --json pool:workers: permit %+v; want its owner id and Client", p)
		}
		if len(p.ID) == 32 && (p.Client != nil || p.Owner != "") {
			t.Errorf("show --json pool:workers: Redisson's permit %+v has an owner", p)
		}
	}
	if r := relockCmd(t, "show", "--redis", url, "sem"); !strings.Contains(r.stdout, "no owner") {
		t.Errorf("show sem does not say a semaphore's permits have no owner:\n%s", r.stdout)
	}
}
