// gatehouse-engine against @cedar-policy/cedar-wasm, in one run, on the same
// rule sets and the same stream of distinct names (as the Python bench):
//   node compare_cedar.mjs [--quick]      (run where both packages are installed)
// cedar-wasm gets its fastest fair form: a pre-parsed policy set
// (`preparsePolicySet` + `statefulIsAuthorized`). Both decide every query
// first and must agree. Medians per query.
import * as cedar from "@cedar-policy/cedar-wasm/nodejs";
import { compile } from "gatehouse-engine";

const QUICK = process.argv.includes("--quick");
const RUNS = QUICK ? 3 : 5;
const STREAM = QUICK ? 1024 : 4096;

// mulberry32: a small seeded generator with a full 2^32 period.
let seed = 7;
const rand = () => {
  seed = (seed + 0x6d2b79f5) | 0;
  let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
  t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
  return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
};
const pick = (xs) => xs[Math.floor(rand() * xs.length)];

function rules(n) {
  const exact = [];
  const suffixes = [];
  for (let i = 0; i < n; i++) {
    const name = `svc${i}.${pick(["api", "cdn", "pkg", "ci"])}${i % 97}.example${i % 13}.com`;
    (i % 3 === 0 ? suffixes : exact).push(name);
  }
  return [exact, suffixes];
}

function stream(exact, suffixes) {
  const out = new Set();
  const all = [...exact, ...suffixes];
  while (out.size < STREAM) {
    const k = rand();
    if (k < 0.3 && exact.length) out.add(pick(exact));
    else if (k < 0.6 && suffixes.length) out.add(`h${Math.floor(rand() * 1e6)}.${pick(suffixes)}`);
    else out.add(`x${Math.floor(rand() * 1e6)}.${pick(all).split(".").slice(1).join(".")}`);
  }
  return [...out];
}

function perQuery(f, n) {
  const times = [];
  for (let r = 0; r < RUNS; r++) {
    const t = process.hrtime.bigint();
    f();
    times.push(Number(process.hrtime.bigint() - t) / n);
  }
  times.sort((a, b) => a - b);
  return times[Math.floor(times.length / 2)];
}

console.log("| rules | gatehouse-engine, one query per call | gatehouse-engine, the whole stream in one call (per query) | per-call overhead | cedar-wasm (pre-parsed) | cedar-wasm / gatehouse-engine |");
console.log("|---:|---:|---:|---:|---:|---:|");
// 1 000 rules: the run stops in V8 itself ("Fatal error ... unreachable code" in the
// Deoptimizer) during cedar-wasm's part, on Node 20.20; BENCHMARKS.md says so.
for (const n of [10, 100]) {
  const [exact, suffixes] = rules(n);
  const names = stream(exact, suffixes);
  const text =
    "policy p {\n  network {\n" +
    exact.map((e) => `    allow domain ${e}\n`).join("") +
    suffixes.map((s) => `    allow domain *.${s}\n`).join("") +
    "  }\n}\n";
  const set = compile(text);
  const cedarText = [
    ...exact.map((e) => `permit(principal, action == Action::"connect", resource) when { context.host == "${e}" };`),
    ...suffixes.map((s) => `permit(principal, action == Action::"connect", resource) when { context.host like "*.${s}" };`),
  ].join("\n");
  const pre = cedar.preparsePolicySet(`bench${n}`, { staticPolicies: cedarText });
  if (pre.type !== "success") throw new Error(JSON.stringify(pre));
  const ask = (host) => {
    const a = cedar.statefulIsAuthorized({
      principal: { type: "Sandbox", id: "s" },
      action: { type: "Action", id: "connect" },
      resource: { type: "Host", id: "h" },
      context: { host },
      preparsedPolicySetId: `bench${n}`,
      entities: [],
    });
    if (a.type !== "success") throw new Error(JSON.stringify(a));
    return a.response.decision === "allow";
  };
  const queries = names.map((host) => ({ kind: "connect", host, port: 443 }));
  for (const q of queries) {
    if ((set.decide(q).decision === "allow") !== ask(q.host)) throw new Error(`disagree on ${q.host}`);
  }
  const single = perQuery(() => queries.forEach((q) => set.decide(q)), queries.length);
  const batch = perQuery(() => set.decideAll(queries), queries.length);
  const ced = perQuery(() => names.forEach(ask), names.length);
  console.log(
    `| ${n} | ${single.toFixed(0)} ns | ${batch.toFixed(0)} ns | ${(single - batch).toFixed(0)} ns | ${ced.toFixed(0)} ns | ${(ced / single).toFixed(0)}× |`,
  );
}
