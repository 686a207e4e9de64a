// The WASM module and the native CLI give identical JSON for the same
// policies and queries (every expectation of the shipped policies).
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync, readdirSync } from "node:fs";
import { execFileSync } from "node:child_process";
import { join, dirname } from "node:path";
import { fileURLToPath } from "node:url";
import init, { compile } from "../www/pkg/gatehouse_wasm.js";

const here = dirname(fileURLToPath(import.meta.url));
const root = join(here, "..", "..");
const policyc = process.env.POLICYC || join(root, "target", "debug", "policyc");

test("WASM decisions equal the CLI's, line for line", async () => {
  await init({ module_or_path: readFileSync(join(here, "..", "www", "pkg", "gatehouse_wasm_bg.wasm")) });
  let compared = 0;
  for (const file of readdirSync(join(root, "policies")).filter((f) => f.endsWith(".policy")).sort()) {
    const text = readFileSync(join(root, "policies", file), "utf8");
    const handle = compile(text);
    // The queries of every expectation, grouped by the policy they ask.
    const byPolicy = new Map();
    let current = JSON.parse(handle.policies())[0];
    for (const line of text.split("\n")) {
      const p = line.match(/^\s*policy\s+([A-Za-z][\w-]*)\s*$/);
      if (p) current = p[1];
      const e = line.match(/^\s*expect\s+\w+\s+(.*?)(\s+because\s+\w+)?\s*$/);
      if (e) byPolicy.set(current, [...(byPolicy.get(current) || []), e[1]]);
    }
    for (const [policy, queries] of byPolicy) {
      const input = queries.join("\n") + "\n";
      const cli = execFileSync(policyc, ["eval", join(root, "policies", file), "--policy", policy, "--queries", "-"], {
        input, cwd: root, encoding: "utf8",
        // write queries bind the current directory as the workspace, as the WASM module's queries name theirs
      }).trim().split("\n").map((l) => JSON.parse(l));
      const wasm = JSON.parse(handle.evaluate(policy, input));
      assert.equal(wasm.length, cli.length, `${file} ${policy}`);
      for (let i = 0; i < cli.length; i++) {
        // The file name is the only difference: the module names its one source `policy.policy`.
        if (cli[i].rule) cli[i].rule.file = "policy.policy";
        assert.deepEqual(wasm[i], cli[i], `${file} ${policy}: ${queries[i]}`);
        compared++;
      }
    }
    handle.free();
  }
  assert.ok(compared > 100, `only ${compared} decisions compared`);
});
