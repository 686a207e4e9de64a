//! `policyc hook`: real-shaped hook events of Codex and Claude Code in,
//! the answer each harness enforces out; every failure a deny.

use std::io::Write as _;
use std::process::{Command, Output, Stdio};

const POLICY: &str = r#"policy agent {
  sandbox workspace-write {
    none "secrets"
  }
  approvals on-request
  network {
    allow domain github.com
    deny domain **.attacker.example
  }
  commands {
    forbid rm -rf because "never wipe a tree"
    prompt git push because "publishing needs a person"
  }
  mcp {
    server github approve
    tool github/delete_repo prompt
  }
  web_search live
}
"#;

/// A folder with the policy and a session folder (`ws`) inside.
struct Fixture {
    dir: std::path::PathBuf,
}

impl Fixture {
    fn new(name: &str, policy: &str) -> Fixture {
        let dir =
            std::env::temp_dir().join(format!("gatehouse-hook-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("ws/.git/hooks")).unwrap();
        std::fs::create_dir_all(dir.join("ws/secrets")).unwrap();
        std::fs::write(dir.join("agent.policy"), policy).unwrap();
        Fixture { dir }
    }

    fn ws(&self) -> String {
        self.dir.join("ws").display().to_string()
    }

    fn policy(&self) -> String {
        self.dir.join("agent.policy").display().to_string()
    }

    /// `policyc hook HARNESS POLICY EXTRA...` with `event` on stdin.
    fn hook(&self, harness: &str, extra: &[&str], event: &str) -> Output {
        let mut child = Command::new(env!("CARGO_BIN_EXE_policyc"))
            .arg("hook")
            .arg(harness)
            .args(extra)
            .arg(self.policy())
            .current_dir(&self.dir)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let _ = child.stdin.take().unwrap().write_all(event.as_bytes());
        child.wait_with_output().unwrap()
    }

    fn event(&self, name: &str, tool: &str, input: serde_json::Value) -> String {
        serde_json::json!({
            "session_id": "s-1",
            "turn_id": "t-1",
            "tool_use_id": "call-7",
            "cwd": self.ws(),
            "hook_event_name": name,
            "model": "gpt-5.5",
            "permission_mode": "default",
            "tool_name": tool,
            "tool_input": input,
        })
        .to_string()
    }
}

impl Drop for Fixture {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// The PreToolUse decision in the answer (`None`: nothing printed).
fn decision(o: &Output) -> Option<(String, String)> {
    assert_eq!(
        o.status.code(),
        Some(0),
        "stderr: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    let out = String::from_utf8_lossy(&o.stdout);
    if out.trim().is_empty() {
        return None;
    }
    let v: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
    let h = &v["hookSpecificOutput"];
    if h["hookEventName"] == "PermissionRequest" {
        return Some((
            h["decision"]["behavior"].as_str().unwrap().to_string(),
            h["decision"]["message"]
                .as_str()
                .unwrap_or_default()
                .to_string(),
        ));
    }
    assert_eq!(h["hookEventName"], "PreToolUse", "{out}");
    Some((
        h["permissionDecision"].as_str().unwrap().to_string(),
        h["permissionDecisionReason"].as_str().unwrap().to_string(),
    ))
}

fn denied(o: &Output) -> String {
    match decision(o) {
        Some((d, why)) if d == "deny" && !why.is_empty() => why,
        other => panic!("expected a deny with a reason, got {other:?}"),
    }
}

#[test]
fn claude_code_tool_calls_are_decided_by_the_policy() {
    let f = Fixture::new("claude", POLICY);
    let ws = f.ws();
    let pre = |tool: &str, input: serde_json::Value| {
        decision(&f.hook("claude-code", &[], &f.event("PreToolUse", tool, input)))
    };
    let d = |tool: &str, input: serde_json::Value| pre(tool, input).map(|(d, _)| d);
    // Commands through the shell reader: a compound command is judged by
    // each of its commands.
    assert_eq!(
        d(
            "Bash",
            serde_json::json!({"command": "touch a && rm -rf build"})
        )
        .as_deref(),
        Some("deny")
    );
    assert_eq!(
        d(
            "Bash",
            serde_json::json!({"command": "cd src && git push origin main"})
        )
        .as_deref(),
        Some("ask")
    );
    assert_eq!(
        d("Bash", serde_json::json!({"command": "git status"})).as_deref(),
        Some("allow")
    );
    // Where Claude Code would run the call without asking anyone, the
    // person the policy wants is not there: a deny that says so.
    for mode in ["bypassPermissions", "acceptEdits", "dontAsk", "auto", ""] {
        let mut e: serde_json::Value = serde_json::from_str(&f.event(
            "PreToolUse",
            "Bash",
            serde_json::json!({"command": "git push origin main"}),
        ))
        .unwrap();
        e["permission_mode"] = serde_json::json!(mode);
        let why = denied(&f.hook("claude-code", &[], &e.to_string()));
        assert!(why.contains("asking anyone"), "{mode}: {why}");
    }
    // The hook's own policy and the harness's settings are never written.
    for path in [f.policy(), format!("{ws}/.claude/settings.json")] {
        let why = denied(&f.hook(
            "claude-code",
            &[],
            &f.event(
                "PreToolUse",
                "Write",
                serde_json::json!({"file_path": path, "content": "x"}),
            ),
        ));
        assert!(why.contains("no tool call writes it"), "{path}: {why}");
    }
    // Files.
    assert_eq!(d("Edit", serde_json::json!({"file_path": format!("{ws}/src/lib.rs"), "old_string": "a", "new_string": "b"})).as_deref(), Some("allow"));
    assert_ne!(
        d(
            "Write",
            serde_json::json!({"file_path": format!("{ws}/.git/hooks/pre-commit"), "content": "x"})
        )
        .as_deref(),
        Some("allow")
    );
    // `~` is the home folder, not a folder named `~` in the workspace.
    assert_ne!(
        d(
            "Write",
            serde_json::json!({"file_path": "~/.bashrc", "content": "x"})
        )
        .as_deref(),
        Some("allow")
    );
    // A glob reaching outside the workspace is judged by where it reaches.
    assert_ne!(
        d(
            "Glob",
            serde_json::json!({"pattern": format!("{ws}/secrets/*")})
        )
        .as_deref(),
        Some("allow")
    );
    // A `none` path under `approvals on-request`: a person may approve.
    assert_eq!(
        d(
            "Read",
            serde_json::json!({"file_path": format!("{ws}/secrets/prod.key")})
        )
        .as_deref(),
        Some("ask")
    );
    assert_eq!(
        d("Read", serde_json::json!({"file_path": "src/lib.rs"})).as_deref(),
        Some("allow")
    );
    // The network.
    assert_eq!(
        d(
            "WebFetch",
            serde_json::json!({"url": "https://github.com/x", "prompt": "p"})
        )
        .as_deref(),
        Some("allow")
    );
    assert_eq!(
        d(
            "WebFetch",
            serde_json::json!({"url": "https://exfil.attacker.example/", "prompt": "p"})
        )
        .as_deref(),
        Some("deny")
    );
    assert_eq!(
        d(
            "WebFetch",
            serde_json::json!({"url": "https://u:p@github.com/", "prompt": "p"})
        )
        .as_deref(),
        Some("deny")
    );
    assert_eq!(
        d("WebSearch", serde_json::json!({"query": "q"})).as_deref(),
        Some("allow")
    );
    // MCP: a destructive tool needs a person.
    assert_eq!(
        d("mcp__github__get_issue", serde_json::json!({"n": 1})).as_deref(),
        Some("allow")
    );
    assert_eq!(
        d("mcp__github__delete_repo", serde_json::json!({"repo": "x"})).as_deref(),
        Some("ask")
    );
    // The harness's own bookkeeping: nothing said.
    assert_eq!(pre("TodoWrite", serde_json::json!({"todos": []})), None);
    // A deny names the rule and the policy.
    let (_, why) = pre("Bash", serde_json::json!({"command": "rm -rf /"})).unwrap();
    assert!(
        why.contains("policy `agent`") && why.contains("never wipe a tree"),
        "{why}"
    );
}

#[test]
fn codex_enforces_only_deny_so_ask_is_a_deny_and_allow_says_nothing() {
    let f = Fixture::new("codex", POLICY);
    let pre = |tool: &str, input: serde_json::Value| {
        f.hook("codex", &[], &f.event("PreToolUse", tool, input))
    };
    assert!(
        denied(&pre("Bash", serde_json::json!({"command": "rm -rf build"}))).contains("never wipe")
    );
    // What needs a person (a `none` path under on-request) is refused in
    // Codex, the reason saying so.
    let why = denied(&pre(
        "view_image",
        serde_json::json!({"path": "secrets/prod.key"}),
    ));
    assert!(why.contains("person"), "{why}");
    let why = denied(&pre("Bash", serde_json::json!({"command": "git push"})));
    assert!(why.contains("person"), "{why}");
    assert_eq!(
        decision(&pre("Bash", serde_json::json!({"command": "git status"}))),
        None
    );
    // apply_patch: every file it touches, relative to the session.
    let patch = "*** Begin Patch\n*** Update File: src/lib.rs\n@@\n-a\n+b\n*** Add File: .git/hooks/pre-commit\n+#!/bin/sh\n*** End Patch\n";
    denied(&pre("apply_patch", serde_json::json!({"command": patch})));
    let patch = "*** Begin Patch\n*** Update File: src/lib.rs\n@@\n-a\n+b\n*** End Patch\n";
    assert_eq!(
        decision(&pre("apply_patch", serde_json::json!({"command": patch}))),
        None
    );
    denied(&pre(
        "apply_patch",
        serde_json::json!({"command": "*** Begin Patch\n*** End Patch\n"}),
    ));
    // A tool the table does not name is refused by name.
    assert!(denied(&pre("teleport", serde_json::json!({}))).contains("`teleport`"));
}

#[test]
fn every_failure_is_a_deny_with_its_reason() {
    let f = Fixture::new("fail", POLICY);
    for harness in ["codex", "claude-code"] {
        // Malformed events.
        for event in [
            "",
            "not json",
            "[]",
            "{}",
            r#"{"hook_event_name":"PreToolUse"}"#,
            r#"{"hook_event_name":"Stop","tool_name":"Bash"}"#,
        ] {
            denied(&f.hook(harness, &[], event));
        }
        // No cwd, or a relative one.
        let e = serde_json::json!({"hook_event_name": "PreToolUse", "tool_name": "Bash", "tool_input": {"command": "ls"}, "cwd": "rel"});
        denied(&f.hook(harness, &[], &e.to_string()));
        // A policy that does not load.
        let broken = Fixture::new(
            &format!("broken-{harness}"),
            "policy agent {\n  network { allow domian github.com }\n}\n",
        );
        let why = denied(&broken.hook(
            harness,
            &[],
            &broken.event("PreToolUse", "Bash", serde_json::json!({"command": "ls"})),
        ));
        assert!(why.contains("does not load"), "{why}");
        // A policy whose load and decision pass the deadline.
        let mut big = String::from("policy agent {\n  network {\n");
        for i in 0..40_000 {
            big.push_str(&format!("    allow domain h{i}.example.com\n"));
        }
        big.push_str("  }\n}\n");
        let slow = Fixture::new(&format!("slow-{harness}"), &big);
        let why = denied(&slow.hook(
            harness,
            &["--deadline-ms", "5"],
            &slow.event("PreToolUse", "Bash", serde_json::json!({"command": "ls"})),
        ));
        assert!(why.contains("within 5 ms"), "{why}");
        // The same policy within a generous deadline decides.
        let o = slow.hook(
            harness,
            &["--deadline-ms", "60000"],
            &slow.event(
                "PreToolUse",
                "WebFetch",
                serde_json::json!({"url": "https://h7.example.com/"}),
            ),
        );
        if harness == "claude-code" {
            assert_eq!(decision(&o).map(|(d, _)| d).as_deref(), Some("allow"));
        }
    }
}

#[test]
fn permission_requests_need_the_guardian_to_let_them_through() {
    // The default guardian approves no action that no model assessed.
    let f = Fixture::new("perm", POLICY);
    let e = f.event(
        "PermissionRequest",
        "Bash",
        serde_json::json!({"command": "git status", "description": "leaves the sandbox"}),
    );
    let why = denied(&f.hook("claude-code", &[], &e));
    assert!(why.contains("guardian"), "{why}");
    denied(&f.hook("codex", &[], &e));
    // A guardian that lets unassessed high-risk actions through approves
    // them, unless one of its deny rules or the policy refuses the call.
    let open = POLICY.replace(
        "  web_search live\n",
        "  web_search live\n  guardian {\n    deny command git push --force\n    authorize high with unknown\n  }\n",
    );
    let g = Fixture::new("perm-open", &open);
    let ok = |input: serde_json::Value| {
        decision(&g.hook("codex", &[], &g.event("PermissionRequest", "Bash", input)))
            .map(|(d, _)| d)
    };
    assert_eq!(
        ok(serde_json::json!({"command": "git status"})).as_deref(),
        Some("allow")
    );
    assert_eq!(
        ok(serde_json::json!({"command": "git push --force origin main"})).as_deref(),
        Some("deny")
    );
    assert_eq!(
        ok(serde_json::json!({"command": "rm -rf /"})).as_deref(),
        Some("deny")
    );
}

#[test]
fn decisions_are_logged_and_a_log_that_cannot_be_written_changes_nothing() {
    let f = Fixture::new("log", POLICY);
    let log = f.dir.join("decisions.jsonl").display().to_string();
    let e = f.event(
        "PreToolUse",
        "Bash",
        serde_json::json!({"command": "rm -rf /"}),
    );
    denied(&f.hook("claude-code", &["--log", &log], &e));
    let line: serde_json::Value =
        serde_json::from_str(std::fs::read_to_string(&log).unwrap().trim()).unwrap();
    assert_eq!(line["decision"], "deny");
    assert_eq!(line["session_id"], "s-1");
    assert_eq!(line["tool_use_id"], "call-7");
    assert_eq!(line["tool"], "Bash");
    let o = f.hook("claude-code", &["--log", "/proc/no/such/log"], &e);
    denied(&o);
    assert!(String::from_utf8_lossy(&o.stderr).contains("cannot write the decision log"));
}

#[test]
fn a_harness_that_never_finishes_the_event_gets_a_deny_at_the_deadline() {
    use std::io::Read as _;
    let f = Fixture::new("stalled", POLICY);
    let mut child = Command::new(env!("CARGO_BIN_EXE_policyc"))
        .args(["hook", "codex", "--deadline-ms", "300"])
        .arg(f.policy())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Half an event, and standard input left open.
    let mut stdin = child.stdin.take().unwrap();
    stdin
        .write_all(br#"{"hook_event_name":"PreToolUse","tool_name":"Bash""#)
        .unwrap();
    let mut out = String::new();
    child
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut out)
        .unwrap();
    let status = child.wait().unwrap();
    drop(stdin);
    assert_eq!(status.code(), Some(0));
    let v: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(
        v["hookSpecificOutput"]["permissionDecision"], "deny",
        "{out}"
    );
    assert!(
        v["hookSpecificOutput"]["permissionDecisionReason"]
            .as_str()
            .unwrap()
            .contains("within 300 ms"),
        "{out}"
    );
}
