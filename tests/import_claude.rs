//! `policyc import claude-code`: the corpus of real-shaped settings files
//! and their expected decisions, malformed rules, and layering
//! (docs/importing.md, "Claude Code settings").

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic
)]

use gatehouse::PolicySet;
use gatehouse::import::Severity;

/// Claude Code settings files shaped like the ones public repositories
/// hold (`tests/data/import/claude-code/SOURCES.md`): each imports, passes
/// `check`, and decides the queries `policyc hook` asks for Claude Code's
/// tool calls as `expected.txt` says; the malformed one is refused with
/// every error at its line. tests/agents/claude_import.py runs the real
/// Claude Code on five of them, with its own rules and through the hook.
#[test]
fn claude_code_settings_decide_as_expected() {
    use gatehouse::import::claude::{Layer, Settings};
    let dir = format!(
        "{}/tests/data/import/claude-code",
        env!("CARGO_MANIFEST_DIR")
    );
    let table = std::fs::read_to_string(format!("{dir}/expected.txt")).unwrap();
    let mut rows: std::collections::BTreeMap<String, Vec<(String, String, String)>> =
        Default::default();
    for line in table
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
    {
        let parts: Vec<&str> = line.split(" | ").map(str::trim).collect();
        let [file, query, decision, reason] = parts.as_slice() else {
            panic!("bad row `{line}`")
        };
        rows.entry(file.to_string()).or_default().push((
            query.to_string(),
            decision.to_string(),
            reason.to_string(),
        ));
    }
    let mut wrong = Vec::new();
    let mut files = 0;
    for (name, expected) in rows {
        let text = std::fs::read_to_string(format!("{dir}/{name}.json")).unwrap();
        let i = gatehouse::import::claude::import(&[Settings {
            name: format!("{name}.json"),
            text: &text,
            layer: Layer::Project,
        }]);
        assert!(!i.has_errors(), "{name}: {:?}", i.notes);
        let unknown: Vec<&str> = (i.notes.iter())
            .filter(|n| {
                n.message.contains("unknown key")
                    && !n.message.contains("allow")
                    && !n.message.contains("preferences")
            })
            .map(|n| n.message.as_str())
            .collect();
        assert!(unknown.is_empty(), "{name}: {unknown:?}");
        let set = PolicySet::from_source(&name, &i.text)
            .unwrap_or_else(|e| panic!("{name} does not check:\n{e}\n{}", i.text));
        let p = set.policies().next().unwrap();
        files += 1;
        for (query, decision, reason) in expected {
            let d = p.decide(&gatehouse::Query::parse(&query).unwrap());
            if (d.outcome.as_str(), d.reason.as_str()) != (decision.as_str(), reason.as_str()) {
                wrong.push(format!(
                    "{name} | {query} | want {decision} {reason} | got {} {}",
                    d.outcome.as_str(),
                    d.reason.as_str()
                ));
            }
        }
    }
    assert!(files >= 10, "{files} files");
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
fn malformed_claude_code_rules_are_refused_each_at_its_line() {
    use gatehouse::import::claude::{Layer, Settings};
    let text = std::fs::read_to_string(format!(
        "{}/tests/data/import/claude-code/09-malformed.json",
        env!("CARGO_MANIFEST_DIR")
    ))
    .unwrap();
    let i = gatehouse::import::claude::import(&[Settings {
        name: "09-malformed.json".into(),
        text: &text,
        layer: Layer::Project,
    }]);
    let errors: Vec<(usize, &str)> = (i.notes.iter())
        .filter(|n| n.severity == Severity::Error)
        .map(|n| (n.line, n.message.as_str()))
        .collect();
    assert_eq!(
        errors.iter().map(|e| e.0).collect::<Vec<_>>(),
        [5, 6, 7],
        "{errors:?}"
    );
    assert!(
        errors[0].1.contains("write `Bash(git push:*)`"),
        "{errors:?}"
    );
    assert!(i.has_errors());
}

/// Layers: lists are joined, a single value comes from the highest layer,
/// and a managed `allowManagedPermissionRulesOnly` drops the others' rules.
#[test]
fn claude_code_layers_join_lists_and_take_the_highest_value() {
    use gatehouse::import::claude::{Layer, Settings};
    let user = r#"{"permissions": {"deny": ["Bash(curl:*)"], "defaultMode": "bypassPermissions"}}"#;
    let project =
        r#"{"permissions": {"allow": ["Bash(npm run:*)"], "deny": ["Bash(git push:*)"]}}"#;
    let local = r#"{"permissions": {"defaultMode": "default"}}"#;
    let s = |name: &str, text: &'static str, layer| Settings {
        name: name.into(),
        text,
        layer,
    };
    let i = gatehouse::import::claude::import(&[
        s("local.json", local, Layer::Local),
        s("user.json", user, Layer::User),
        s("project.json", project, Layer::Project),
    ]);
    assert!(!i.has_errors(), "{:?}", i.notes);
    let set = PolicySet::from_source("layers", &i.text).unwrap();
    let p = set.policies().next().unwrap();
    let decide = |q: &str| {
        let d = p.decide(&gatehouse::Query::parse(q).unwrap());
        (
            d.outcome.as_str().to_string(),
            d.reason.as_str().to_string(),
        )
    };
    // Both deny lists hold; the local default mode beats the user's bypass.
    assert_eq!(decide(r#"exec bash -c "curl x""#).0, "deny");
    assert_eq!(decide(r#"exec bash -c "git push""#).0, "deny");
    assert_eq!(
        decide(r#"exec bash -c "make""#),
        ("ask".into(), "not_known_safe".into())
    );
    assert!(i.text.contains("(line 1 of settings 2)"), "{}", i.text);
    let managed =
        r#"{"allowManagedPermissionRulesOnly": true, "permissions": {"deny": ["Bash(rm:*)"]}}"#;
    let i = gatehouse::import::claude::import(&[
        s("project.json", project, Layer::Project),
        s("managed-settings.json", managed, Layer::Managed),
    ]);
    let set = PolicySet::from_source("managed", &i.text).unwrap();
    let p = set.policies().next().unwrap();
    let d = p.decide(&gatehouse::Query::parse(r#"exec bash -c "git push""#).unwrap());
    assert_eq!(d.outcome.as_str(), "ask", "{}", i.text);
    let d = p.decide(&gatehouse::Query::parse(r#"exec bash -c "rm x""#).unwrap());
    assert_eq!(d.outcome.as_str(), "deny", "{}", i.text);
    assert!(
        i.notes
            .iter()
            .any(|n| n.input == gatehouse::import::Input::Settings(0)
                && n.message.contains("allowManagedPermissionRulesOnly"))
    );
}
