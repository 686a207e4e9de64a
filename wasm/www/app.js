// The playground's page: editor, diagnostics, queries and decisions. All
// policy work happens in the engine, in a Web Worker (worker.js). The
// engine (www/pkg) and the examples (www/examples.js) are what
// wasm/build.sh makes: when either is missing the page says so.
let EXAMPLES = [];

const $ = (id) => document.getElementById(id);
const source = $("source"), highlight = $("highlight"), queries = $("queries");
const diagList = $("diagnostics"), results = $("results").querySelector("tbody");
const policySelect = $("policy"), status = $("status");

// A page that cannot work says why, and what to run; it never stays at
// "loading…".
const UNBUILT = "run `wasm/build.sh --serve` (it builds www/pkg and www/examples.js, then serves the page)";
function fail(what) {
  status.textContent = `${what}: ${UNBUILT}`;
  status.dataset.state = "errors";
  document.body.dataset.failed = "true";
  results.innerHTML = `<tr><td colspan="4">${escapeHtml(what)}</td></tr>`;
}

const worker = new Worker("worker.js", { type: "module" });
let nextId = 0;
const pending = new Map();
worker.onmessage = ({ data }) => {
  if (data.fatal) { fail(data.fatal); return; }
  pending.get(data.id)?.(data.result); pending.delete(data.id);
};
worker.onerror = (e) => { e.preventDefault?.(); fail("the engine did not load"); };
const ask = (msg) => new Promise((resolve) => { const id = nextId++; pending.set(id, resolve); worker.postMessage({ id, ...msg }); });

const DEFAULT_QUERIES = "connect github.com:443\nconnect 169.254.169.254:80\ndns exfil.attacker.example\nexec git push";
const KEYWORDS = new Set(("policy requirements test network proxy permissions apps sandbox approvals reviewer web_search mcp " +
  "commands guardian log default dns local allow deny prompt forbid domain ip cidr socket port socks5 socks5_udp upstream listen " +
  "writable protect server tool because risk category command path host authorize with mask expect off on unrestricted " +
  "granular").split(" "));

let diagnostics = [];
let ruleLine = null;

const escapeHtml = (s) => s.replace(/[&<>"]/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;" })[c]);

// Syntax colours for one line (comments, strings, keywords, numbers).
function colour(line) {
  let out = "";
  const re = /(#.*$)|(r?"(?:[^"\\]|\\.)*"?)|([A-Za-z_][A-Za-z0-9_.\-]*)|(\d[\d.\/:,\-]*)|([^#"A-Za-z_\d]+)/g;
  for (const m of line.matchAll(re)) {
    const [t, com, str, word, num] = m;
    if (com) out += `<span class="com">${escapeHtml(t)}</span>`;
    else if (str) out += `<span class="str">${escapeHtml(t)}</span>`;
    else if (word && KEYWORDS.has(word)) out += `<span class="kw">${escapeHtml(t)}</span>`;
    else if (num) out += `<span class="num">${escapeHtml(t)}</span>`;
    else out += escapeHtml(t);
  }
  return out;
}

// The highlighted text, with each diagnostic's exact span underlined.
function render() {
  const text = source.value;
  const marks = diagnostics
    .map((d) => ({ start: d.start, end: Math.max(d.end, d.start + 1), cls: d.severity === "error" ? "diag-error" : "diag-warning", d }))
    .filter((m) => m.start <= text.length)
    .sort((a, b) => a.start - b.start);
  // Cut the text at mark boundaries (byte offsets → UTF-16 indices).
  const enc = new TextEncoder();
  const toIndex = (byte) => { let b = 0, i = 0; for (const ch of text) { if (b >= byte) break; b += enc.encode(ch).length; i += ch.length; } return i; };
  let html = "", at = 0;
  const lines = (s) => s.split("\n").map(colour).join("\n");
  for (const m of marks) {
    const s = toIndex(m.start), e = Math.max(toIndex(m.end), s + 1);
    if (s < at) continue;
    html += lines(text.slice(at, s));
    html += `<span class="${m.cls}" data-diag="${diagnostics.indexOf(m.d)}">${escapeHtml(text.slice(s, e)) || " "}</span>`;
    at = e;
  }
  html += lines(text.slice(at));
  if (ruleLine !== null) {
    const rows = html.split("\n");
    if (rows[ruleLine - 1] !== undefined) rows[ruleLine - 1] = `<span class="rule-hl">${rows[ruleLine - 1] || " "}</span>`;
    html = rows.join("\n");
  }
  highlight.innerHTML = html + "\n";
  highlight.scrollTop = source.scrollTop;
  highlight.scrollLeft = source.scrollLeft;
}

function showDiagnostics() {
  diagList.innerHTML = "";
  for (const d of diagnostics) {
    const li = document.createElement("li");
    li.className = d.severity;
    li.dataset.line = d.line;
    li.title = d.help || "";
    li.innerHTML = `<strong>${d.severity}</strong> line ${d.line}, column ${d.column}: ${escapeHtml(d.message)}` +
      (d.help ? `<span class="help">help: ${escapeHtml(d.help)}</span>` : "");
    li.onclick = () => selectLine(d.line);
    diagList.appendChild(li);
  }
}

function selectLine(line) {
  const starts = [0];
  for (let i = 0; i < source.value.length; i++) if (source.value[i] === "\n") starts.push(i + 1);
  const s = starts[line - 1] ?? 0, e = (starts[line] ?? source.value.length + 1) - 1;
  source.focus();
  source.setSelectionRange(s, e);
  const lineHeight = parseFloat(getComputedStyle(source).lineHeight) || 19.5;
  source.scrollTop = Math.max(0, (line - 4) * lineHeight);
  render();
}

// Hover help: which diagnostic lies under the pointer.
source.addEventListener("mousemove", (ev) => {
  const r = source.getBoundingClientRect();
  const style = getComputedStyle(source);
  const lh = parseFloat(style.lineHeight) || 19.5;
  const probe = document.createElement("span");
  probe.style.font = style.font; probe.style.position = "absolute"; probe.style.visibility = "hidden"; probe.textContent = "M".repeat(10);
  document.body.appendChild(probe);
  const cw = probe.getBoundingClientRect().width / 10;
  probe.remove();
  const line = Math.floor((ev.clientY - r.top - parseFloat(style.paddingTop) + source.scrollTop) / lh) + 1;
  const col = Math.floor((ev.clientX - r.left - parseFloat(style.paddingLeft) + source.scrollLeft) / cw) + 1;
  const d = diagnostics.find((d) => line >= d.line && line <= d.end_line && (line > d.line || col >= d.column) && (line < d.end_line || col <= Math.max(d.end_column, d.column + 1)));
  source.title = d ? `${d.message}${d.help ? "\nhelp: " + d.help : ""}` : "";
});

let checkTimer = null;
async function checkNow() {
  const text = source.value;
  const res = await ask({ op: "check", source: text });
  if (text !== source.value) return; // typed on meanwhile
  diagnostics = res.diagnostics || [];
  const errors = diagnostics.filter((d) => d.severity === "error").length;
  status.textContent = errors ? `${errors} error${errors > 1 ? "s" : ""}` : diagnostics.length ? `${diagnostics.length} warning(s)` : "ok";
  status.dataset.state = errors ? "errors" : "ok";
  const keep = policySelect.value;
  policySelect.innerHTML = (res.policies || []).map((p) => `<option>${escapeHtml(p)}</option>`).join("");
  if ((res.policies || []).includes(keep)) policySelect.value = keep;
  showDiagnostics();
  render();
  if (errors) {
    results.innerHTML = `<tr><td colspan="4">fix the errors to see decisions</td></tr>`;
  } else {
    await run();
  }
}

async function run() {
  const res = await ask({ op: "evaluate", source: source.value, policy: policySelect.value, queries: queries.value });
  results.innerHTML = "";
  if (!Array.isArray(res)) return;
  const lines = queries.value.split("\n").map((l) => l.trim()).filter((l) => l && !l.startsWith("#"));
  res.forEach((d, i) => {
    const tr = document.createElement("tr");
    const rule = d.rule ? `${d.rule.line}:${d.rule.column} ${d.rule.source}` : "—";
    const decision = d.error ? "error" : d.decision;
    tr.innerHTML = `<td>${escapeHtml(lines[i] || "")}</td><td class="d-${decision}">${escapeHtml(decision)}</td>` +
      `<td>${escapeHtml(d.error || d.reason)}${d.escalation ? ` (escalation: ${d.escalation})` : ""}${d.status ? ` (${d.status})` : ""}</td><td>${escapeHtml(rule)}</td>`;
    if (d.rule) tr.onclick = () => { ruleLine = d.rule.line; selectLine(d.rule.line); };
    results.appendChild(tr);
  });
}

const schedule = () => { clearTimeout(checkTimer); checkTimer = setTimeout(checkNow, 150); };
source.addEventListener("input", () => { ruleLine = null; render(); schedule(); });
source.addEventListener("scroll", () => { highlight.scrollTop = source.scrollTop; highlight.scrollLeft = source.scrollLeft; });
source.addEventListener("keydown", (e) => {
  if (e.key === "Tab") { e.preventDefault(); source.setRangeText("  ", source.selectionStart, source.selectionEnd, "end"); render(); schedule(); }
});
queries.addEventListener("input", () => { clearTimeout(checkTimer); checkTimer = setTimeout(run, 150); });
policySelect.addEventListener("change", run);
$("run").addEventListener("click", run);

$("format").addEventListener("click", async () => {
  const res = await ask({ op: "format", source: source.value });
  if (res.ok) { source.value = res.text; render(); await checkNow(); }
  else status.textContent = "fix the syntax errors first";
});

// Share: the policy, the queries and the chosen policy in the URL fragment.
const b64 = {
  enc: (s) => btoa(String.fromCharCode(...new TextEncoder().encode(s))).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, ""),
  dec: (s) => new TextDecoder().decode(Uint8Array.from(atob(s.replace(/-/g, "+").replace(/_/g, "/")), (c) => c.charCodeAt(0))),
};
$("share").addEventListener("click", async () => {
  const state = { p: source.value, q: queries.value, s: policySelect.value };
  const url = `${location.origin}${location.pathname}#s=${b64.enc(JSON.stringify(state))}`;
  history.replaceState(null, "", url);
  try { await navigator.clipboard.writeText(url); status.textContent = "link copied"; } catch { status.textContent = "link in the address bar"; }
  document.body.dataset.shareUrl = url;
});

// An example's own queries: those of its `test` blocks' `expect` lines
// (the guardian's are reviews, the observer's tool calls), at most ten.
function queriesOf(text) {
  const out = [];
  for (const line of text.split("\n")) {
    const m = line.match(/^\s*expect\s+\S+\s+(.+?)(?:\s+because\s+\S+)?\s*$/);
    if (m && !out.includes(m[1])) out.push(m[1]);
  }
  return out.slice(0, 10).join("\n");
}

const examples = $("examples");
examples.addEventListener("change", () => {
  const ex = EXAMPLES.find((e) => e.name === examples.value);
  if (!ex) return;
  source.value = ex.text;
  queries.value = queriesOf(ex.text) || DEFAULT_QUERIES;
  ruleLine = null;
  render();
  checkNow();
});

async function start() {
  try {
    ({ EXAMPLES } = await import("./examples.js"));
  } catch {
    fail("the examples did not load");
    return;
  }
  for (const ex of EXAMPLES) examples.insertAdjacentHTML("beforeend", `<option value="${escapeHtml(ex.name)}">${escapeHtml(ex.name)}</option>`);
  const m = location.hash.match(/^#s=(.+)$/);
  let state = null;
  if (m) { try { state = JSON.parse(b64.dec(m[1])); } catch { state = null; } }
  source.value = state?.p ?? EXAMPLES.find((e) => e.name === "coding-agent")?.text ?? "";
  queries.value = state?.q ?? DEFAULT_QUERIES;
  render();
  status.textContent = `gatehouse ${await ask({ op: "version" })}`;
  await checkNow();
  if (state?.s) { policySelect.value = state.s; await run(); }
  document.body.dataset.ready = "true";
}
start();
