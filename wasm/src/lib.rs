//! The gatehouse engine for the browser (and Node): thin wasm-bindgen glue,
//! JSON in and JSON out. No policy logic lives here; every function calls
//! the core crate and serialises what it returns.

#![deny(missing_docs)]

use gatehouse::diag::to_json_records;
use gatehouse::query::Query;
use gatehouse::source::SourceMap;
use gatehouse::{PolicySet, build};
use serde::Serialize;
use wasm_bindgen::prelude::*;

/// The file name diagnostics carry when the caller gives none.
const FILE: &str = "policy.policy";

fn json<T: Serialize>(v: &T) -> String {
    serde_json::to_string(v).unwrap_or_else(|e| {
        // A string always serialises (and no message here uses `Debug`:
        // tests/wasm_debug.rs).
        let message = serde_json::to_string(&e.to_string()).unwrap_or_default();
        format!("{{\"error\":{message}}}")
    })
}

/// The text as one file, named `name` (or [`FILE`]) in diagnostics.
fn sources(source: &str, name: Option<String>) -> SourceMap {
    let mut s = SourceMap::new();
    s.add(name.as_deref().unwrap_or(FILE), source);
    s
}

/// The engine's version.
#[wasm_bindgen]
pub fn version() -> String {
    env!("CARGO_PKG_VERSION").to_string()
}

/// Every diagnostic of a policy text, as `policyc check --format json` prints
/// them (plus `start`/`end` byte offsets for highlighting); `name` is the
/// file name they carry (default `policy.policy`).
#[wasm_bindgen]
pub fn check(source: &str, name: Option<String>) -> String {
    let b = build(sources(source, name));
    json(&diagnostics(&b))
}

fn diagnostics(b: &gatehouse::Build) -> Vec<gatehouse::diag::JsonDiagnostic> {
    let mut records = to_json_records(&b.diagnostics, &b.sources);
    for (r, d) in records.iter_mut().zip(&b.diagnostics) {
        r.start = Some(d.span.start);
        r.end = Some(d.span.end);
    }
    records
}

#[derive(Serialize)]
struct Formatted {
    ok: bool,
    text: Option<String>,
    diagnostics: Vec<gatehouse::diag::JsonDiagnostic>,
}

/// The canonical layout of a policy text (`policyc fmt`), or its syntax
/// errors. The text is checked as the library checks it (it re-parses to
/// the same policies); should that check fail, the answer is not ok and
/// carries one `internal` error instead of text.
#[wasm_bindgen]
pub fn format(source: &str, name: Option<String>) -> String {
    let map = sources(source, name);
    let id = gatehouse::source::FileId(0);
    let Some(file) = map.get(id) else {
        return json(&Formatted {
            ok: false,
            text: None,
            diagnostics: Vec::new(),
        });
    };
    match gatehouse::fmt::format_source(id, file) {
        Ok(text) => json(&Formatted {
            ok: true,
            text: Some(text),
            diagnostics: Vec::new(),
        }),
        Err(gatehouse::fmt::FormatError::Syntax(diags)) => {
            let errors: Vec<_> = diags.into_iter().filter(|d| d.is_error()).collect();
            json(&Formatted {
                ok: false,
                text: None,
                diagnostics: to_json_records(&errors, &map),
            })
        }
        Err(e) => {
            let internal = gatehouse::diag::Diagnostic::error(
                "internal",
                e.to_string(),
                gatehouse::source::Span::new(id, 0, 0),
            );
            json(&Formatted {
                ok: false,
                text: None,
                diagnostics: to_json_records(&[internal], &map),
            })
        }
    }
}

/// One line's answer: a decision, or why the line could not be read.
#[derive(Serialize)]
#[serde(untagged)]
enum Answer<'a> {
    Decision(gatehouse::DecisionReport<'a>),
    Error { error: String },
}

/// A compiled policy set, for repeated evaluation.
#[wasm_bindgen]
pub struct Handle {
    set: PolicySet,
}

/// Compiles a policy text; throws the diagnostics (JSON) when it has
/// errors, each naming the file `name` (default `policy.policy`).
#[wasm_bindgen]
pub fn compile(source: &str, name: Option<String>) -> Result<Handle, JsValue> {
    let b = build(sources(source, name));
    match b.set.clone() {
        Some(set) if !b.has_errors() => Ok(Handle { set }),
        _ => Err(JsValue::from_str(&json(&diagnostics(&b)))),
    }
}

#[wasm_bindgen]
impl Handle {
    /// The policy names, in source order (JSON array).
    pub fn policies(&self) -> String {
        json(&self.set.policies().map(|p| p.name()).collect::<Vec<_>>())
    }

    /// Decides query lines (text form or JSON objects, one per line) with
    /// `policy` (empty: the only policy). One JSON decision per query, as
    /// `policyc eval` prints them; a bad line gives `{"error": ...}`.
    pub fn evaluate(&self, policy: &str, queries: &str) -> String {
        let p = match self.set.select((!policy.is_empty()).then_some(policy)) {
            Ok(p) => p,
            Err(e) => {
                return json(&[Answer::Error {
                    error: e.to_string(),
                }]);
            }
        };
        let mut out = Vec::new();
        for line in queries
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty() && !l.starts_with('#'))
        {
            let query = if line.starts_with('{') {
                Query::from_json(line).map_err(|e| format!("invalid JSON query: {e}"))
            } else {
                gatehouse::Query::parse(line).map_err(|e| e.to_string())
            };
            match query {
                Ok(q) => out.push(Answer::Decision(self.set.report(p, &p.decide(&q)))),
                Err(error) => out.push(Answer::Error { error }),
            }
        }
        json(&out)
    }
}

/// Compiles and decides in one call (see [`Handle::evaluate`]); a policy
/// with errors gives `{"errors": diagnostics}`.
#[wasm_bindgen]
pub fn evaluate(source: &str, policy: &str, queries: &str) -> String {
    match compile(source, None) {
        Ok(h) => h.evaluate(policy, queries),
        Err(e) => format!(
            "{{\"errors\":{}}}",
            e.as_string().unwrap_or_else(|| "[]".into())
        ),
    }
}
