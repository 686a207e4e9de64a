//! Tests of `agent.rs`.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]
use super::*;

const CMD: &str = "/usr/local/bin/policyc hook claude-code /repo/agent.policy";

#[test]
fn words_are_quoted_for_a_shell() {
    assert_eq!(quote("/usr/bin/policyc"), "/usr/bin/policyc");
    assert_eq!(quote("/my repo/a.policy"), "'/my repo/a.policy'");
    assert_eq!(quote("it's"), r"'it'\''s'");
    assert_eq!(quote("$(rm -rf /)"), "'$(rm -rf /)'");
    let c = hook_command(
        Harness::Codex,
        Path::new("/opt/gh/policyc"),
        Path::new("/my repo/agent.policy"),
        Some("agent"),
        Some(Path::new("/var/log/h.jsonl")),
    );
    assert_eq!(
        c,
        "/opt/gh/policyc hook codex --policy agent --log /var/log/h.jsonl '/my repo/agent.policy'"
    );
    assert_eq!(
        first_words("'/my dir/policyc' hook x", 3),
        vec!["/my dir/policyc", "hook", "x"]
    );
    assert_eq!(first_words(r#"a\ b "c d" e"#, 2), vec!["a b", "c d"]);
    assert!(first_words("$(evil) hook", 2).is_empty());
}

#[test]
fn install_keeps_every_other_setting_and_is_idempotent() {
    let old = r#"{
  "model": "opus",
  "permissions": {"deny": ["Bash(curl:*)"]},
  "hooks": {
"PreToolUse": [
  {"matcher": "Bash", "hooks": [{"type": "command", "command": "/home/me/lint.sh"}]},
  {"matcher": "*", "hooks": [{"type": "command", "command": "/old/place/policyc hook claude-code /x.policy"}]}
],
"Stop": [{"hooks": [{"type": "command", "command": "notify-send done"}]}]
  }
}"#;
    let once = install(Harness::ClaudeCode, Some(old), CMD).unwrap();
    let twice = install(Harness::ClaudeCode, Some(&once), CMD).unwrap();
    assert_eq!(once, twice);
    let v: Value = serde_json::from_str(&once).unwrap();
    assert_eq!(v["model"], "opus");
    assert_eq!(v["permissions"]["deny"][0], "Bash(curl:*)");
    assert_eq!(
        v["hooks"]["Stop"][0]["hooks"][0]["command"],
        "notify-send done"
    );
    let pre = v["hooks"]["PreToolUse"].as_array().unwrap();
    // The user's own hook stays; the old gatehouse one is replaced.
    assert_eq!(pre.len(), 2);
    assert_eq!(pre[0]["hooks"][0]["command"], "/home/me/lint.sh");
    assert_eq!(pre[1]["hooks"][0]["command"], CMD);
    assert_eq!(pre[1]["hooks"][0]["onFailure"], "block");
    assert_eq!(pre[1]["matcher"], "*");
    assert_eq!(
        v["hooks"]["PermissionRequest"][0]["hooks"][0]["command"],
        CMD
    );
    // Removing restores the rest: only the user's hooks remain.
    let out = uninstall(&once).unwrap().unwrap();
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["hooks"]["PreToolUse"].as_array().unwrap().len(), 1);
    assert!(v["hooks"].get("PermissionRequest").is_none());
    assert_eq!(uninstall(&out).unwrap(), None);
}

#[test]
fn a_group_shared_with_another_hook_keeps_that_hook() {
    let old = r#"{"hooks": {"PreToolUse": [{"hooks": [
        {"type": "command", "command": "policyc hook codex /p"},
        {"type": "command", "command": "/bin/audit"}]}]}}"#;
    let out = uninstall(old).unwrap().unwrap();
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(
        v["hooks"]["PreToolUse"][0]["hooks"][0]["command"],
        "/bin/audit"
    );
}

#[test]
fn codex_handlers_have_no_matcher_and_no_on_failure() {
    let out = install(Harness::Codex, None, CMD).unwrap();
    let v: Value = serde_json::from_str(&out).unwrap();
    let g = &v["hooks"]["PreToolUse"][0];
    assert!(g.get("matcher").is_none());
    assert!(g["hooks"][0].get("onFailure").is_none());
    assert_eq!(g["hooks"][0]["timeout"], 30);
    // Emptied again, nothing is left: the file can go.
    let out = uninstall(&out).unwrap().unwrap();
    assert_eq!(out.trim(), "{}");
}

#[test]
fn files_that_cannot_be_read_are_never_overwritten() {
    for (bad, want) in [
        ("{ not json", "not JSON"),
        ("[1, 2]", "a JSON object"),
        (r#"{"hooks": []}"#, "`hooks` is not an object"),
        (
            r#"{"hooks": {"PreToolUse": {}}}"#,
            "`hooks.PreToolUse` is not a list",
        ),
        (r#"{"hooks": {"PreToolUse": [7]}}"#, "`hooks.PreToolUse[0]`"),
    ] {
        let e = install(Harness::ClaudeCode, Some(bad), CMD).unwrap_err();
        assert!(e.to_string().contains(want), "{bad}: {e}");
    }
    assert!(install(Harness::ClaudeCode, Some("  \n"), CMD).is_ok());
}

#[test]
fn the_requirements_pin_keeps_the_rest_of_the_file() {
    let old = "# the admins' file\nallowed_approval_policies = [\"never\"]\n\n[features]\n# a comment\nweb_search = false\n";
    let new = pinned(old).unwrap();
    assert!(new.starts_with("# the admins' file\nallowed_approval_policies = [\"never\"]\n"));
    assert!(
        new.contains("# a comment\nweb_search = false\nhooks = true\n"),
        "{new}"
    );
    assert_eq!(pinned(&new).unwrap(), new);
    assert_eq!(pinned("").unwrap(), "[features]\nhooks = true\n");
    assert!(pinned("[features\n").is_err());
    assert!(pinned("features = 3\n").is_err());
    assert!(
        pinned("[features]\nhooks = false\n")
            .unwrap()
            .contains("hooks = true")
    );
}

#[test]
fn only_policyc_hook_commands_are_ours() {
    let h = |c: &str| serde_json::json!({"type": "command", "command": c});
    assert!(is_ours(&h("policyc hook codex /p")));
    assert!(is_ours(&h("'/my dir/policyc' hook claude-code /p")));
    assert!(!is_ours(&h("/bin/policyc check /p")));
    assert!(!is_ours(&h("/bin/my-policyc-wrapper hook /p")));
    assert!(!is_ours(&h("echo policyc hook")));
    assert!(!is_ours(&serde_json::json!({"type": "prompt"})));
}
