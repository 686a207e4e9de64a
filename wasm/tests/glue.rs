//! The glue, in a real browser: JSON in, JSON out.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

use gatehouse_wasm::{check, compile, evaluate, format, version};
use wasm_bindgen_test::*;

wasm_bindgen_test_configure!(run_in_browser);

const POLICY: &str = "policy p {\n  network {\n    allow domain github.com\n  }\n}\n";

fn parse(s: &str) -> serde_json::Value {
    serde_json::from_str(s).unwrap()
}

#[wasm_bindgen_test]
fn check_reports_diagnostics_with_spans() {
    let d = parse(&check(
        "policy p {\n  network {\n    dfault deny\n  }\n}\n",
        None,
    ));
    assert_eq!(d[0]["code"], "unknown_statement");
    assert_eq!(
        (d[0]["line"].as_u64(), d[0]["column"].as_u64()),
        (Some(3), Some(5))
    );
    assert_eq!(
        (d[0]["start"].as_u64(), d[0]["end"].as_u64()),
        (Some(27), Some(33))
    );
    assert_eq!(parse(&check(POLICY, None)), serde_json::json!([]));
    assert_eq!(d[0]["file"], "policy.policy");
    // The caller names the file its diagnostics carry (issue 37, item 7).
    let named = parse(&check(
        "policy p { netwrk off }",
        Some("agents/ci.policy".into()),
    ));
    assert_eq!(named[0]["file"], "agents/ci.policy");
    let thrown = compile("policy p { netwrk off }", Some("agents/ci.policy".into()))
        .err()
        .and_then(|e| e.as_string())
        .unwrap();
    assert_eq!(parse(&thrown)[0]["file"], "agents/ci.policy");
}

#[wasm_bindgen_test]
fn format_lays_out_or_refuses() {
    let f = parse(&format("policy p{network{allow domain github.com}}", None));
    assert_eq!(f["ok"], true);
    assert_eq!(f["text"], POLICY);
    assert_eq!(parse(&format("policy {", None))["ok"], false);
}

#[wasm_bindgen_test]
fn a_handle_decides_repeatedly() {
    let h = compile(POLICY, None).map_err(|_| ()).unwrap();
    assert_eq!(parse(&h.policies()), serde_json::json!(["p"]));
    let d = parse(&h.evaluate(
        "",
        "connect github.com:443\n{\"kind\":\"connect\",\"host\":\"10.0.0.1\",\"port\":22}\nbogus",
    ));
    assert_eq!(d[0]["decision"], "allow");
    assert_eq!(d[0]["rule"]["line"], 3);
    assert_eq!(d[1]["reason"], "local_address");
    assert!(d[2]["error"].as_str().unwrap().contains("bogus"));
    assert!(compile("policy p { netwrk off }", None).is_err());
    assert!(parse(&evaluate("policy p { netwrk off }", "", "upstream"))["errors"].is_array());
    assert!(!version().is_empty());
}

/// A nesting bomb and an oversized source, in the browser: every entry point
/// answers with the diagnostic, never a stack overflow (the Node side is
/// `wasm/tests/hostile.test.mjs`).
#[wasm_bindgen_test]
fn hostile_sources_get_their_diagnostics_from_every_entry_point() {
    let braces = "{".repeat(20_000);
    let bombs = [
        format!("policy p {{\n  network {{\n    allow domain x.example {braces}\n  }}\n}}\n"),
        format!("policy p {{\n  guardian {{\n    deny command ~ r\"a\\\";{braces}\"\n  }}\n}}\n"),
        format!("policy p {{ network {{ allow domain \"ar\" {braces}\n}} }}\n"),
        format!("policy p {{ network {{ allow domain \"x {braces}\n}} }}\n"),
    ];
    let huge = "# padding\n".repeat(9 * 1024 * 1024 / 10 + 1);
    let cases = bombs
        .iter()
        .map(|b| (b.as_str(), "too_deeply_nested"))
        .chain([(huge.as_str(), "source_too_large")]);
    for (text, code) in cases {
        let codes = |v: &serde_json::Value| -> Vec<String> {
            v.as_array()
                .unwrap()
                .iter()
                .map(|d| d["code"].as_str().unwrap().to_string())
                .collect()
        };
        assert_eq!(codes(&parse(&check(text, None))), [code]);
        let f = parse(&format(text, None));
        assert_eq!(f["ok"], false);
        assert_eq!(codes(&f["diagnostics"]), [code]);
        let thrown = compile(text, None)
            .err()
            .and_then(|e| e.as_string())
            .unwrap();
        assert_eq!(codes(&parse(&thrown)), [code]);
        let r = parse(&evaluate(text, "", "connect github.com:443"));
        assert_eq!(codes(&r["errors"]), [code]);
    }
}
