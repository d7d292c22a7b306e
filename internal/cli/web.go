package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"net"
	"net/http"
	"time"

	"github.com/redis/go-redis/v9"
)

var webCommand = &command{
	name:    "web",
	summary: "serve a live web view of locks, holders, TTLs and waiters",
	run:     runWeb,
}

const webAbout = `
Serves a page listing the held locks (as ls finds them) with their kind,
TTL, holders and hold counts, the holder's fencing token, and how
many wait for each: the owners queued for a fair lock, else the clients
subscribed to the release channel its waiters listen to. The page
refreshes itself every --refresh; /locks.json serves the same data as JSON,
and ?match=PATTERN narrows both to matching names. /metrics serves gauges
by kind in the Prometheus text format (docs/cli.md). The view only reads:
it never takes, renews or deletes a lock. It listens on localhost by
default; Ctrl-C stops it.`

// webLimit bounds the locks one page shows, and so the calls each refresh
// makes (one per lock, for its waiters).
const webLimit = 500

func runWeb(ctx context.Context, e *env, args []string) int {
	fs := newFlagSet(e, "web", "[flags]", webAbout)
	rf := addRedisFlags(fs)
	listen := fs.String("listen", "127.0.0.1:8080", "serve on this `address`")
	refresh := fs.Duration("refresh", 2*time.Second, "how often the page reloads itself")
	if code, done := parse(fs, args); done {
		return code
	}
	if fs.NArg() > 0 {
		return usageError(e, fs, "unexpected argument %q", fs.Arg(0))
	}
	if *refresh < time.Second {
		return usageError(e, fs, "--refresh must be at least 1s")
	}
	rdb, code := rf.open(ctx, e, fs)
	if rdb == nil {
		return code
	}
	defer rdb.Close()
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return fail(e, fs, err)
	}
	srv := &http.Server{Handler: newWebView(rdb, *refresh), ReadHeaderTimeout: 5 * time.Second}
	fmt.Fprintf(e.stdout, "relock web: serving http://%s/\n", ln.Addr())
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	select {
	case err = <-served:
	case <-ctx.Done():
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		err = srv.Shutdown(sctx)
		cancel()
		<-served
	}
	if err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fail(e, fs, err)
	}
	return exitOK
}

// webView serves the web view.
type webView struct {
	rdb     redis.UniversalClient
	refresh time.Duration
}

func newWebView(rdb redis.UniversalClient, refresh time.Duration) http.Handler {
	v := &webView{rdb: rdb, refresh: refresh}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", v.page)
	mux.HandleFunc("GET /locks.json", v.json)
	mux.HandleFunc("GET /metrics", v.metrics)
	return mux
}

// listing is what one refresh of the web view shows, and what
// `relock ls --json` prints (docs/cli.md).
type listing struct {
	Match     string    `json:"match"`
	Kind      string    `json:"kind,omitempty"` // only objects of this kind, when set`
	Locks     []lockRow `json:"locks"`
	Truncated bool      `json:"truncated,omitempty"`
	At        time.Time `json:"at"`
	Refresh   int       `json:"-"` // seconds
	Kinds     []string  `json:"-"` // the kinds the page offers to filter by
	Err       string    `json:"error,omitempty"`
}

// snapshot reads the locks matching the request's match parameter.
func (v *webView) snapshot(r *http.Request) (*listing, int) {
	q := r.URL.Query()
	p := &listing{Match: q.Get("match"), Kind: q.Get("kind"), At: time.Now(), Refresh: int(v.refresh / time.Second), Kinds: metricKinds}
	if p.Match == "" {
		p.Match = "*"
	}
	ctx, cancel := context.WithTimeout(r.Context(), 10*time.Second)
	defer cancel()
	locks, err := scanLocks(ctx, v.rdb, p.Match)
	if err != nil {
		p.Err = err.Error()
		return p, http.StatusBadGateway
	}
	locks = ofKind(locks, p.Kind)
	if len(locks) > webLimit {
		locks, p.Truncated = locks[:webLimit], true
	}
	if p.Locks, err = rows(ctx, v.rdb, locks); err != nil {
		p.Err = err.Error()
		return p, http.StatusBadGateway
	}
	return p, http.StatusOK
}

func (v *webView) json(w http.ResponseWriter, r *http.Request) {
	p, status := v.snapshot(r)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(p)
}

func (v *webView) page(w http.ResponseWriter, r *http.Request) {
	p, status := v.snapshot(r)
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = pageTemplate.Execute(w, p)
}

var pageTemplate = template.Must(template.New("page").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta http-equiv="refresh" content="{{.Refresh}}">
<title>relock: locks</title>
<style>
body { font: 14px system-ui, sans-serif; margin: 1.5em; color: #222; }
table { border-collapse: collapse; }
th, td { text-align: left; padding: .3em .8em; border-bottom: 1px solid #ddd; vertical-align: top; }
th { background: #f4f4f4; }
td.n { text-align: right; font-variant-numeric: tabular-nums; }
code { font-size: 12px; }
.err { color: #b00; }
</style></head><body>
<h1>relock</h1>
<form method="get"><label>names matching <input name="match" value="{{.Match}}"></label>
<label>kind <select name="kind"><option value="">any</option>{{range .Kinds}}<option{{if eq . $.Kind}} selected{{end}}>{{.}}</option>{{end}}</select></label>
<button>show</button>
<a href="locks.json?match={{.Match}}&amp;kind={{.Kind}}">JSON</a> <a href="metrics">metrics</a></form>
{{if .Err}}<p class="err">cannot read the locks: {{.Err}}</p>{{end}}
<p>{{len .Locks}} held{{if .Truncated}} (the first of more){{end}}, as of {{.At.Format "15:04:05"}}; reloads every {{.Refresh}}s.</p>
{{if .Locks}}<table>
<tr><th>name</th><th>kind</th><th>TTL</th><th>holds</th><th>holders</th><th>token</th><th>waiting clients</th></tr>
{{range .Locks}}<tr><td>{{.Name}}</td><td>{{.Kind}}</td><td class="n">{{.TTL}}</td><td class="n">{{.Holds}}</td><td><code>{{.Owners}}</code></td><td class="n">{{.Token}}</td><td class="n">{{.Waiting}}</td></tr>
{{end}}</table>{{end}}
</body></html>
`))
