//! The server's answers, each a JSON value in the protocol's shape.

use gatehouse::diag::Severity;
use gatehouse::outline::{ItemKind, context_at, outline};
use serde_json::{Value, json};

use super::text::{Lines, at, word_at};
use super::{RUN_TEST, Server};

/// The diagnostics of the document (file 0 of the build), with related
/// locations in any file of its set, and the help line under the message.
pub fn diagnostics(b: &gatehouse::Build, uris: &[String]) -> Vec<Value> {
    let lines: Vec<Option<Lines<'_>>> = (0..uris.len())
        .map(|i| {
            u32::try_from(i)
                .ok()
                .and_then(|i| b.sources.get(gatehouse::source::FileId(i)))
                .map(|f| Lines::new(&f.text))
        })
        .collect();
    let range = |span: gatehouse::source::Span| {
        lines
            .get(span.file.0 as usize)
            .and_then(Option::as_ref)
            .map(|l| l.range(span.start as usize, span.end as usize))
    };
    b.diagnostics
        .iter()
        .filter(|d| d.span.file.0 == 0)
        .filter_map(|d| {
            let mut message = d.message.clone();
            if let Some(h) = &d.help {
                message.push_str("\nhelp: ");
                message.push_str(h);
            }
            let related: Vec<Value> = d
                .labels
                .iter()
                .filter_map(|l| {
                    Some(json!({
                        "location": {
                            "uri": uris.get(l.span.file.0 as usize)?,
                            "range": range(l.span)?,
                        },
                        "message": l.message,
                    }))
                })
                .collect();
            Some(json!({
                "range": range(d.span)?,
                "severity": if d.severity == Severity::Error { 1 } else { 2 },
                "code": d.code,
                "source": "gatehouse",
                "message": message,
                "relatedInformation": related,
            }))
        })
        .collect()
}

pub fn hover(text: &str, pos: &Value) -> Value {
    let lines = Lines::new(text);
    let offset = lines.offset(pos);
    let Some((start, end, word)) = word_at(text, offset) else {
        return Value::Null;
    };
    let block = context_at(text, start).block;
    match super::docs::hover(word, block) {
        Some(md) => json!({
            "contents": { "kind": "markdown", "value": md },
            "range": lines.range(start, end),
        }),
        None => Value::Null,
    }
}

/// Completion items: statement keywords at the start of a statement,
/// permissions after `allow`/`deny` in `permissions`, and in tests policy
/// names, decision words, query kinds and reason codes where each goes.
pub fn completion(server: &Server<'_>, uri: &str, text: &str, pos: &Value) -> Value {
    let offset = Lines::new(text).offset(pos);
    let ctx = context_at(text, offset);
    let words: Vec<&str> = ctx.words.iter().map(String::as_str).collect();
    let keyword = |w: &str| json!({ "label": w, "kind": 14 });
    let value = |w: &str, detail: &str| json!({ "label": w, "kind": 12, "detail": detail });
    let mut items: Vec<Value> = Vec::new();
    match (ctx.block, words.as_slice()) {
        (_, []) => {
            items.extend(
                gatehouse::outline::statement_keywords(ctx.block)
                    .iter()
                    .map(|w| keyword(w)),
            );
        }
        ("permissions", ["allow" | "deny", ..]) => {
            items.extend(
                gatehouse::vocab::Permission::ALL
                    .iter()
                    .map(|p| value(p.as_str(), "permission")),
            );
        }
        ("test", ["policy"]) => {
            let mut names: Vec<String> = Vec::new();
            for (_, _, t) in server_set(server, uri, text) {
                names.extend(
                    outline(&t)
                        .items
                        .into_iter()
                        .filter(|i| i.kind == ItemKind::Policy)
                        .map(|i| i.name),
                );
            }
            names.sort();
            names.dedup();
            items.extend(names.iter().map(|n| value(n, "policy")));
        }
        ("test", ["expect"]) => {
            items.extend(
                gatehouse::outline::decision_words()
                    .iter()
                    .map(|w| value(w, "decision")),
            );
        }
        ("test", ["expect", _]) => {
            items.extend(gatehouse::outline::query_kinds().iter().map(|w| keyword(w)));
        }
        ("test", [.., "because"]) => {
            items.extend(
                gatehouse::Reason::ALL
                    .iter()
                    .map(|r| value(r.as_str(), "reason code")),
            );
        }
        _ => {}
    }
    Value::Array(items)
}

fn server_set(server: &Server<'_>, uri: &str, text: &str) -> Vec<(String, String, String)> {
    let files = server.set_of(uri);
    if files.is_empty() {
        vec![(uri.to_string(), uri.to_string(), text.to_string())]
    } else {
        files
    }
}

/// From a test's `policy NAME` to the policy, in the document or its set.
pub fn definition(server: &Server<'_>, uri: &str, text: &str, pos: &Value) -> Value {
    let offset = Lines::new(text).offset(pos);
    let o = outline(text);
    let name = o
        .references
        .iter()
        .find(|r| r.start <= offset && offset <= r.end)
        .map(|r| r.name.clone())
        .or_else(|| {
            // The name of a policy is its own definition.
            o.items
                .iter()
                .find(|i| {
                    i.kind == ItemKind::Policy && i.name_start <= offset && offset <= i.name_end
                })
                .map(|i| i.name.clone())
        });
    let Some(name) = name else {
        return Value::Null;
    };
    for (u, _, t) in server_set(server, uri, text) {
        let found = outline(&t)
            .items
            .into_iter()
            .find(|i| i.kind == ItemKind::Policy && i.name == name);
        if let Some(i) = found {
            return json!({ "uri": u, "range": Lines::new(&t).range(i.name_start, i.name_end) });
        }
    }
    Value::Null
}

pub fn symbols(text: &str) -> Value {
    let lines = Lines::new(text);
    let symbol = |s: &gatehouse::outline::Symbol, kind: u32, children: Vec<Value>| {
        json!({
            "name": s.name,
            "kind": kind,
            "range": lines.range(s.start, s.end),
            "selectionRange": lines.range(s.name_start, s.name_end),
            "children": children,
        })
    };
    let items: Vec<Value> = outline(text)
        .items
        .iter()
        .map(|i| {
            let children = i
                .children
                .iter()
                .map(|c| symbol(c, 7, Vec::new()))
                .collect();
            let kind = match i.kind {
                ItemKind::Policy => 2,       // Module
                ItemKind::Requirements => 3, // Namespace
                _ => 12,                     // Function
            };
            symbol(i, kind, children)
        })
        .collect();
    Value::Array(items)
}

/// One edit replacing the whole text, or none when it is formatted or has
/// syntax errors (the diagnostics already say so).
pub fn formatting(uri: &str, text: &str) -> Value {
    let mut map = gatehouse::SourceMap::new();
    let id = map.add(uri.to_string(), text.to_string());
    let Some(file) = map.get(id) else {
        return json!([]);
    };
    match gatehouse::fmt::format_source(id, file) {
        Ok(formatted) if formatted != text => {
            json!([{ "range": Lines::new(text).all(), "newText": formatted }])
        }
        _ => json!([]),
    }
}

pub fn code_lenses(uri: &str, text: &str) -> Value {
    let lines = Lines::new(text);
    let lenses: Vec<Value> = outline(text)
        .items
        .iter()
        .filter(|i| i.kind == ItemKind::Test)
        .map(|i| {
            json!({
                "range": lines.range(i.name_start, i.name_end),
                "command": {
                    "title": "▶ Run test",
                    "command": RUN_TEST,
                    "arguments": [uri, i.name],
                },
            })
        })
        .collect();
    Value::Array(lenses)
}

/// Runs one test block of a document: every `expect` of the block named
/// `test` in that document, decided by the set the document belongs to.
pub fn run_test(server: &Server<'_>, uri: &str, test: &str) -> Value {
    let (b, _) = server.build(uri);
    let Some(set) = b.set.as_ref().filter(|_| !b.has_errors()) else {
        return json!({
            "test": test, "passed": 0, "failed": 0, "failures": [],
            "summary": format!("test \"{test}\" did not run: the policies have errors"),
        });
    };
    let doc_name = b
        .sources
        .get(gatehouse::source::FileId(0))
        .map(|f| f.name.clone())
        .unwrap_or_default();
    let mut workspaces = crate::load::Workspaces::new(None, None);
    let (mut passed, mut failures) = (0usize, Vec::new());
    for case in b
        .tests()
        .into_iter()
        .filter(|c| c.file == doc_name && c.test == test)
    {
        let Some(p) = case.policy_in(set) else {
            continue;
        };
        let d = p.decide_in(&case.query, Some(workspaces.for_query(&case.query)));
        if case.passes(&d) {
            passed += 1;
        } else {
            failures.push(json!({
                "line": case.line,
                "column": case.column,
                "expected": format!("{} {}", case.expected.outcome, case.query_text),
                "actual": format!("{} because {}", d.outcome.as_str(), d.reason.as_str()),
            }));
        }
    }
    let failed = failures.len();
    let summary = if passed + failed == 0 {
        format!("test \"{test}\": no expectation ran")
    } else {
        let first = failures
            .first()
            .map(|f| {
                format!(
                    "; line {}: expected {}, got {}",
                    at(f, "/line"),
                    at(f, "/expected").as_str().unwrap_or(""),
                    at(f, "/actual").as_str().unwrap_or("")
                )
            })
            .unwrap_or_default();
        format!("test \"{test}\": {passed} passed, {failed} failed{first}")
    };
    json!({ "test": test, "passed": passed, "failed": failed, "failures": failures, "summary": summary })
}
