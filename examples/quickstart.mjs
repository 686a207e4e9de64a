// Decide a few questions with a shipped policy. From the repository root:
//   bindings/npm/build.sh --pack && npm install --no-save ./target/npm/gatehouse-engine-0.1.0.tgz
//   node examples/quickstart.mjs
import { readFileSync } from "node:fs";
import { compile } from "gatehouse-engine";

const text = readFileSync(new URL("../policies/coding-agent.policy", import.meta.url), "utf8");
const policies = compile(text);
for (const host of ["github.com", "GitHub.COM.", "exfil.attacker.example", "169.254.169.254", "2130706433"]) {
  const d = policies.decide({ kind: "connect", host, port: 443 }, "coding-agent");
  console.log(`connect ${host}:443 -> ${d.decision} because ${d.reason}${d.rule ? ` (line ${d.rule.line})` : ""}`);
}
