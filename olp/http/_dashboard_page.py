"""The dashboard's two pages, self-contained (inline CSS and JavaScript, the chart drawn as
SVG): nothing is fetched from anywhere but this proxy, so it works offline."""

# ruff: noqa: E501  (the page's CSS and JavaScript keep their own line lengths)

from __future__ import annotations

from typing import Final

_STYLE: Final = """
:root { --bg:#f6f7f9; --card:#fff; --ink:#1d2430; --mute:#687385; --ok:#1a7f37;
  --warn:#b35900; --bad:#c62828; --line:#e3e6ea; --accent:#3558d4; }
* { box-sizing: border-box; }
body { margin:0; font:15px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;
  background:var(--bg); color:var(--ink); }
header { display:flex; justify-content:space-between; align-items:center; padding:12px 16px;
  background:var(--ink); color:#fff; }
header h1 { font-size:18px; margin:0; }
main { display:grid; gap:14px; padding:14px; grid-template-columns:repeat(auto-fit,minmax(330px,1fr)); }
section { background:var(--card); border:1px solid var(--line); border-radius:10px; padding:12px 14px;
  overflow-x:auto; }
section h2 { font-size:15px; margin:0 0 8px; }
section.wide { grid-column:1 / -1; }
table { border-collapse:collapse; width:100%; font-size:13px; }
th,td { text-align:left; padding:4px 6px; border-bottom:1px solid var(--line); vertical-align:top; }
th { color:var(--mute); font-weight:600; }
.ok { color:var(--ok); } .warn { color:var(--warn); } .bad { color:var(--bad); }
.mute { color:var(--mute); font-size:12px; }
.num { white-space:nowrap; }
button { font:inherit; font-size:13px; border:1px solid var(--accent); color:var(--accent);
  background:#fff; border-radius:6px; padding:3px 9px; cursor:pointer; }
button.danger { border-color:var(--bad); color:var(--bad); }
.big { font-size:28px; font-weight:700; }
#flash { min-height:1.2em; }
form.login { max-width:360px; margin:12vh auto; background:var(--card); padding:24px;
  border-radius:12px; border:1px solid var(--line); }
form.login input { width:100%; font:inherit; padding:8px; margin:8px 0 12px; border:1px solid
  var(--line); border-radius:6px; }
form.login button { width:100%; padding:8px; }
"""

LOGIN_PAGE: Final = """<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<link rel="icon" href="data:,"><title>OLP dashboard — log in</title><style>""" + _STYLE + """</style></head>
<body><form class="login" method="post" action="/dashboard/login">
<h1>OLP dashboard</h1>
<label for="key">Owner key</label>
<input id="key" name="key" type="password" autocomplete="current-password" required autofocus>
<button type="submit">Log in</button>
<p class="bad" id="error">{{error}}</p>
<p class="mute">Only the owner's key opens the dashboard. It is sent once, in this form's body,
and never appears in a URL; the session cookie lasts 12 hours.</p>
</form></body></html>
"""

PAGE: Final = """<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<link rel="icon" href="data:,"><title>OLP dashboard</title><style>""" + _STYLE + """</style></head>
<body>
<header><h1>OLP <span id="version" class="mute"></span></h1>
<span><span id="updated" class="mute"></span>
<button id="logout" type="button">Log out</button></span></header>
<p id="flash" class="mute" style="padding:0 16px"></p>
<main>
<section id="providers" class="wide"><h2>Providers</h2><table><thead><tr><th>provider</th><th>state</th>
<th>in flight</th><th>warm</th><th>credentials</th><th>tier</th></tr></thead><tbody></tbody>
</table>
<p><button id="reset-cooldowns" type="button">Reset cooldowns and circuits</button></p></section>
<section id="quota"><h2>Quota and resets</h2><table><thead><tr><th>provider</th><th>state</th>
<th>windows</th><th>next reset</th></tr></thead><tbody></tbody></table>
<p class="mute" id="soonest"></p></section>
<section id="chains"><h2>Chains</h2><table><thead><tr><th>chain</th><th>entries</th></tr>
</thead><tbody></tbody></table></section>
<section id="cache"><h2>Cache</h2><div class="big" id="hit-rate">–</div>
<p class="mute" id="cache-detail"></p></section>
<section id="prompt-cache"><h2>Prompt cache today, per provider</h2><table><thead><tr>
<th>provider</th><th>input tokens</th><th>cached</th><th>reuse</th></tr></thead><tbody></tbody>
</table><p class="mute">Of each provider's input tokens today (every key), the share its vendor
read from its prompt cache.</p></section>
<section id="usage" class="wide"><h2>Usage today, per key</h2><table><thead><tr><th>key</th><th>tier</th>
<th>requests</th><th>tokens</th><th>cached</th><th></th></tr></thead><tbody></tbody></table>
<h2 style="margin-top:12px">Last 30 days</h2><div id="trend"></div></section>
<section id="recent" class="wide"><h2>Recent requests and fallbacks</h2><table><thead><tr><th>time</th>
<th>key</th><th>model</th><th>served by</th><th>status</th><th>ms</th></tr></thead><tbody>
</tbody></table></section>
</main>
<script>
const CSRF = "{{csrf}}";
const $ = (sel) => document.querySelector(sel);
const esc = (v) => String(v ?? "").replace(/[&<>"']/g, (c) => ({"&":"&amp;","<":"&lt;",
  ">":"&gt;",'"':"&quot;","'":"&#39;"}[c]));
let state = null;
function left(ts) {
  if (!ts) return "–";
  let s = Math.max(0, Math.round(ts - Date.now() / 1000));
  const h = Math.floor(s / 3600), m = Math.floor((s % 3600) / 60); s = s % 60;
  return h ? `${h}h ${m}m` : m ? `${m}m ${s}s` : `${s}s`;
}
const num = (n) => Number(n || 0).toLocaleString("en-US");
const share = (part, whole) => whole ? Math.round(100 * part / whole) + " %" : "–";
function reuse(cached, prompt) {  // "12,345 (62 %)": cached input tokens, share of the prompt
  return `<span class="num">${esc(num(cached))}` + (prompt ? ` (${esc(share(cached, prompt))})` : "") + "</span>";
}
function row(cells) { return "<tr>" + cells.map((c) => `<td>${c}</td>`).join("") + "</tr>"; }
function warmCell(w) {
  if (!w) return '<span class="mute">off</span>';
  const mb = Math.round(w.memory_bytes / 1048576);
  return `${w.warm}/${w.size} warm` + (w.booting ? ` · ${w.booting} starting` : "") +
    `<div class="mute">${w.hits} hits · ${w.misses} misses · ${mb} MB</div>`;
}

// a provider's login (issue #30): the provider, then the account on a line of its own
// when the provider has several (`multi`: the providers with an account besides default)
function slotName(name, multi) {
  const at = name.indexOf("@");
  if (at < 0) return `<b>${esc(name)}</b>` + (multi.has(name) ? '<div class="mute">account default</div>' : "");
  return `<b>${esc(name.slice(0, at))}</b><div class="mute">account ${esc(name.slice(at + 1))}</div>`;
}
function multiLogin(names) {
  return new Set(names.filter((n) => n.includes("@")).map((n) => n.slice(0, n.indexOf("@"))));
}
function render() {
  if (!state) return;
  $("#version").textContent = "v" + state.version + " · up " + left(Date.now() / 1000 + state.uptime_s);
  $("#updated").textContent = "updated " + new Date().toLocaleTimeString();
  $("#providers tbody").innerHTML = Object.entries(state.providers).map(([name, p]) => {
    let st = p.running ? '<span class="ok">ready</span>' : `<span class="bad">not running</span>`;
    for (const c of p.cooling || []) st = `<span class="warn">cooling ${esc(c.reason)} · ${left(c.until)}</span>`;
    if (p.circuit_open) st = '<span class="bad">circuit open</span>';
    const lk = p.lockdown;
    if (lk && lk.state === "failed") st = `<span class="bad lockdown">lockdown ${esc(lk.line)}</span>`;
    else if (lk && lk.state === "pending") st = '<span class="warn lockdown">lockdown being checked</span>';
    else if (lk && lk.state === "off") st += '<div class="warn lockdown">lockdown not checked</div>';
    else if (lk && lk.state === "verified") st += `<div class="mute lockdown">lockdown ${esc(lk.line)}</div>`;
    const lg = p.login;  // a login OLP keeps fresh (issue #41)
    if (lg && lg.state === "expired") st = `<span class="bad login">login expired</span><div class="login">${esc(lg.problem)}</div>`;
    else if (lg && lg.state === "failing") st += `<div class="warn login">login refresh failing: ${esc(lg.problem)}</div>`;
    else if (lg) st += `<div class="mute login">login ok${lg.expires_in_s == null ? "" : " · token ends in " + left(Date.now() / 1000 + lg.expires_in_s)}</div>`;
    const problems = (p.problems || []).filter((x) => !lg || x !== lg.problem).map(esc).join("; ");
    return row([`${slotName(name, multiLogin(Object.keys(state.providers)))}<div class="mute">${esc((p.binary || "").split("/").pop())} ${esc(p.version || "")}</div>`,
      st + (problems ? `<div class="mute">${problems}</div>` : ""),
      p.running ? `${p.in_flight}/${p.max_concurrent}` : "–",
      warmCell(p.warm),
      p.credentials ? (p.metered ? "metered" : "subscription") : '<span class="bad">none</span>',
      esc(p.risk_tier || "")]);
  }).join("");
  const q = state.quota;
  $("#quota tbody").innerHTML = Object.entries(q.providers).map(([name, p]) => {
    const win = Object.entries(p.reported).map(([w, r]) => `${esc(w)}: ${esc(r.status)}` +
      (r.utilization != null ? ` ${Math.round(r.utilization * 100)}%` : "")).join("<br>") ||
      `<span class="mute">OLP: ${p.ledger.five_hour.requests} in 5 h, ${p.ledger.day.requests} today</span>`;
    const cls = p.state === "ok" ? "ok" : p.state === "unavailable" ? "bad" : "warn";
    return row([slotName(name, multiLogin(Object.keys(q.providers))), `<span class="${cls}">${esc(p.state)}</span>`, win, left(p.next_reset)]);
  }).join("");
  $("#soonest").textContent = q.soonest_reset ? "Soonest reset in " + left(q.soonest_reset) : "";
  $("#chains tbody").innerHTML = Object.entries(state.chains).map(([name, c]) => row([
    `<b>${esc(name)}</b>` + (c.usable ? "" : ' <span class="bad">unusable</span>'),
    (c.hops || []).map(esc).join(" → ") +
    (c.pruned || []).map((w) => `<div class="mute">pruned: ${esc(w)}</div>`).join("")])).join("");
  const cache = state.cache;
  if (cache.enabled) {
    const asked = cache.hits + cache.misses;
    $("#hit-rate").textContent = asked ? Math.round(100 * cache.hits / asked) + "%" : "–";
    $("#cache-detail").textContent = `${cache.hits} hits, ${cache.misses} misses, ${cache.entries} entries`;
  } else { $("#hit-rate").textContent = "off"; }
  $("#prompt-cache tbody").innerHTML = Object.entries(state.prompt_cache || {}).map(([name, p]) =>
    row([esc(name), ...(p.requests ? [esc(num(p.prompt_tokens)), esc(num(p.cached_tokens)),
      `<span class="num">${esc(share(p.cached_tokens, p.prompt_tokens))}</span>`] : ["–", "–", "–"])])).join("");
  $("#usage tbody").innerHTML = state.keys.map((k) => row([esc(k.name), esc(k.tier),
    esc(num(k.today.requests)), esc(num(k.today.tokens)), reuse(k.today.cached_tokens, k.today.prompt_tokens),
    `<button data-act="clear_cache" data-key="${k.id}" type="button">clear cache</button> ` +
    (k.tier === "owner" ? "" : `<button class="danger" data-act="revoke_key" data-key="${esc(k.name)}" type="button">revoke</button>`)
  ])).join("");
  drawTrend(state.trend);
  $("#recent tbody").innerHTML = state.recent.map((r) => row([
    new Date(r.at * 1000).toLocaleTimeString(), esc(r.key_name || "–"), esc(r.requested_model || r.endpoint),
    r.provider ? esc(r.provider + "/" + r.model) + (r.hops > 1 ? ` <span class="warn">(${r.hops} hops)</span>` : "") : "–",
    `<span class="${r.status < 400 ? "ok" : "bad"}">${r.status}</span> <span class="mute">${esc(r.outcome)}</span>`,
    r.latency_ms])).join("");
}
function drawTrend(days) {
  const max = Math.max(1, ...days.map((d) => d.requests)), w = 10, h = 80;
  const bars = days.map((d, i) => {
    const bh = Math.round((d.requests / max) * (h - 14));
    return `<rect x="${i * w}" y="${h - bh}" width="${w - 2}" height="${bh}" fill="#3558d4"><title>${esc(d.day)}: ${d.requests} requests, ${d.tokens} tokens</title></rect>`;
  }).join("");
  $("#trend").innerHTML = `<svg viewBox="0 0 ${days.length * w} ${h}" width="100%" height="${h}" role="img" aria-label="requests per day">${bars}</svg>` +
    `<div class="mute">${days.length ? esc(days[0].day) + " … " + esc(days[days.length - 1].day) : ""} · peak ${max} requests</div>`;
}
async function refresh() {
  const resp = await fetch("/dashboard/api/state", {credentials: "same-origin"});
  if (resp.status === 401) { location.reload(); return; }
  state = await resp.json(); render();
}
async function act(action, extra) {
  const resp = await fetch("/dashboard/api/action", {method: "POST", credentials: "same-origin",
    headers: {"Content-Type": "application/json", "X-CSRF-Token": CSRF},
    body: JSON.stringify({action, ...extra})});
  const body = await resp.json();
  $("#flash").textContent = resp.ok ? body.message : "Refused: " + (body.error ? body.error.message : resp.status);
  await refresh();
}
document.addEventListener("click", (ev) => {
  const b = ev.target.closest("button[data-act]");
  if (!b) return;
  if (b.dataset.act === "revoke_key" && !confirm("Revoke the key " + b.dataset.key + "?")) return;
  act(b.dataset.act, {key: b.dataset.key});
});
$("#reset-cooldowns").addEventListener("click", () => act("reset_cooldowns", {}));
$("#logout").addEventListener("click", async () => {
  await fetch("/dashboard/logout", {method: "POST", headers: {"X-CSRF-Token": CSRF}});
  location.reload();
});
refresh(); setInterval(refresh, 5000); setInterval(render, 1000);
</script></body></html>
"""
