package cli

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/relock-go/relock"
)

// browserDeadline bounds every wait on the browser.
const browserDeadline = 30 * time.Second

// browser is a headless Chromium driven through chromedriver's WebDriver
// HTTP interface.
type browser struct {
	base    string // the session's URL
	driver  *exec.Cmd
	stopped chan struct{}
}

// startBrowser starts chromedriver and a headless Chromium session; both
// end with the test. Missing programs fail the test with the command that
// installs them.
func startBrowser(t *testing.T) *browser {
	t.Helper()
	const install = "apt-get install -y chromium chromium-driver (scripts/test.sh installs them)"
	driverPath, err := exec.LookPath("chromedriver")
	if err != nil {
		t.Fatalf("chromedriver is not installed: %s", install)
	}
	chromium, err := exec.LookPath("chromium")
	if err != nil {
		t.Fatalf("chromium is not installed: %s", install)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	b := &browser{driver: exec.Command(driverPath, "--port="+strconv.Itoa(port)), stopped: make(chan struct{})}
	b.driver.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // its browsers go with it
	if err := b.driver.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		_ = b.driver.Wait()
		close(b.stopped)
	}()
	t.Cleanup(func() {
		_ = syscall.Kill(-b.driver.Process.Pid, syscall.SIGKILL)
		<-b.stopped
	})
	root := fmt.Sprintf("http://127.0.0.1:%d", port)
	deadline := time.Now().Add(browserDeadline)
	for {
		var status struct {
			Ready bool `json:"ready"`
		}
		if err := call(http.MethodGet, root+"/status", nil, &status); err == nil && status.Ready {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("chromedriver not ready within %v", browserDeadline)
		}
		time.Sleep(50 * time.Millisecond)
	}
	caps := map[string]any{"capabilities": map[string]any{"alwaysMatch": map[string]any{
		"browserName": "chrome",
		"goog:chromeOptions": map[string]any{"binary": chromium, "args": []string{
			"--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--window-size=1280,900",
			"--disable-quic", "--no-first-run", "--disable-background-networking", "--disable-component-update", "--disable-sync"}},
	}}}
	var session struct {
		SessionID string `json:"sessionId"`
	}
	if err := call(http.MethodPost, root+"/session", caps, &session); err != nil {
		t.Fatalf("start a browser session: %v", err)
	}
	b.base = root + "/session/" + session.SessionID
	t.Cleanup(func() { _ = call(http.MethodDelete, b.base, nil, nil) })
	return b
}

// call makes one WebDriver request and decodes its "value" into out.
func call(method, url string, in, out any) error {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return err
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, url, body)
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	var reply struct {
		Value json.RawMessage `json:"value"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&reply); err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s %s: %d %s", method, url, resp.StatusCode, reply.Value)
	}
	if out != nil {
		return json.Unmarshal(reply.Value, out)
	}
	return nil
}

func (b *browser) open(t *testing.T, url string) {
	t.Helper()
	if err := call(http.MethodPost, b.base+"/url", map[string]string{"url": url}, nil); err != nil {
		t.Fatal(err)
	}
}

// run runs script in the page and decodes what it returns into out.
func (b *browser) run(t *testing.T, script string, out any) {
	t.Helper()
	if err := call(http.MethodPost, b.base+"/execute/sync", map[string]any{"script": script, "args": []any{}}, out); err != nil {
		t.Fatal(err)
	}
}

// waitFor waits until script, run in the page, returns true.
func (b *browser) waitFor(t *testing.T, what, script string) {
	t.Helper()
	deadline := time.Now().Add(browserDeadline)
	for {
		var ok bool
		b.run(t, script, &ok)
		if ok {
			return
		}
		if time.Now().After(deadline) {
			var text string
			b.run(t, "return document.body.innerText", &text)
			t.Fatalf("the page did not show %s within %v; it reads:\n%s", what, browserDeadline, text)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// screenshot saves the page as dir/name when dir is not empty.
func (b *browser) screenshot(t *testing.T, dir, name string) {
	t.Helper()
	if dir == "" {
		return
	}
	var png string
	if err := call(http.MethodGet, b.base+"/screenshot", nil, &png); err != nil {
		t.Fatal(err)
	}
	data, err := base64.StdEncoding.DecodeString(png)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestWebInBrowser drives headless Chromium against the web view on a real
// server: every kind of object shows with its holder's host and pid, the
// page updates in place when a lock is released (a marker set in the page
// survives: no reload), and an object page draws its charts. With
// RELOCK_SCREENSHOT=dir it saves web.png and web-object.png there.
func TestWebInBrowser(t *testing.T) {
	srv, _ := realServer(t)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr})
	defer rdb.Close()
	c, err := relock.New(rdb, relock.WithClientName("billing"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	orders, err := c.Mutex("orders:7").Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	reports, err := c.FairMutex("reports").Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.RWMutex("catalog").RLock(ctx); err != nil {
		t.Fatal(err)
	}
	ps := c.PermitSemaphore("workers")
	if _, err := ps.TrySetPermits(ctx, 3); err != nil {
		t.Fatal(err)
	}
	if _, err := ps.Acquire(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Election("scheduler").Campaign(ctx, "10.0.0.7:8080"); err != nil {
		t.Fatal(err)
	}
	web := webServerWith(t, srv.Addr, webConfig{refresh: 200 * time.Millisecond, history: 5 * time.Minute})
	b := startBrowser(t)
	shots := os.Getenv("RELOCK_SCREENSHOT")
	host, _ := os.Hostname()
	holder := fmt.Sprintf("%s pid %d", host, os.Getpid())

	b.open(t, web.URL+"/")
	b.waitFor(t, "the holders by host and pid, updated live", fmt.Sprintf(
		`const t = document.body.innerText; return Number(document.body.dataset.updates || 0) > 0 && t.includes(%q) && t.includes("orders:7") && /^scheduler\s+election\b/m.test(t) && !t.includes("relock_election") && t.includes("workers")`, holder))
	b.run(t, "window.__relockMarker = 1; return true", nil)
	b.screenshot(t, shots, "web.png")

	if err := orders.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	b.waitFor(t, "orders:7 gone after its release", `return !document.body.innerText.includes("orders:7")`)
	var marker bool
	b.run(t, "return window.__relockMarker === 1", &marker)
	if !marker {
		t.Fatal("the page was reloaded to show the release; it should update in place")
	}

	// A fair lock with a waiter that is handed it: the object page charts
	// the waiter and lists the holders that came and went.
	b.open(t, web.URL+"/object?name=reports")
	b.waitFor(t, "three charts and the holder", fmt.Sprintf(
		`return document.querySelectorAll("svg.chart polyline").length === 3 && document.body.innerText.includes(%q)`, holder))
	other := clientOn(t, srv.Addr)
	got := make(chan *relock.Lease, 1)
	go func() {
		l, err := other.FairMutex("reports").Lock(ctx)
		if err != nil {
			t.Error(err)
		}
		got <- l
	}()
	b.waitFor(t, "the waiter", `return document.body.innerText.includes("1 waiting")`)
	if err := reports.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if l := <-got; l == nil {
		t.FailNow()
	}
	b.waitFor(t, "the handover in the events", `const t = document.getElementById("events").innerText; return t.includes("released") && t.includes("acquired")`)
	b.waitFor(t, "a few samples in the charts", `return document.querySelector("svg.chart polyline").getAttribute("points").split(" ").length >= 15`)
	b.screenshot(t, shots, "web-object.png")
}
