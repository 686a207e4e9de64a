// The packed package as a user gets it: installed from the tarball into an
// empty folder (see build.sh) and imported by its name.
import assert from "node:assert/strict";
import { test } from "node:test";
import { createRequire } from "node:module";

import { check, compile, format, init, PolicyError, version } from "gatehouse-engine";

const POLICY = `policy agent {
  network {
    allow domain *.github.com
    deny cidr 10.0.0.0/8
  }
  sandbox workspace-write
  approvals on-request
  commands {
    prompt git push because "pushes leave the sandbox"
  }
  mcp {
    server scratch off
  }
}
`;

test("decides both query forms, naming the rule", async () => {
  await init();
  assert.match(version(), /^\d+\.\d+\.\d+/);
  const set = compile(POLICY);
  assert.deepEqual(set.policies, ["agent"]);
  const d = set.decide("connect api.github.com:443");
  assert.equal(d.decision, "allow");
  assert.equal(d.reason, "allowed_by_rule");
  assert.deepEqual([d.rule.line, d.rule.source], [3, "allow domain *.github.com"]);
  assert.deepEqual(set.decide({ kind: "connect", host: "api.github.com", port: 443 }), d);
  assert.equal(set.decide({ kind: "connect", host: "[::ffff:10.1.2.3]", port: 443 }).reason, "denied_by_rule");
  assert.equal(set.decide({ kind: "connect", host: "2130706433", port: 80 }).reason, "ambiguous_ip_literal");
  assert.equal(set.decide({ kind: "exec", argv: ["git", "push"] }).decision, "ask");
  assert.equal(set.decide('write "/w/.git/hooks/pre-commit" in "/w"').reason, "protected_path");
  assert.equal(set.decide({ kind: "mcp", server: "scratch", tool: "read" }, "agent").reason, "tool_disabled");
  const all = set.decideAll(["dns exfil.attacker.example", "connect nope"]);
  assert.equal(all[0].reason, "not_allowed");
  assert.ok("error" in all[1]);
  set.free();
});

test("malformed queries throw; hostile ones are decided", () => {
  const set = compile(POLICY);
  assert.throws(() => set.decide("connect github.com"), TypeError);
  assert.throws(() => set.decide({ kind: "connect", host: "a" }), TypeError);
  assert.throws(() => set.decide("dns a\ndns b"), TypeError);
  for (const host of ["", "\u0000", "a".repeat(10000), "0x7f.1", "[::1"]) {
    assert.equal(set.decide({ kind: "connect", host, port: 443 }).decision, "deny", host);
  }
});

test("errors carry every diagnostic", () => {
  const bad = "policy p {\n  network {\n    allow domian x.com\n    deny cidr 10.0.0.1/8\n  }\n}\n";
  const diags = check(bad);
  assert.deepEqual(diags.map((d) => [d.code, d.line]), [["syntax_error", 3], ["cidr_host_bits", 4]]);
  assert.throws(() => compile(bad), (e) => e instanceof PolicyError && e.diagnostics.length === 2);
  assert.equal(format("policy p {network off}"), "policy p {\n  network off\n}\n");
  assert.throws(() => format("policy p {"), PolicyError);
  assert.deepEqual(check("policy p {\n  network off\n}\n"), []);
  // Diagnostics name the caller's file (issue 37, item 7).
  assert.equal(diags[0].file, "policy.policy");
  assert.equal(check(bad, "agents/ci.policy")[0].file, "agents/ci.policy");
  assert.throws(
    () => compile(bad, "agents/ci.policy"),
    (e) => e instanceof PolicyError && e.diagnostics.every((d) => d.file === "agents/ci.policy"),
  );
  assert.throws(
    () => format("policy p {", "agents/ci.policy"),
    (e) => e instanceof PolicyError && e.diagnostics[0].file === "agents/ci.policy",
  );
});

test("require() loads the same package", () => {
  const require = createRequire(import.meta.url);
  const cjs = require("gatehouse-engine");
  assert.equal(cjs.compile(POLICY).decide("connect github.com:443").reason, "not_allowed");
});

test("the web entry decides alike once initialised", async () => {
  const { readFileSync } = await import("node:fs");
  const { createRequire } = await import("node:module");
  const require = createRequire(import.meta.url);
  const wasm = require.resolve("gatehouse-engine/wasm/gatehouse_wasm_bg.wasm");
  const web = await import("gatehouse-engine/web");
  await web.init(readFileSync(wasm));
  assert.equal(web.compile(POLICY).decide("connect api.github.com:443").decision, "allow");
});
