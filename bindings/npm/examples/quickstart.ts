// A TypeScript user of the package: `tsc --noEmit` checks it against the
// declarations (build.sh), and node runs the compiled form of the same calls.
import { compile, PolicyError, type Decision, type Diagnostic, type Query } from "gatehouse-engine";

const policies = compile(`policy agent {
  network {
    allow domain **.github.com
  }
  sandbox workspace-write
}
`);

const queries: Query[] = [
  { kind: "connect", host: "api.github.com", port: 443 },
  { kind: "dns", name: "exfil.attacker.example" },
  { kind: "exec", argv: ["git", "push"], escalate: false },
  { kind: "write", path: "/work/.git/hooks/pre-commit", workspace: "/work" },
  { kind: "mcp", server: "github", tool: "delete_repo", annotations: { destructive_hint: true } },
];

for (const q of queries) {
  const d: Decision = policies.decide(q, "agent");
  const where = d.rule ? ` (${d.rule.file}:${d.rule.line})` : "";
  console.log(`${q.kind}: ${d.decision} because ${d.reason}${where}`);
}

try {
  compile("policy broken {");
} catch (e) {
  if (e instanceof PolicyError) {
    const first: Diagnostic | undefined = e.diagnostics[0];
    console.log(`refused: ${first?.code} at line ${first?.line}`);
  }
}
