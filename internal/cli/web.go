package cli

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/relock-go/relock"
)

var webCommand = &command{
	name:    "web",
	summary: "serve a live web view of locks, holders, TTLs and waiters",
	run:     runWeb,
}

const webAbout = `
Serves a live page of every lock and synchronizer (as ls finds them) with
its kind, TTL, holders by host, process and program, how long each hold
has been seen, the holder's fencing token, and how many wait. The page
updates itself in place (server-sent events from /events), and each object
has a page of its own with charts of its holds, waiters and oldest hold
over the last --history, and its events: holders that came and went, locks
that expired instead of being released, force-unlocks. One sampler reads
Redis once per --refresh whoever looks. /locks.json serves the listing as
JSON, and ?match=PATTERN and ?kind=KIND narrow the page and the JSON.
/metrics serves gauges by kind in the Prometheus text format (docs/cli.md).

The view only reads, unless started with --allow-force-unlock: object pages
then offer a force-unlock button (a POST from the page itself, checked
against a token the page carries). It listens on localhost by default;
Ctrl-C stops it.`

// webLimit bounds the objects one sample reads, and so the calls each
// refresh makes (one per lock, for its waiters).
const webLimit = 500

func runWeb(ctx context.Context, e *env, args []string) int {
	fs := newFlagSet(e, "web", "[flags]", webAbout)
	rf := addRedisFlags(fs)
	listen := fs.String("listen", "127.0.0.1:8080", "serve on this `address`")
	refresh := fs.Duration("refresh", 2*time.Second, "how often the view reads Redis")
	history := fs.Duration("history", 15*time.Minute, "how much history object pages keep and chart")
	allowUnlock := fs.Bool("allow-force-unlock", false, "offer a force-unlock button on object pages")
	if code, done := parse(e, fs, args); done {
		return code
	}
	if fs.NArg() > 0 {
		return usageError(e, fs, "unexpected argument %q", fs.Arg(0))
	}
	if *refresh < 100*time.Millisecond {
		return usageError(e, fs, "--refresh must be at least 100ms")
	}
	if *history < *refresh || *history > 24*time.Hour {
		return usageError(e, fs, "--history must be between --refresh and 24h")
	}
	rdb, code := rf.open(ctx, e, fs)
	if rdb == nil {
		return code
	}
	defer rdb.Close()
	cfg := webConfig{refresh: *refresh, history: *history}
	if *allowUnlock {
		c, err := relock.New(rdb, relock.WithClientName("relock web"))
		if err != nil {
			return fail(e, fs, err)
		}
		defer c.Close()
		cfg.unlocker = c
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return fail(e, fs, err)
	}
	view := newWebView(rdb, cfg)
	defer view.Close()
	fmt.Fprintf(e.stdout, "relock web: serving http://%s/\n", ln.Addr())
	if err := serve(ctx, ln, view); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fail(e, fs, err)
	}
	return exitOK
}

// serve serves view on ln until the server fails or ctx ends; when ctx
// ends it closes view, shuts the server down within 5s, and returns what
// Shutdown returned.
func serve(ctx context.Context, ln net.Listener, view *webView) error {
	srv := &http.Server{Handler: view, ReadHeaderTimeout: 5 * time.Second}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	select {
	case err := <-served:
		return err
	case <-ctx.Done():
		view.Close() // ends the event streams, which Shutdown would wait for
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		err := srv.Shutdown(sctx)
		cancel()
		<-served
		return err
	}
}

// webConfig configures a web view.
type webConfig struct {
	refresh, history time.Duration
	unlocker         *relock.Client // force-unlocks from the page; nil: read-only
}

// webView serves the web view. Close stops its sampler and ends its event
// streams.
type webView struct {
	http.Handler
	rdb   redis.UniversalClient
	cfg   webConfig
	s     *sampler
	token string // carried by the page, required by a force-unlock

	stop context.CancelFunc
	done chan struct{} // closed when the sampler has stopped
	once sync.Once
}

func newWebView(rdb redis.UniversalClient, cfg webConfig) *webView {
	var b [16]byte
	_, _ = rand.Read(b[:])
	v := &webView{rdb: rdb, cfg: cfg, s: newSampler(rdb, cfg.refresh, cfg.history), token: hex.EncodeToString(b[:]), done: make(chan struct{})}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", v.page)
	mux.HandleFunc("GET /object", v.objectPage)
	mux.HandleFunc("GET /events", v.events)
	mux.HandleFunc("GET /locks.json", v.json)
	mux.HandleFunc("GET /metrics", v.metrics)
	mux.HandleFunc("POST /unlock", v.unlock)
	v.Handler = mux
	ctx, stop := context.WithCancel(context.Background())
	v.stop = stop
	go func() {
		defer close(v.done)
		v.s.run(ctx)
	}()
	return v
}

// Close stops the sampler, which ends every event stream, and waits for it.
func (v *webView) Close() {
	v.once.Do(func() {
		v.stop()
		<-v.done
	})
}

// listing is what one refresh of the web view shows, and what
// `relock ls --json` prints (docs/cli.md).
type listing struct {
	Match     string    `json:"match"`
	Kind      string    `json:"kind,omitempty"` // only objects of this kind, when set
	Locks     []lockRow `json:"locks"`
	Truncated bool      `json:"truncated,omitempty"`
	At        time.Time `json:"at"`
	Err       string    `json:"error,omitempty"`
}

// filter returns the part of p the request's match and kind select.
func filter(p *listing, r *http.Request) *listing {
	q := r.URL.Query()
	out := &listing{Match: q.Get("match"), Kind: q.Get("kind"), At: p.At, Truncated: p.Truncated, Err: p.Err, Locks: []lockRow{}}
	if out.Match == "" {
		out.Match = "*"
	}
	for _, l := range p.Locks {
		if globMatch(out.Match, l.Name) && (out.Kind == "" || l.Kind == out.Kind) {
			out.Locks = append(out.Locks, l)
		}
	}
	return out
}

// snapshot reads the objects matching the request's match and kind now,
// with the hold ages the sampler knows.
func (v *webView) snapshot(r *http.Request) (*listing, int) {
	q := r.URL.Query()
	p := &listing{Match: q.Get("match"), Kind: q.Get("kind"), At: time.Now()}
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
	v.s.annotateRows(p.Locks)
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

// events streams server-sent events: the listing the request's match and
// kind select, or with ?object=NAME that object's view, at every sample
// that changes it.
func (v *webView) events(w http.ResponseWriter, r *http.Request) {
	flusher, ok := w.(http.Flusher)
	if !ok {
		http.Error(w, "streaming unsupported", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	flusher.Flush()
	object, isObject := r.URL.Query()["object"]
	election := r.URL.Query().Get("kind") == kindElection
	var last []byte
	for {
		p, next := v.s.current()
		if p != nil {
			var msg any = filter(p, r)
			if isObject {
				msg = v.s.object(objectID{object[0], election})
			}
			b, err := json.Marshal(msg)
			if err == nil && !bytes.Equal(b, last) {
				if _, err := fmt.Fprintf(w, "data: %s\n\n", b); err != nil {
					return
				}
				flusher.Flush()
				last = b
			}
		}
		select {
		case <-next:
		case <-r.Context().Done():
			return
		case <-v.done:
			return
		}
	}
}

// unlock force-unlocks an object from its page, when the view allows it.
func (v *webView) unlock(w http.ResponseWriter, r *http.Request) {
	if v.cfg.unlocker == nil {
		http.Error(w, "this view is read-only: start relock web with --allow-force-unlock", http.StatusForbidden)
		return
	}
	if site := r.Header.Get("Sec-Fetch-Site"); site != "" && site != "same-origin" {
		http.Error(w, "cross-site request refused", http.StatusForbidden)
		return
	}
	if subtle.ConstantTimeCompare([]byte(r.FormValue("token")), []byte(v.token)) != 1 {
		http.Error(w, "missing or wrong token: force-unlock from the object's page", http.StatusForbidden)
		return
	}
	name := r.FormValue("name")
	if name == "" {
		http.Error(w, "no name", http.StatusBadRequest)
		return
	}
	if r.FormValue("kind") == kindElection {
		name = electionKey(name)
	}
	ctx, cancel := context.WithTimeout(r.Context(), 10*time.Second)
	defer cancel()
	key, kind, held, err := forceUnlock(ctx, v.cfg.unlocker, v.rdb, name)
	if errors.Is(err, errNotALock) || errors.Is(err, relock.ErrWrongType) {
		http.Error(w, err.Error(), http.StatusConflict)
		return
	}
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	v.s.forced(key, kind, held)
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"name": label(key), "kind": kind, "held": held})
}

func (v *webView) page(w http.ResponseWriter, r *http.Request) {
	p, status := v.snapshot(r)
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = pageTemplate.Execute(w, pageData{listing: p, Kinds: metricKinds, Refresh: v.cfg.refresh.String()})
}

func (v *webView) objectPage(w http.ResponseWriter, r *http.Request) {
	name := r.URL.Query().Get("name")
	if name == "" {
		http.Redirect(w, r, "./", http.StatusSeeOther)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	d := objectData{Name: name, History: v.cfg.history.String(), Refresh: v.cfg.refresh.String()}
	if r.URL.Query().Get("kind") == kindElection {
		d.Kind = kindElection
	}
	if v.cfg.unlocker != nil {
		d.Token = v.token
	}
	_ = objectTemplate.Execute(w, d)
}

// pageData is what the main page's template is given.
type pageData struct {
	*listing
	Kinds   []string
	Refresh string
}

// objectData is what an object page's template is given.
type objectData struct {
	Name, History, Refresh string
	Kind                   string // "election" for an election's page, else ""
	Token                  string // set when the page may force-unlock
}

// globMatch reports whether s matches the Redis glob pattern (as SCAN's
// MATCH): * and ? over any byte, [abc], [^a-z] and \ escapes.
func globMatch(pattern, s string) bool {
	for len(pattern) > 0 {
		switch pattern[0] {
		case '*':
			for i := len(s); i >= 0; i-- {
				if globMatch(pattern[1:], s[i:]) {
					return true
				}
			}
			return false
		case '?':
			if s == "" {
				return false
			}
			pattern, s = pattern[1:], s[1:]
			continue
		case '[':
			end := strings.IndexByte(pattern[1:], ']')
			if end < 0 || s == "" {
				return pattern == s
			}
			class, negate := pattern[1:1+end], false
			if strings.HasPrefix(class, "^") {
				class, negate = class[1:], true
			}
			in := false
			for i := 0; i < len(class); i++ {
				if i+2 < len(class) && class[i+1] == '-' {
					in = in || class[i] <= s[0] && s[0] <= class[i+2]
					i += 2
					continue
				}
				in = in || class[i] == s[0]
			}
			if in == negate {
				return false
			}
			pattern, s = pattern[end+2:], s[1:]
			continue
		case '\\':
			if len(pattern) > 1 {
				pattern = pattern[1:]
			}
		}
		if s == "" || pattern[0] != s[0] {
			return false
		}
		pattern, s = pattern[1:], s[1:]
	}
	return s == ""
}
