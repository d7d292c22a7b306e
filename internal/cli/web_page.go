package cli

import "html/template"

// The web view's pages: plain HTML rendered once, then kept current by a
// small script of their own that reads /events (no library, nothing
// fetched from elsewhere). Without the script the first rendering stays.

// webStyle is shared by both pages.
const webStyle = `<style>
body { font: 14px system-ui, sans-serif; margin: 1.5em; color: #222; }
table { border-collapse: collapse; }
th, td { text-align: left; padding: .3em .8em; border-bottom: 1px solid #ddd; vertical-align: top; }
th { background: #f4f4f4; }
td.n { text-align: right; font-variant-numeric: tabular-nums; }
code { font-size: 12px; }
.err { color: #b00; }
.muted { color: #777; }
svg.chart { background: #fafafa; border: 1px solid #ddd; margin: .3em 0 1em; }
svg.chart polyline { fill: none; stroke: #2a6fdb; stroke-width: 1.5; }
svg.chart text { font: 11px system-ui, sans-serif; fill: #555; }
ul.events { list-style: none; padding: 0; }
ul.events li { padding: .15em 0; }
.ev-expired, .ev-force-unlocked { color: #b00; }
</style>`

var pageTemplate = template.Must(template.New("page").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<title>relock: locks</title>
` + webStyle + `</head><body>
<h1>relock</h1>
<form method="get"><label>names matching <input name="match" value="{{.Match}}"></label>
<label>kind <select name="kind"><option value="">any</option>{{range .Kinds}}<option{{if eq . $.Kind}} selected{{end}}>{{.}}</option>{{end}}</select></label>
<button>show</button>
<a href="locks.json?match={{.Match}}&amp;kind={{.Kind}}">JSON</a> <a href="metrics">metrics</a></form>
<p id="err" class="err">{{if .Err}}cannot read the locks: {{.Err}}{{end}}</p>
<p id="status">{{len .Locks}} objects{{if .Truncated}} (the first of more){{end}}, as of {{.At.Format "15:04:05"}}; live, read every {{.Refresh}}.</p>
<table>
<thead><tr><th>name</th><th>kind</th><th>TTL</th><th>holds</th><th>holders (held for)</th><th>token</th><th>waiting clients</th></tr></thead>
<tbody id="rows">
{{range .Locks}}<tr><td><a href="object?name={{.Name}}{{if eq .Kind "election"}}&amp;kind=election{{end}}">{{.Name}}</a></td><td>{{.Kind}}</td><td class="n">{{.TTL}}</td><td class="n">{{.Holds}}</td><td><code>{{.Owners}}</code></td><td class="n">{{.Token}}</td><td class="n">{{.Waiting}}</td></tr>
{{end}}</tbody></table>
<script>
"use strict";
const rows = document.getElementById("rows"), status = document.getElementById("status"), errp = document.getElementById("err");
function ttl(ms) { return ms < 0 ? (ms === -1 ? "none" : "-") : ms < 1000 ? ms + "ms" : (ms / 1000).toFixed(1) + "s"; }
function age(h) { if (!h.held_for_ms) return ""; return " (" + (h.held_for_at_least ? "≥" : "") + ttl(h.held_for_ms) + ")"; }
function who(h) {
  const c = h.client;
  let s = c ? c.host + " pid " + c.pid + " " + c.program + (c.name ? " (" + c.name + ")" : "") : h.owner;
  if (h.write) s += " (write)";
  if (h.count > 1) s += " ×" + h.count;
  return s + age(h);
}
function cell(tr, text, cls) { const td = document.createElement("td"); td.textContent = text; if (cls) td.className = cls; tr.appendChild(td); return td; }
function render(p) {
  errp.textContent = p.error ? "cannot read the locks: " + p.error : "";
  status.textContent = p.locks.length + " objects" + (p.truncated ? " (the first of more)" : "") + ", as of " + new Date(p.at).toLocaleTimeString() + "; live.";
  const body = document.createElement("tbody");
  body.id = "rows";
  for (const l of p.locks) {
    const tr = document.createElement("tr");
    const a = document.createElement("a");
    a.href = "object?name=" + encodeURIComponent(l.name) + (l.kind === "election" ? "&kind=election" : "");
    a.textContent = l.name;
    cell(tr, "").appendChild(a);
    cell(tr, l.kind);
    cell(tr, l.count !== undefined ? "-" : ttl(l.ttl_ms), "n");
    cell(tr, String(l.holds), "n");
    let holders = l.holders.map(who).join(", ");
    if (l.leader) holders += (holders ? "; " : "") + "leader \"" + l.leader.value + "\", term " + l.leader.term;
    if (l.count !== undefined) holders = (holders ? holders + "; " : "") + "count " + l.count;
    const code = document.createElement("code");
    code.textContent = holders;
    cell(tr, "").appendChild(code);
    cell(tr, l.token || "", "n");
    cell(tr, String(l.waiting_clients), "n");
    body.appendChild(tr);
  }
  document.getElementById("rows").replaceWith(body);
  document.body.dataset.updates = String(Number(document.body.dataset.updates || 0) + 1);
}
const es = new EventSource("events" + location.search);
es.onmessage = e => render(JSON.parse(e.data));
es.onerror = () => { status.textContent += " (disconnected; reconnecting)"; };
</script>
</body></html>
`))

var objectTemplate = template.Must(template.New("object").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<title>relock: {{.Name}}</title>
` + webStyle + `</head><body>
<p><a href="./">all objects</a></p>
<h1 id="name">{{.Name}}{{if .Kind}} <span class="muted">({{.Kind}})</span>{{end}}</h1>
<p id="status" class="muted">waiting for the first sample (read every {{.Refresh}})…</p>
<p id="err" class="err"></p>
<table><thead><tr><th>holder</th><th>owner</th><th>holds</th><th>held for</th></tr></thead><tbody id="holders"></tbody></table>
{{if .Token}}<form id="unlock"><input type="hidden" name="name" value="{{.Name}}">{{if .Kind}}<input type="hidden" name="kind" value="{{.Kind}}">{{end}}<input type="hidden" name="token" value="{{.Token}}">
<p><button>force-unlock</button> <span class="muted">deletes the lock whoever holds it; its holder finds out at its next renewal</span> <span id="unlocked"></span></p></form>{{end}}
<h2>Over the last {{.History}} at most</h2>
<div id="charts"></div>
<h2>Events</h2>
<ul class="events" id="events"><li class="muted">none seen yet</li></ul>
<script>
"use strict";
const name = {{.Name}}, kind = {{.Kind}};
const NS = "http://www.w3.org/2000/svg";
function ttl(ms) { return ms < 0 ? (ms === -1 ? "none" : "-") : ms < 1000 ? ms + "ms" : (ms / 1000).toFixed(1) + "s"; }
function el(tag, attrs, text) { const e = document.createElementNS(NS, tag); for (const k in attrs) e.setAttribute(k, attrs[k]); if (text !== undefined) e.textContent = text; return e; }
function span(ms) { const s = Math.round(ms / 1000); return s < 120 ? s + "s" : Math.round(s / 60) + "min"; }
function chart(title, samples, key, keepS, now) {
  const W = 640, H = 120, L = 40, B = 18, T = 24;
  const svg = el("svg", {class: "chart", width: W, height: H, viewBox: "0 0 " + W + " " + H, "data-series": key});
  let top = 1;
  for (const s of samples) top = Math.max(top, s[key]);
  // The time axis spans the history kept, or less while there is less.
  const from = Math.max(now - keepS * 1000, samples.length ? samples[0].t : now - 1000);
  const x = t => L + (W - L - 6) * (t - from) / Math.max(now - from, 1);
  const y = v => H - B - (H - B - T) * v / top;
  svg.appendChild(el("line", {x1: L, y1: H - B, x2: W - 6, y2: H - B, stroke: "#ccc"}));
  svg.appendChild(el("line", {x1: L, y1: T, x2: W - 6, y2: T, stroke: "#eee"}));
  svg.appendChild(el("text", {x: L, y: 14}, title));
  svg.appendChild(el("text", {x: 4, y: T + 4}, String(Math.round(top * 10) / 10)));
  svg.appendChild(el("text", {x: 4, y: H - B + 4}, "0"));
  svg.appendChild(el("text", {x: L, y: H - 4}, "-" + span(now - from)));
  svg.appendChild(el("text", {x: W - 30, y: H - 4}, "now"));
  const pts = samples.map(s => x(s.t).toFixed(1) + "," + y(s[key]).toFixed(1)).join(" ");
  svg.appendChild(el("polyline", {points: pts}));
  return svg;
}
function render(v) {
  document.getElementById("err").textContent = v.error || "";
  const st = document.getElementById("status");
  st.textContent = (v.row ? v.kind + ", TTL " + ttl(v.row.ttl_ms) + ", " + v.row.holds + " holds, " + v.row.waiting_clients + " waiting" : "not held now") +
    (v.row && v.row.leader ? "; leader \"" + v.row.leader.value + "\", term " + v.row.leader.term : "") +
    (v.row && v.row.token ? "; token " + v.row.token : "") + " — as of " + new Date(v.at).toLocaleTimeString() + ", live";
  const hb = document.createElement("tbody");
  hb.id = "holders";
  for (const h of (v.row ? v.row.holders : [])) {
    const tr = document.createElement("tr");
    const c = h.client;
    for (const t of [c ? c.host + " pid " + c.pid + " " + c.program + (c.name ? " (" + c.name + ")" : "") : "unknown client", h.owner + (h.write ? " (write)" : ""), String(h.count),
      h.held_for_ms ? (h.held_for_at_least ? "at least " : "") + ttl(h.held_for_ms) : ""]) {
      const td = document.createElement("td"); td.textContent = t; tr.appendChild(td);
    }
    hb.appendChild(tr);
  }
  document.getElementById("holders").replaceWith(hb);
  const charts = document.getElementById("charts");
  charts.replaceChildren(
    chart("holds", v.samples, "holds", v.keep_s, v.at),
    chart("waiting clients", v.samples, "waiting", v.keep_s, v.at),
    chart("oldest hold, seconds", v.samples, "age_s", v.keep_s, v.at));
  const ul = document.getElementById("events");
  ul.replaceChildren();
  for (const e of v.events.slice().reverse()) {
    const li = document.createElement("li");
    li.className = "ev-" + e.kind;
    li.textContent = new Date(e.at).toLocaleTimeString() + "  " + e.kind + "  " + e.detail;
    ul.appendChild(li);
  }
  if (!v.events.length) { const li = document.createElement("li"); li.className = "muted"; li.textContent = "none seen yet"; ul.appendChild(li); }
  document.body.dataset.updates = String(Number(document.body.dataset.updates || 0) + 1);
}
const es = new EventSource("events?object=" + encodeURIComponent(name) + (kind ? "&kind=" + encodeURIComponent(kind) : ""));
es.onmessage = e => render(JSON.parse(e.data));
const form = document.getElementById("unlock");
if (form) form.onsubmit = async ev => {
  ev.preventDefault();
  if (!confirm("Force-unlock " + name + "? Its holder goes on until its next renewal.")) return;
  const r = await fetch("unlock", {method: "POST", body: new URLSearchParams(new FormData(form))});
  document.getElementById("unlocked").textContent = r.ok ? ((await r.json()).held ? "force-unlocked" : "was not held") : "refused: " + await r.text();
};
</script>
</body></html>
`))
