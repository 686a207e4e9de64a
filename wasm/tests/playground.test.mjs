// The playground in a real headless Chromium (Debian's), driven by
// playwright-core: run with `node --test wasm/tests/` after wasm/build.sh.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { mkdirSync } from "node:fs";
import { join, dirname } from "node:path";
import { fileURLToPath } from "node:url";
import { chromium } from "playwright-core";

const here = dirname(fileURLToPath(import.meta.url));
const www = join(here, "..", "www");
const shots = join(here, "..", "test-results");
const port = 8700 + Math.floor(Math.random() * 200);
const base = `http://127.0.0.1:${port}/`;
let server, browser;

before(async () => {
  mkdirSync(shots, { recursive: true });
  server = spawn("python3", ["-m", "http.server", "--bind", "127.0.0.1", String(port), "--directory", www], { stdio: "ignore" });
  for (let i = 0; i < 50; i++) {
    try { if ((await fetch(base)).ok) break; } catch { /* not yet */ }
    await new Promise((r) => setTimeout(r, 100));
  }
  browser = await chromium.launch({
    executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
    args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
      "--disable-component-update", "--disable-sync"],
    // playwright gives every launch a fresh, empty profile directory.
  });
});

after(async () => {
  await browser?.close();
  server?.kill();
});

async function open(url = base) {
  const page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
  const errors = [];
  page.on("pageerror", (e) => errors.push(String(e)));
  await page.goto(url);
  await page.waitForSelector("body[data-ready=true]", { timeout: 20000 });
  return { page, errors };
}

async function decisions(page) {
  await page.waitForFunction(() => document.querySelectorAll("#results tbody tr").length > 0);
  return page.$$eval("#results tbody tr", (rows) => rows.map((r) => [...r.children].map((td) => td.textContent)));
}

test("pick the coding-agent example and read decisions from the page", async () => {
  const { page, errors } = await open();
  await page.selectOption("#examples", "coding-agent");
  await page.fill("#queries", "connect github.com:443\nconnect 169.254.169.254:80");
  await page.click("#run");
  await page.waitForFunction(() => document.querySelectorAll("#results tbody tr").length === 2);
  const rows = await decisions(page);
  assert.deepEqual(rows.map((r) => [r[0], r[1], r[2]]), [
    ["connect github.com:443", "allow", "allowed_by_rule"],
    ["connect 169.254.169.254:80", "deny", "local_address"],
  ]);
  assert.match(rows[0][3], /^8:5 allow domain github\.com/);
  // Clicking a decision highlights its deciding rule in the editor.
  await page.click("#results tbody tr:first-child");
  const hl = await page.textContent(".rule-hl");
  assert.match(hl, /allow domain github\.com/);
  await page.screenshot({ path: join(shots, "playground.png"), fullPage: true });
  assert.deepEqual(errors, []);
  await page.close();
});

test("an error shows on the right line, and goes when fixed", async () => {
  const { page } = await open();
  await page.selectOption("#examples", "coding-agent");
  const text = await page.inputValue("#source");
  await page.fill("#source", text.replace("    default deny", "    dfault deny"));
  await page.waitForSelector("#diagnostics li.error");
  const item = await page.textContent("#diagnostics li.error");
  assert.match(item, /line 5, column 5: unknown statement `dfault`/);
  assert.match(item, /did you mean `default`\?/);
  assert.equal(await page.textContent(".diag-error"), "dfault");
  await page.screenshot({ path: join(shots, "playground-error.png"), fullPage: true });
  await page.fill("#source", text);
  await page.waitForFunction(() => document.querySelectorAll("#diagnostics li").length === 0);
  assert.equal(await page.textContent("#status"), "ok");
  await page.close();
});

test("Format lays the policy out canonically", async () => {
  const { page } = await open();
  await page.fill("#source", "policy p{network{default deny;allow domain a.example}}\n");
  await page.waitForFunction(() => document.querySelector("#status").textContent === "ok");
  await page.click("#format");
  await page.waitForFunction(() => document.querySelector("#source").value.startsWith("policy p {\n"));
  assert.equal(await page.inputValue("#source"), "policy p {\n  network {\n    default deny\n    allow domain a.example\n  }\n}\n");
  await page.close();
});

test("the Share URL reproduces the page", async () => {
  const { page } = await open();
  await page.selectOption("#examples", "research");
  await page.fill("#queries", "connect 10.1.2.3:22\nconnect example.org:443");
  await page.click("#run");
  await page.waitForFunction(() => document.querySelectorAll("#results tbody tr").length === 2);
  const before = await decisions(page);
  await page.click("#share");
  await page.waitForFunction(() => document.body.dataset.shareUrl);
  const url = await page.evaluate(() => document.body.dataset.shareUrl);
  const { page: second } = await open(url);
  assert.equal(await second.inputValue("#source"), await page.inputValue("#source"));
  assert.equal(await second.inputValue("#queries"), "connect 10.1.2.3:22\nconnect example.org:443");
  await second.waitForFunction(() => document.querySelectorAll("#results tbody tr").length === 2);
  assert.deepEqual(await decisions(second), before);
  await page.close();
  await second.close();
});

test("the page works at phone width", async () => {
  const page = await browser.newPage({ viewport: { width: 390, height: 844 } });
  await page.goto(base);
  await page.waitForSelector("body[data-ready=true]");
  const rows = await decisions(page);
  assert.ok(rows.length >= 2);
  const width = await page.evaluate(() => document.documentElement.scrollWidth);
  assert.ok(width <= 400, `the page scrolls sideways: ${width}px`);
  // Every query shows on one line, whole (the decisions scroll in their box).
  const lines = await page.$$eval("#results tbody tr td:first-child", (tds) => tds.map((td) => {
    const r = document.createRange();
    r.selectNodeContents(td);
    return r.getClientRects().length === 1;
  }));
  assert.ok(lines.every(Boolean), JSON.stringify(lines));
  await page.screenshot({ path: join(shots, "playground-phone.png"), fullPage: true });
  await page.close();
});

test("each example brings its own queries, and a query is never cut mid-word", async () => {
  const { page, errors } = await open();
  await page.selectOption("#examples", "guardian");
  await page.waitForFunction(() => document.querySelector("#queries").value.startsWith("review exec curl"));
  await page.waitForFunction(() => document.querySelector("#results tbody td")?.textContent.startsWith("review exec curl"));
  const rows = await decisions(page);
  assert.ok(rows.length >= 5, JSON.stringify(rows));
  assert.ok(rows.every((r) => r[2] !== "network_off"), JSON.stringify(rows));
  assert.ok(rows.some((r) => r[1] === "denied") && rows.some((r) => r[1] === "approved"), JSON.stringify(rows));
  await page.selectOption("#examples", "observer");
  // Read the style once the observer's decisions are on the page (a row
  // being replaced has no computed style).
  const handle = await page.waitForFunction(() => {
    const td = document.querySelector("#results tbody td");
    if (!td || !td.isConnected || !td.textContent.startsWith("tool input.control")) return null;
    const s = getComputedStyle(td);
    return s.wordBreak ? [s.wordBreak, s.whiteSpace] : null;
  });
  assert.deepEqual(await handle.jsonValue(), ["normal", "nowrap"]);
  assert.deepEqual(errors, []);
  await page.close();
});

test("served unbuilt, the page says what to run instead of loading for ever", async () => {
  const { mkdtempSync, copyFileSync, rmSync } = await import("node:fs");
  const { tmpdir } = await import("node:os");
  // Without the examples (and the engine), then with the examples only.
  for (const withExamples of [false, true]) {
    const dir = mkdtempSync(join(tmpdir(), "gatehouse-unbuilt-"));
    for (const f of ["index.html", "app.js", "worker.js", "style.css"].concat(withExamples ? ["examples.js"] : [])) {
      copyFileSync(join(www, f), join(dir, f));
    }
    const p = port + 300 + (withExamples ? 1 : 0);
    const srv = spawn("python3", ["-m", "http.server", "--bind", "127.0.0.1", String(p), "--directory", dir], { stdio: "ignore" });
    try {
      for (let i = 0; i < 50; i++) {
        try { if ((await fetch(`http://127.0.0.1:${p}/`)).ok) break; } catch { /* not yet */ }
        await new Promise((r) => setTimeout(r, 100));
      }
      const page = await browser.newPage();
      await page.goto(`http://127.0.0.1:${p}/`);
      await page.waitForSelector("body[data-failed=true]", { timeout: 10000 });
      const said = await page.textContent("#status");
      assert.match(said, /wasm\/build\.sh --serve/);
      assert.doesNotMatch(said, /loading/);
      await page.close();
    } finally {
      srv.kill();
      rmSync(dir, { recursive: true, force: true });
    }
  }
});
