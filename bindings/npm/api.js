// The typed API over the wasm-bindgen glue (JSON in, JSON out). node.js and
// web.js load the module and hand the glue to `setGlue`; everything else is
// shared. No policy logic lives here.

let glue = null;

/** @internal */
export function setGlue(g) {
  glue = g;
}

function engine() {
  if (glue === null) {
    throw new Error("gatehouse-engine is not initialised: await init() first (gatehouse-engine/web)");
  }
  return glue;
}

/** A policy text with errors; `diagnostics` holds every one. */
export class PolicyError extends Error {
  constructor(message, diagnostics) {
    super(message);
    this.name = "PolicyError";
    this.diagnostics = diagnostics;
  }
}

function invalid(diagnostics) {
  const first = diagnostics.find((d) => d.severity === "error") ?? diagnostics[0];
  const where = first ? `${first.file}:${first.line}:${first.column}: ${first.code}: ${first.message}` : "invalid policy";
  const more = diagnostics.length > 1 ? ` (and ${diagnostics.length - 1} more)` : "";
  return new PolicyError(where + more, diagnostics);
}

export function version() {
  return engine().version();
}

/** The file name diagnostics carry: the caller's, or `policy.policy`. */
function named(name) {
  return name === undefined || name === null ? undefined : String(name);
}

export function check(source, name) {
  return JSON.parse(engine().check(String(source), named(name)));
}

export function format(source, name) {
  const r = JSON.parse(engine().format(String(source), named(name)));
  if (!r.ok) throw invalid(r.diagnostics);
  return r.text;
}

function line(query) {
  if (typeof query === "string") {
    if (query.includes("\n")) throw new TypeError("one query per call: the text form has no newlines");
    return query;
  }
  if (query === null || typeof query !== "object") throw new TypeError("a query is a string (text form) or an object (JSON form)");
  return JSON.stringify(query);
}

class PolicySet {
  #handle;
  #names;

  constructor(handle) {
    this.#handle = handle;
    this.#names = JSON.parse(handle.policies());
  }

  get policies() {
    return [...this.#names];
  }

  decide(query, policy = "") {
    const [answer] = JSON.parse(this.#handle.evaluate(policy, line(query)));
    if (answer === undefined) throw new TypeError("an empty query");
    if ("error" in answer) {
      throw new TypeError(answer.error);
    }
    return answer;
  }

  decideAll(queries, policy = "") {
    return JSON.parse(this.#handle.evaluate(policy, queries.map(line).join("\n")));
  }

  free() {
    this.#handle.free();
  }
}

export function compile(source, name) {
  let handle;
  try {
    handle = engine().compile(String(source), named(name));
  } catch (e) {
    if (typeof e === "string") throw invalid(JSON.parse(e));
    throw e;
  }
  return new PolicySet(handle);
}
