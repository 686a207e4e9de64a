//! Tests of `map.rs`.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]
use super::*;

fn connect(url: &str) -> Result<(String, i64, Via), String> {
    match fetch("WebFetch", url) {
        Ok(Query::Connect { host, port, via }) => Ok((host, port, via)),
        Ok(q) => Err(format!("{q:?}")),
        Err(Unmapped(why)) => Err(why),
    }
}

#[test]
fn urls_become_connections_and_odd_ones_are_refused() {
    assert_eq!(
        connect("https://api.github.com/repos").unwrap(),
        ("api.github.com".into(), 443, Via::Https)
    );
    assert_eq!(
        connect("HTTP://Example.COM.:8080?q").unwrap(),
        ("Example.COM.".into(), 8080, Via::Http)
    );
    assert_eq!(
        connect("https://[::1]:8443/x").unwrap(),
        ("::1".into(), 8443, Via::Https)
    );
    assert_eq!(
        connect("https://[::ffff:10.0.0.1]/").unwrap(),
        ("::ffff:10.0.0.1".into(), 443, Via::Https)
    );
    assert_eq!(
        connect("http://2130706433/").unwrap(),
        ("2130706433".into(), 80, Via::Http)
    );
    for bad in [
        "https://user:pw@github.com/",
        "https://github.com@evil.example/",
        "https://evil.example\\@github.com/",
        "ftp://github.com/",
        "github.com/x",
        "https:///x",
        "https://github.com:99999/",
        "https://github.com:/",
        "https://github.com:443x/",
        "https://gith%75b.com/",
        "https://[::1/",
        "https://a b/",
    ] {
        assert!(connect(bad).is_err(), "{bad}: {:?}", connect(bad));
    }
}

#[test]
fn shell_commands_go_to_the_shell_reader_whole() {
    let input =
        serde_json::json!({"command": "cd x && git push origin main", "description": "push"});
    let q = queries(Harness::ClaudeCode, "Bash", &input, "/w").unwrap();
    assert_eq!(
        q,
        Mapped::Ask(vec![Query::Exec {
            argv: vec![
                "bash".into(),
                "-c".into(),
                "cd x && git push origin main".into()
            ],
            escalate: false
        }])
    );
    let words = serde_json::json!({"command": ["git", "push"]});
    assert!(matches!(
        queries(Harness::Codex, "shell", &words, "/w").unwrap(),
        Mapped::Ask(q) if q == vec![Query::Exec { argv: vec!["git".into(), "push".into()], escalate: false }]
    ));
}

#[test]
fn unknown_tools_and_malformed_inputs_are_refused_by_name() {
    let e = queries(
        Harness::ClaudeCode,
        "Teleport",
        &serde_json::json!({}),
        "/w",
    )
    .unwrap_err();
    assert!(
        e.0.contains("`Teleport`") && e.0.contains("claude-code"),
        "{}",
        e.0
    );
    // A Codex-only tool is unknown to Claude Code, and the reverse.
    assert!(
        queries(
            Harness::ClaudeCode,
            "apply_patch",
            &serde_json::json!({"command": "x"}),
            "/w"
        )
        .is_err()
    );
    assert!(
        queries(
            Harness::Codex,
            "Write",
            &serde_json::json!({"file_path": "/w/x"}),
            "/w"
        )
        .is_err()
    );
    for input in [
        serde_json::json!({}),
        serde_json::json!({"command": ""}),
        serde_json::json!({"command": 7}),
    ] {
        assert!(
            queries(Harness::ClaudeCode, "Bash", &input, "/w").is_err(),
            "{input}"
        );
    }
    assert!(
        queries(
            Harness::ClaudeCode,
            "mcp__github",
            &serde_json::json!({}),
            "/w"
        )
        .is_err()
    );
    assert!(
        queries(
            Harness::ClaudeCode,
            "mcp____x",
            &serde_json::json!({}),
            "/w"
        )
        .is_err()
    );
}

/// The rows added for Claude Code 2.1.332 and Codex 0.171.0: what
/// runs a command or opens a connection is judged as such; what runs
/// where no hook sees it is refused; bookkeeping asks nothing.
#[test]
fn background_commands_remote_agents_worktrees_and_stdin() {
    let ask = |h, tool, input: serde_json::Value| queries(h, tool, &input, "/w");
    let exec = |c: &str| Query::Exec {
        argv: vec!["bash".into(), "-c".into(), c.into()],
        escalate: false,
    };
    assert_eq!(
        ask(
            Harness::ClaudeCode,
            "Monitor",
            serde_json::json!({"command": "tail -f log", "description": "d", "timeout_ms": 1})
        )
        .unwrap(),
        Mapped::Ask(vec![exec("tail -f log")])
    );
    assert_eq!(
        ask(
            Harness::ClaudeCode,
            "Monitor",
            serde_json::json!({"ws": {"url": "wss://evil.example/feed"}})
        )
        .unwrap(),
        Mapped::Ask(vec![Query::Connect {
            host: "evil.example".into(),
            port: 443,
            via: Via::Https
        }])
    );
    assert!(
        ask(
            Harness::ClaudeCode,
            "Monitor",
            serde_json::json!({"command": "x", "ws": {"url": "wss://a/"}})
        )
        .is_err()
    );
    assert!(
        ask(
            Harness::ClaudeCode,
            "Agent",
            serde_json::json!({"prompt": "p", "isolation": "remote"})
        )
        .is_err()
    );
    assert_eq!(
        ask(
            Harness::ClaudeCode,
            "Agent",
            serde_json::json!({"prompt": "p", "isolation": "worktree"})
        )
        .unwrap(),
        Mapped::Nothing
    );
    assert!(matches!(
        ask(Harness::ClaudeCode, "EnterWorktree", serde_json::json!({"name": "n"})).unwrap(),
        Mapped::Ask(q) if matches!(&q[..], [Query::Write { path, .. }] if path == "/w/.git/worktrees")
    ));
    assert_eq!(
        ask(
            Harness::ClaudeCode,
            "ExitWorktree",
            serde_json::json!({"action": "keep"})
        )
        .unwrap(),
        Mapped::Nothing
    );
    assert!(matches!(
        ask(
            Harness::ClaudeCode,
            "ExitWorktree",
            serde_json::json!({"action": "remove"})
        )
        .unwrap(),
        Mapped::Ask(_)
    ));
    assert_eq!(
        ask(
            Harness::Codex,
            "write_stdin",
            serde_json::json!({"session_id": 1, "chars": ""})
        )
        .unwrap(),
        Mapped::Nothing
    );
    assert_eq!(
        ask(
            Harness::Codex,
            "write_stdin",
            serde_json::json!({"session_id": 1, "chars": "rm -rf /\n"})
        )
        .unwrap(),
        Mapped::Ask(vec![exec("rm -rf /\n")])
    );
    for t in ["ToolSearch", "Workflow", "CronCreate", "SendMessage"] {
        assert_eq!(
            ask(Harness::ClaudeCode, t, serde_json::json!({})).unwrap(),
            Mapped::Nothing
        );
    }
    assert!(matches!(
        ask(Harness::Codex, "read_mcp_resource", serde_json::json!({"server": "things", "uri": "x://y"})).unwrap(),
        Mapped::Ask(q) if matches!(&q[..], [Query::Mcp { server, tool, .. }] if server == "things" && tool == "read_mcp_resource")
    ));
    assert!(
        ask(
            Harness::Codex,
            "read_mcp_resource",
            serde_json::json!({"uri": "x://y"})
        )
        .is_err()
    );
    assert_eq!(
        ask(Harness::Codex, "list_mcp_resources", serde_json::json!({})).unwrap(),
        Mapped::Nothing
    );
    for t in ["RemoteTrigger", "SendFeedback"] {
        assert!(ask(Harness::ClaudeCode, t, serde_json::json!({})).is_err());
    }
}

#[test]
fn a_home_path_is_judged_where_it_lands_and_globs_by_the_folder_they_reach() {
    let home = std::env::var("HOME").unwrap_or_default();
    if home.starts_with('/') {
        let h = home.trim_end_matches('/');
        assert_eq!(
            absolute("~/.ssh/authorized_keys", "/w").unwrap(),
            format!("{h}/.ssh/authorized_keys")
        );
        assert_eq!(absolute("~", "/w").unwrap(), h);
    }
    assert!(absolute("~root/.ssh/x", "/w").is_err());
    assert_eq!(absolute("src/../x", "/w/").unwrap(), "/w/src/../x");
    assert_eq!(glob_root("/w", "**/*.rs"), "/w");
    assert_eq!(glob_root("/w", "src/**/*.rs"), "/w/src");
    assert_eq!(glob_root("/w", "../../etc/*"), "/w/../../etc");
    assert_eq!(glob_root("/w", "/etc/ssh/*"), "/etc/ssh");
    assert_eq!(glob_root("/w", "/*"), "/");
    assert_eq!(glob_root("/w", "~/.aws/*"), "~/.aws");
    let q = queries(
        Harness::ClaudeCode,
        "Glob",
        &serde_json::json!({"pattern": "/etc/ssh/*"}),
        "/w",
    )
    .unwrap();
    let Mapped::Ask(q) = q else { panic!() };
    assert!(
        matches!(&q[..], [Query::Read { path: a, .. }, Query::Read { path: b, .. }] if a == "/w" && b == "/etc/ssh"),
        "{q:?}"
    );
}

#[test]
fn paths_are_taken_from_the_session_folder() {
    let q = queries(
        Harness::ClaudeCode,
        "Edit",
        &serde_json::json!({"file_path": "src/a.rs"}),
        "/w/",
    )
    .unwrap();
    let Mapped::Ask(q) = q else { panic!() };
    assert!(
        matches!(&q[..], [Query::Write { path, workspace: Some(w), .. }] if path == "/w/src/a.rs" && w == "/w/")
    );
    let q = queries(
        Harness::ClaudeCode,
        "Grep",
        &serde_json::json!({"pattern": "x"}),
        "/w",
    )
    .unwrap();
    assert!(
        matches!(q, Mapped::Ask(q) if matches!(&q[..], [Query::Read { path, .. }] if path == "/w"))
    );
    assert_eq!(
        queries(
            Harness::ClaudeCode,
            "TodoWrite",
            &serde_json::json!({}),
            "/w"
        )
        .unwrap(),
        Mapped::Nothing
    );
}

#[test]
fn shell_editing_and_reading_tools_ask_their_tool_permission() {
    assert_eq!(permission(Harness::ClaudeCode, "Bash"), Some("shell.exec"));
    assert_eq!(
        permission(Harness::Codex, "exec_command"),
        Some("shell.exec")
    );
    assert_eq!(
        permission(Harness::ClaudeCode, "MultiEdit"),
        Some("files.write")
    );
    assert_eq!(
        permission(Harness::Codex, "apply_patch"),
        Some("files.write")
    );
    assert_eq!(permission(Harness::ClaudeCode, "Grep"), Some("files.read"));
    assert_eq!(permission(Harness::ClaudeCode, "WebFetch"), None);
    assert_eq!(permission(Harness::ClaudeCode, "TodoWrite"), None);
}
