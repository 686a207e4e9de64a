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
    let location = |file: &str, line: usize, column: usize| {
        // A relative path is resolved against the checkout; an absolute
        // one is a `file:` URI of its own.
        let artifact = if file.starts_with('/') {
            json!({ "uri": format!("file://{}", uri(file)) })
        } else {
            json!({ "uri": uri(file), "uriBaseId": "%SRCROOT%" })
        };
        json!({
            "physicalLocation": {
                "artifactLocation": artifact,
                "region": { "startLine": line.max(1), "startColumn": column.max(1) },
            }
        })
    };
    let results: Vec<Value> = records
        .iter()
        .map(|r| {
            let mut text = r.message.clone();
            if let Some(h) = &r.help {
                let _ = write!(text, "\nhelp: {h}");
            }
            let mut loc = location(&r.file, r.line, r.column);
            if let Some(region) = loc.pointer_mut("/physicalLocation/region") {
                region["endLine"] = json!(r.end_line.max(r.line).max(1));
                region["endColumn"] = json!(r.end_column.max(1));
            }
            let related: Vec<Value> = r
                .related
                .iter()
                .enumerate()
                .map(|(i, rel)| {
                    let mut l = location(&rel.file, rel.line, rel.column);
                    l["id"] = json!(i);
                    l["message"] = json!({ "text": rel.message });
                    l
                })
                .collect();
            let mut result = json!({
                "ruleId": r.code,
                "ruleIndex": codes.iter().position(|(c, _)| *c == r.code).unwrap_or(0),
                "level": level(r.severity),
                "message": { "text": text },
                "locations": [loc],
            });
            if !related.is_empty() {
                result["relatedLocations"] = Value::Array(related);
            }
            result
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
