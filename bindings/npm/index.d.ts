// Type declarations of gatehouse-engine: the functions and the JSON shapes
// of decisions, diagnostics and queries (docs/language.md#tests-and-queries).

/** How a connection reaches the proxy. */
export type Via = "http" | "https" | "socks5" | "socks5_udp";

export type RiskLevel = "low" | "medium" | "high" | "critical";
export type RiskCategory = "exfiltration" | "credential_probing" | "security_weakening" | "destructive";
export type AuthLevel = "unknown" | "low" | "medium" | "high";
export type PromptCategory =
  | "sandbox_approval"
  | "rules"
  | "mcp_elicitations"
  | "request_permissions"
  | "skill_approval";

/** MCP tool annotations; a missing hint is unknown. */
export interface Annotations {
  destructive_hint?: boolean;
  read_only_hint?: boolean;
  open_world_hint?: boolean;
}

/** The auto-reviewer's assessment of an action. */
export interface Assessment {
  risk?: RiskLevel;
  category?: RiskCategory;
  user_authorization?: AuthLevel;
  outcome?: "allow" | "deny";
  status?: "ok" | "failed" | "timeout" | "cancelled";
}

/** A query in the JSON form. Unknown or misplaced fields are an error. */
export type Query =
  | { kind: "connect"; host: string; port: number; via?: Via }
  | { kind: "dns"; name: string }
  | { kind: "resolved"; host: string; addrs: string[]; port?: number }
  | { kind: "socket"; path: string }
  | { kind: "listen"; addr: string }
  | { kind: "upstream" }
  | { kind: "tool"; permission: string }
  | { kind: "app"; program: string }
  | { kind: "write"; path: string; workspace?: string; home?: string }
  | { kind: "read"; path: string; workspace?: string; home?: string }
  | { kind: "exec"; argv: string[]; escalate?: boolean }
  | { kind: "mcp"; server: string; tool: string; annotations?: Annotations }
  | { kind: "prompt"; category: PromptCategory }
  | { kind: "review"; action: Query; assessment?: Assessment }
  | { kind: "web_search" };

export type Outcome =
  | "allow"
  | "deny"
  | "ask"
  | "review"
  | "approved"
  | "denied"
  | "timed_out"
  | "aborted"
  | "cached"
  | "disabled"
  | "live"
  | "indexed";

/** Where the deciding rule was written. */
export interface Rule {
  file: string;
  line: number;
  column: number;
  source: string;
  because?: string;
}

/** An answer, as `policyc eval` prints it. */
export interface Decision {
  decision: Outcome;
  /** A stable reason code (docs/language.md#reason-codes). */
  reason: string;
  policy: string;
  /** The deciding rule, or null for a default. */
  rule: Rule | null;
  escalation?: "ask" | "review" | "none";
  status?: number;
  risk?: RiskLevel;
  category?: RiskCategory;
  because?: string;
}

export interface Related {
  message: string;
  file: string;
  line: number;
  column: number;
}

/** One error or warning, as `policyc check --format json` prints it. */
export interface Diagnostic {
  severity: "error" | "warning";
  code: string;
  message: string;
  file: string;
  line: number;
  column: number;
  end_line: number;
  end_column: number;
  help: string | null;
  related?: Related[];
  /** Byte offsets of the span in the source. */
  start?: number;
  end?: number;
}

/** A policy text with errors. */
export class PolicyError extends Error {
  readonly diagnostics: Diagnostic[];
}

/** A compiled policy set, for repeated decisions. */
export interface PolicySet {
  /** The policies' names, in source order. */
  readonly policies: string[];
  /**
   * Decides one query, in the text form (`"connect github.com:443"`) or the
   * JSON form, with `policy` (omit it when the set holds one policy).
   * A malformed query throws a TypeError; any well-formed one is decided.
   */
  decide(query: Query | string, policy?: string): Decision;
  /** Decides many queries in one call; a malformed one gives `{ error }`. */
  decideAll(queries: Array<Query | string>, policy?: string): Array<Decision | { error: string }>;
  /** Frees the compiled set (it is also freed when collected). */
  free(): void;
}

/** The engine's version. */
export function version(): string;
/**
 * Every diagnostic of a policy text; an empty array means it is clean.
 * `name` is the file name the diagnostics carry (default `policy.policy`).
 */
export function check(source: string, name?: string): Diagnostic[];
/** The canonical layout of a policy text; throws PolicyError on syntax errors (naming `name`). */
export function format(source: string, name?: string): string;
/** Compiles a policy text; throws PolicyError with every diagnostic, each naming the file `name`. */
export function compile(source: string, name?: string): PolicySet;
/**
 * Loads the WebAssembly module (the `gatehouse-engine/web` entry: call and
 * await it once before anything else). Under Node it is already loaded.
 */
export function init(input?: string | ArrayBuffer | ArrayBufferView | object): Promise<void>;
