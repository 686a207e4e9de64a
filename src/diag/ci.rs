//! Renderers for CI systems: SARIF 2.1.0 (code scanning) and GitHub
//! Actions workflow commands (annotations on the pull request's diff).

use std::fmt::Write as _;

use serde_json::{Value, json};

use super::render::to_json_records;
use super::{Diagnostic, Severity};
use crate::source::SourceMap;

/// Diagnostics as one SARIF 2.1.0 log: one run of the tool `policyc`, a
/// reporting rule per diagnostic code that occurs, one result per
/// diagnostic with its region (columns in Unicode code points, as the run
/// declares) and its related locations. Paths are relative URIs, resolved
/// against the checkout (`%SRCROOT%`), as GitHub code scanning expects.
pub fn render_sarif(diags: &[Diagnostic], sources: &SourceMap) -> String {
    let records = to_json_records(diags, sources);
    let mut codes: Vec<(&str, Severity)> = Vec::new();
    for r in &records {
        if !codes.iter().any(|(c, _)| *c == r.code) {
            codes.push((r.code, r.severity));
        }
    }
    codes.sort_unstable();
    let rules: Vec<Value> = codes
        .iter()
        .map(|(code, severity)| {
            json!({
                "id": code,
                "name": code,
                "shortDescription": { "text": format!("gatehouse diagnostic `{code}`") },
                "defaultConfiguration": { "level": level(*severity) },
            })
        })
        .collect();
    // `end`: the region's end line and column, when known.
    let location = |file: &str, line: usize, column: usize, end: Option<(usize, usize)>| {
        // A relative path is resolved against the checkout; an absolute
        // one is a `file:` URI of its own.
        let artifact = if file.starts_with('/') {
            json!({ "uri": format!("file://{}", uri(file)) })
        } else {
            json!({ "uri": uri(file), "uriBaseId": "%SRCROOT%" })
        };
        let region = match end {
            Some((end_line, end_column)) => json!({
                "startLine": line.max(1),
                "startColumn": column.max(1),
                "endLine": end_line.max(line).max(1),
                "endColumn": end_column.max(1),
            }),
            None => json!({ "startLine": line.max(1), "startColumn": column.max(1) }),
        };
        json!({ "artifactLocation": artifact, "region": region })
    };
    let results: Vec<Value> = records
        .iter()
        .map(|r| {
            let mut text = r.message.clone();
            if let Some(h) = &r.help {
                let _ = write!(text, "\nhelp: {h}");
            }
            let loc = location(&r.file, r.line, r.column, Some((r.end_line, r.end_column)));
            let related: Vec<Value> = r
                .related
                .iter()
                .enumerate()
                .map(|(i, rel)| {
                    json!({
                        "id": i,
                        "message": { "text": rel.message },
                        "physicalLocation": location(&rel.file, rel.line, rel.column, None),
                    })
                })
                .collect();
            let rule_index = codes.iter().position(|(c, _)| *c == r.code).unwrap_or(0);
            let mut result = serde_json::Map::new();
            result.insert("ruleId".into(), json!(r.code));
            result.insert("ruleIndex".into(), json!(rule_index));
            result.insert("level".into(), json!(level(r.severity)));
            result.insert("message".into(), json!({ "text": text }));
            result.insert("locations".into(), json!([{ "physicalLocation": loc }]));
            if !related.is_empty() {
                result.insert("relatedLocations".into(), Value::Array(related));
            }
            Value::Object(result)
        })
        .collect();
    let log = json!({
        "$schema": "https://json.schemastore.org/sarif-2.1.0.json",
        "version": "2.1.0",
        "runs": [{
            "tool": { "driver": {
                "name": "policyc",
                "semanticVersion": env!("CARGO_PKG_VERSION"),
                "rules": rules,
            }},
            "columnKind": "unicodeCodePoints",
            "originalUriBaseIds": { "%SRCROOT%": { "description": { "text": "the directory policyc ran in" } } },
            "results": results,
        }],
    });
    serde_json::to_string_pretty(&log).unwrap_or_else(|_| "{}".to_string())
}

fn level(s: Severity) -> &'static str {
    match s {
        Severity::Error => "error",
        Severity::Warning => "warning",
    }
}

/// A relative path as a URI reference: `/` kept, every byte outside the
/// unreserved set percent-encoded (a space is `%20`).
fn uri(path: &str) -> String {
    let path = path.strip_prefix("./").unwrap_or(path);
    let mut out = String::with_capacity(path.len());
    for b in path.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~/".contains(&b) {
            out.push(char::from(b));
        } else {
            let _ = write!(out, "%{b:02X}");
        }
    }
    out
}

/// Diagnostics as GitHub Actions workflow commands, one line each:
/// `::error file=F,line=L,col=C,endLine=..,endColumn=..,title=gatehouse CODE::MESSAGE`,
/// with the help on the message's second line. Values are escaped as the
/// runner requires (`%`, CR, LF; and `:` `,` in properties), so a message
/// cannot end its annotation early or start another command.
pub fn render_github(diags: &[Diagnostic], sources: &SourceMap) -> String {
    let mut out = String::new();
    for r in to_json_records(diags, sources) {
        let mut text = r.message.clone();
        if let Some(h) = &r.help {
            let _ = write!(text, "\nhelp: {h}");
        }
        let _ = writeln!(
            out,
            "::{} file={},line={},col={},endLine={},endColumn={},title={}::{}",
            level(r.severity),
            property(&r.file),
            r.line,
            r.column,
            r.end_line,
            r.end_column,
            property(&format!("gatehouse {}", r.code)),
            data(&text)
        );
    }
    out
}

fn data(s: &str) -> String {
    s.replace('%', "%25")
        .replace('\r', "%0D")
        .replace('\n', "%0A")
}

fn property(s: &str) -> String {
    data(s).replace(':', "%3A").replace(',', "%2C")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escaping() {
        assert_eq!(data("50%\nx"), "50%25%0Ax");
        assert_eq!(property("a:b,c"), "a%3Ab%2Cc");
        assert_eq!(uri("./my policies/a.policy"), "my%20policies/a.policy");
    }
}
