package cli

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/relock-go/relock"
)

// webServer serves the web view of mr's locks for one test.
func webServer(t *testing.T, addr string) *httptest.Server {
	t.Helper()
	return webServerWith(t, addr, webConfig{refresh: 2 * time.Second, history: time.Minute})
}

// webServerWith serves the web view of the server at addr with cfg.
func webServerWith(t *testing.T, addr string, cfg webConfig) *httptest.Server {
	t.Helper()
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	view := newWebView(rdb, cfg)
	srv := httptest.NewServer(view)
	t.Cleanup(func() {
		view.Close()
		srv.Close()
		rdb.Close()
	})
	return srv
}

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

func TestWebView(t *testing.T) {
	mr, _ := server(t)
	c := lockClient(t, mr)
	held := lock(t, c, "orders:7")
	lock(t, c, `<b>odd</b>`)
	srv := webServer(t, mr.Addr())

	code, body := get(t, srv.URL+"/locks.json?match=orders:*")
	if code != http.StatusOK {
		t.Fatalf("GET /locks.json: %d %s", code, body)
	}
	var p listing
	if err := json.Unmarshal([]byte(body), &p); err != nil {
		t.Fatal(err)
	}
	if len(p.Locks) != 1 {
		t.Fatalf("%d locks match orders:*, want 1: %s", len(p.Locks), body)
	}
	l := p.Locks[0]
	if l.Name != "orders:7" || l.Kind != "lock" || l.Holds != 1 || len(l.Holders) != 1 ||
		l.Token != strconv.FormatUint(held.Token(), 10) || l.TTLms <= 0 {
		t.Fatalf("orders:7 shown as %+v", l)
	}

	code, body = get(t, srv.URL+"/")
	if code != http.StatusOK {
		t.Fatalf("GET /: %d", code)
	}
	if !strings.Contains(body, "orders:7") || !strings.Contains(body, "2 objects") {
		t.Errorf("the page does not list both locks:\n%s", body)
	}
	if strings.Contains(body, "<b>odd</b>") || !strings.Contains(body, "&lt;b&gt;odd&lt;/b&gt;") {
		t.Errorf("a lock name is not escaped in the page")
	}

	// ?kind= keeps the objects of one kind.
	for kind, want := range map[string]int{"lock": 2, "fair": 0} {
		_, body = get(t, srv.URL+"/locks.json?kind="+kind)
		var k listing
		if err := json.Unmarshal([]byte(body), &k); err != nil || len(k.Locks) != want || k.Kind != kind {
			t.Fatalf("kind=%s: %d objects (%v), want %d: %s", kind, len(k.Locks), err, want, body)
		}
	}

	// A released lock leaves the view.
	if err := held.Unlock(context.Background()); err != nil {
		t.Fatal(err)
	}
	_, body = get(t, srv.URL+"/locks.json?match=orders:*")
	if err := json.Unmarshal([]byte(body), &p); err != nil {
		t.Fatal(err)
	}
	if len(p.Locks) != 0 {
		t.Fatalf("a released lock is still shown: %s", body)
	}
}

func TestWebViewRedisDown(t *testing.T) {
	mr, _ := server(t)
	srv := webServer(t, mr.Addr())
	mr.Close()
	code, body := get(t, srv.URL+"/locks.json")
	if code != http.StatusBadGateway || !strings.Contains(body, `"error"`) {
		t.Fatalf("with Redis down: %d %s; want 502 and an error", code, body)
	}
}

func TestWebUsage(t *testing.T) {
	for _, args := range [][]string{{"web", "extra"}, {"web", "--refresh", "10ms"}, {"web", "--history", "1ms"}} {
		if r := relockCmd(t, args...); r.code != exitUsage {
			t.Errorf("%v: exit %d, want %d", args, r.code, exitUsage)
		}
	}
}

// TestWebCommand runs the command itself with --allow-force-unlock: it
// serves on the address it prints, offers force-unlock on object pages,
// and returns 0 once its context ends, with an event stream still open.
func TestWebCommand(t *testing.T) {
	mr, url := server(t)
	lock(t, lockClient(t, mr), "jobs:1")
	pr, pw := io.Pipe()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan int, 1)
	go func() {
		e := &env{stdin: strings.NewReader(""), stdout: pw, stderr: io.Discard, getenv: func(string) string { return "" }}
		done <- runWeb(ctx, e, []string{"--redis", url, "--listen", "127.0.0.1:0", "--allow-force-unlock"})
		pw.Close()
	}()
	line, err := readLine(pr)
	if err != nil {
		t.Fatal(err)
	}
	addr, ok := strings.CutPrefix(strings.TrimSpace(line), "relock web: serving ")
	if !ok {
		t.Fatalf("first line %q does not give the address", line)
	}
	go io.Copy(io.Discard, pr)
	code, body := get(t, addr+"locks.json")
	if code != http.StatusOK || !strings.Contains(body, `"jobs:1"`) {
		t.Fatalf("GET %slocks.json: %d %s", addr, code, body)
	}
	if _, page := get(t, addr+"object?name=jobs:1"); !strings.Contains(page, "force-unlock</button>") {
		t.Fatalf("the object page offers no force-unlock with --allow-force-unlock:\n%s", page)
	}
	var p listing
	openEvents(t, addr+"events").next(t, &p)
	cancel()
	select {
	case code := <-done:
		if code != exitOK {
			t.Fatalf("exit %d after the context ended, want 0", code)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("relock web did not stop within 20s of its context ending, with an event stream open")
	}
}

// readLine reads up to the first newline.
func readLine(r io.Reader) (string, error) {
	var b strings.Builder
	buf := make([]byte, 1)
	for {
		if _, err := r.Read(buf); err != nil {
			return b.String(), err
		}
		if buf[0] == '\n' {
			return b.String(), nil
		}
		b.WriteByte(buf[0])
	}
}

// eventStream reads the server-sent events of url.
type eventStream struct {
	lines *bufio.Reader
	body  io.Closer
}

func openEvents(t *testing.T, url string) *eventStream {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		t.Fatalf("GET %s: %d %s", url, resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	t.Cleanup(func() { resp.Body.Close() })
	return &eventStream{lines: bufio.NewReader(resp.Body), body: resp.Body}
}

// next decodes the next event into v, within 10s. Fields the event
// leaves out keep their values: decode into a fresh value.
func (s *eventStream) next(t *testing.T, v any) {
	t.Helper()
	got := make(chan string, 1)
	go func() {
		for {
			line, err := s.lines.ReadString('\n')
			if err != nil {
				got <- ""
				return
			}
			if data, ok := strings.CutPrefix(line, "data: "); ok {
				got <- data
				return
			}
		}
	}()
	select {
	case data := <-got:
		if err := json.Unmarshal([]byte(data), v); err != nil {
			t.Fatalf("event %q: %v", data, err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no event within 10s")
	}
}

// TestWebLive: /events sends the listing as it changes (a release shows as
// a listing without the lock), and an object's stream carries its samples
// and the events seen: acquired, released, and expired for a lock whose
// lease ran out unrenewed.
func TestWebLive(t *testing.T) {
	mr, _ := server(t)
	c := lockClient(t, mr)
	srv := webServerWith(t, mr.Addr(), webConfig{refresh: 100 * time.Millisecond, history: time.Minute})
	live := openEvents(t, srv.URL+"/events?match=orders:*")
	var p listing
	live.next(t, &p)
	if len(p.Locks) != 0 || p.Match != "orders:*" {
		t.Fatalf("first event %+v; want no objects", p)
	}
	held := lock(t, c, "orders:7")
	lock(t, c, "other") // filtered out
	for len(p.Locks) == 0 {
		live.next(t, &p)
	}
	if len(p.Locks) != 1 || p.Locks[0].Name != "orders:7" || len(p.Locks[0].Holders) != 1 {
		t.Fatalf("listing %+v; want orders:7 alone", p.Locks)
	}
	obj := openEvents(t, srv.URL+"/events?object=orders:7")
	var o objectView
	obj.next(t, &o)
	if err := held.Unlock(context.Background()); err != nil {
		t.Fatal(err)
	}
	for len(p.Locks) != 0 {
		live.next(t, &p)
	}
	for o.Row != nil {
		o = objectView{}
		obj.next(t, &o)
	}
	if len(o.Samples) < 2 || o.Samples[0].Holds != 1 || o.Samples[len(o.Samples)-1].Holds != 0 {
		t.Fatalf("samples %+v; want holds 1 then 0", o.Samples)
	}
	if kinds := eventKinds(o.Events); kinds != "acquired released" {
		t.Fatalf("events %v; want acquired released", kinds)
	}

	// A lease that runs out unrenewed shows as expired.
	if _, err := c.Mutex("orders:8").Lock(context.Background(), relock.WithLease(300*time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	exp := openEvents(t, srv.URL+"/events?object=orders:8")
	for o = (objectView{}); !strings.Contains(eventKinds(o.Events), "expired"); {
		o = objectView{}
		exp.next(t, &o)
		mr.FastForward(100 * time.Millisecond)
	}
}

// eventKinds lists the kinds of es, separated by spaces.
func eventKinds(es []event) string {
	var k []string
	for _, e := range es {
		k = append(k, e.Kind)
	}
	return strings.Join(k, " ")
}

// TestWebForceUnlock: without --allow-force-unlock the endpoint refuses;
// with it, a POST without the page's token or from another site is
// refused, and one with it deletes the lock and records the event.
func TestWebForceUnlock(t *testing.T) {
	mr, _ := server(t)
	c := lockClient(t, mr)
	lock(t, c, "job")
	ro := webServer(t, mr.Addr())
	if code, body := post(t, ro.URL+"/unlock", "name=job&token=x", nil); code != http.StatusForbidden {
		t.Fatalf("read-only view: %d %s; want 403", code, body)
	}
	_, page := get(t, ro.URL+"/object?name=job")
	if strings.Contains(page, "force-unlock</button>") {
		t.Fatal("a read-only view offers force-unlock")
	}

	rw := webServerWith(t, mr.Addr(), webConfig{refresh: 100 * time.Millisecond, history: time.Minute, unlocker: lockClient(t, mr)})
	_, page = get(t, rw.URL+"/object?name=job")
	m := regexp.MustCompile(`name="token" value="([0-9a-f]+)"`).FindStringSubmatch(page)
	if m == nil {
		t.Fatalf("the object page of a view with --allow-force-unlock has no token:\n%s", page)
	}
	if code, _ := post(t, rw.URL+"/unlock", "name=job&token=bad", nil); code != http.StatusForbidden {
		t.Fatalf("wrong token: %d; want 403", code)
	}
	if code, _ := post(t, rw.URL+"/unlock", "name=job&token="+m[1], map[string]string{"Sec-Fetch-Site": "cross-site"}); code != http.StatusForbidden {
		t.Fatalf("cross-site: %d; want 403", code)
	}
	if !mr.Exists("job") {
		t.Fatal("a refused force-unlock deleted the lock")
	}
	if code, body := post(t, rw.URL+"/unlock", "name=job&token="+m[1], map[string]string{"Sec-Fetch-Site": "same-origin"}); code != http.StatusOK || !strings.Contains(body, `"held":true`) {
		t.Fatalf("force-unlock: %d %s", code, body)
	}
	if mr.Exists("job") {
		t.Fatal("the lock is still there after a force-unlock")
	}
	obj := openEvents(t, rw.URL+"/events?object=job")
	var o objectView
	for !strings.Contains(eventKinds(o.Events), "force-unlocked") {
		o = objectView{}
		obj.next(t, &o)
	}
}

func post(t *testing.T, url, form string, header map[string]string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(form))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func TestGlobMatch(t *testing.T) {
	for _, tt := range []struct {
		p, s string
		want bool
	}{
		{"*", "a/b{c}", true}, {"orders:*", "orders:7", true}, {"orders:*", "order:7", false},
		{"h?llo", "hello", true}, {"h[ae]llo", "hallo", true}, {"h[^e]llo", "hello", false},
		{"h[a-c]llo", "hbllo", true}, {`a\*`, "a*", true}, {`a\*`, "ab", false}, {"*:7", "x:y:7", true},
	} {
		if got := globMatch(tt.p, tt.s); got != tt.want {
			t.Errorf("globMatch(%q, %q) = %v, want %v", tt.p, tt.s, got, tt.want)
		}
	}
}
