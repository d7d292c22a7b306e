package cli

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// webServer serves the web view of mr's locks for one test.
func webServer(t *testing.T, addr string) *httptest.Server {
	t.Helper()
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	srv := httptest.NewServer(newWebView(rdb, 2*time.Second))
	t.Cleanup(func() {
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
	if !strings.Contains(body, "orders:7") || !strings.Contains(body, "2 held") {
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
	for _, args := range [][]string{{"web", "extra"}, {"web", "--refresh", "10ms"}} {
		if r := relockCmd(t, args...); r.code != exitUsage {
			t.Errorf("%v: exit %d, want %d", args, r.code, exitUsage)
		}
	}
}

// TestWebCommand runs the command itself: it serves on the address it
// prints, and returns 0 once its context ends.
func TestWebCommand(t *testing.T) {
	mr, url := server(t)
	lock(t, lockClient(t, mr), "jobs:1")
	pr, pw := io.Pipe()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan int, 1)
	go func() {
		e := &env{stdin: strings.NewReader(""), stdout: pw, stderr: io.Discard, getenv: func(string) string { return "" }}
		done <- runWeb(ctx, e, []string{"--redis", url, "--listen", "127.0.0.1:0"})
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
	cancel()
	if code := <-done; code != exitOK {
		t.Fatalf("exit %d after the context ended, want 0", code)
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
