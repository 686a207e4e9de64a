// The decision corpus (tests/corpus/*.jsonl; tests/corpus.rs says what it
// holds) through the WASM build: every case's outcome, reason and deciding
// rule (file:line) must be the corpus's. A set of several files is given
// to the module as one text, in the order the engine reads them; the rule's
// line is mapped back to its file.
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync, readdirSync, statSync } from "node:fs";
import { join, dirname } from "node:path";
import { fileURLToPath } from "node:url";
import init, { compile } from "../www/pkg/gatehouse_wasm.js";

const here = dirname(fileURLToPath(import.meta.url));
const root = join(here, "..", "..");

function setFiles(set) {
  const full = join(root, set);
  if (!statSync(full).isDirectory()) return [set];
  return readdirSync(full).filter((f) => f.endsWith(".policy")).sort().map((f) => `${set}/${f}`);
}

test("the WASM build decides every case of the corpus", async () => {
  await init({ module_or_path: readFileSync(join(here, "..", "www", "pkg", "gatehouse_wasm_bg.wasm")) });
  const groups = new Map();
  const dir = join(root, "tests", "corpus");
  for (const f of readdirSync(dir).filter((f) => f.endsWith(".jsonl")).sort()) {
    for (const line of readFileSync(join(dir, f), "utf8").split("\n").filter(Boolean)) {
      const c = JSON.parse(line);
      const key = `${c.set}\u0000${c.policy}`;
      groups.set(key, [...(groups.get(key) || []), c]);
    }
  }
  let compared = 0;
  for (const [key, cases] of groups) {
    const [set, policy] = key.split("\u0000");
    // One text; `starts[i]` is the first line of file i in it.
    let text = "";
    const names = setFiles(set);
    const starts = [];
    for (const name of names) {
      starts.push(text.split("\n").length);
      let t = readFileSync(join(root, name), "utf8");
      if (!t.endsWith("\n")) t += "\n";
      text += t;
    }
    const handle = compile(text);
    const got = JSON.parse(handle.evaluate(policy, cases.map((c) => c.query).join("\n") + "\n"));
    handle.free();
    assert.equal(got.length, cases.length, `${set} ${policy}`);
    cases.forEach((c, i) => {
      const d = got[i];
      let rule = null;
      if (d.rule) {
        let k = starts.length - 1;
        while (starts[k] > d.rule.line) k--;
        rule = `${names[k]}:${d.rule.line - starts[k] + 1}`;
      }
      assert.deepEqual([d.decision, d.reason, rule], [c.decision, c.reason, c.rule], `${set} ${policy}: ${c.query}`);
      compared++;
    });
  }
  assert.ok(compared > 500, `only ${compared} cases`);
});
