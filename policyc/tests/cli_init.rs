//! `policyc init` (issue 37): a starter policy per folder, as the ZeroCode
//! seed recommends, that passes `check`, `test` and `fmt --check` as
//! written and never overwrites a file unasked.

use crate::common::{policyc, stderr, stdout};

fn folder(tag: &str) -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("gatehouse-init-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// `check --deny-warnings`, `test` and `fmt --check` on `file` all pass.
fn passes(file: &str) {
    for args in [
        vec!["check", "--deny-warnings", file],
        vec!["test", file],
        vec!["fmt", "--check", file],
    ] {
        let o = policyc(&args);
        assert_eq!(
            o.status.code(),
            Some(0),
            "{args:?}: {}{}",
            stdout(&o),
            stderr(&o)
        );
    }
}

#[test]
fn a_version_controlled_folder_gets_auto_and_another_read_only() {
    let repo = folder("repo");
    std::fs::create_dir_all(repo.join(".git")).unwrap();
    std::fs::create_dir_all(repo.join("sub/.agents")).unwrap();
    let sub = repo.join("sub");
    let o = policyc(&["init", sub.to_str().unwrap(), "--name", "my-agent"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(stdout(&o).contains("version-controlled"), "{}", stdout(&o));
    let file = sub.join("my-agent.policy");
    let text = std::fs::read_to_string(&file).unwrap();
    assert!(text.contains("sandbox workspace-write") && text.contains("approvals on-request"));
    assert!(text.contains("this folder has .agents"), "{text}");
    assert!(text.contains("# allow domain pypi.org") && text.contains("default deny"));
    passes(file.to_str().unwrap());

    let plain = folder("plain");
    let o = policyc(&["init", plain.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let file = plain.join("agent.policy");
    let text = std::fs::read_to_string(&file).unwrap();
    assert!(text.contains("sandbox read-only"), "{text}");
    passes(file.to_str().unwrap());

    // A `.git` file (a worktree, a submodule) is version control too.
    let worktree = folder("worktree");
    std::fs::write(worktree.join(".git"), "gitdir: ../main/.git/worktrees/w\n").unwrap();
    assert_eq!(
        policyc(&["init", worktree.to_str().unwrap()]).status.code(),
        Some(0)
    );
    let text = std::fs::read_to_string(worktree.join("agent.policy")).unwrap();
    assert!(text.contains("sandbox workspace-write"), "{text}");
}

#[test]
fn init_never_overwrites_without_force() {
    let d = folder("force");
    let file = d.join("agent.policy");
    std::fs::write(&file, "# mine\n").unwrap();
    let o = policyc(&["init", d.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("--force"), "{}", stderr(&o));
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "# mine\n");
    let o = policyc(&["init", d.to_str().unwrap(), "--force"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(
        std::fs::read_to_string(&file)
            .unwrap()
            .starts_with("# Written by `policyc init`")
    );
    // A name that is no policy name is refused before anything is written.
    let o = policyc(&[
        "init",
        d.to_str().unwrap(),
        "--name",
        "two words",
        "--output",
        "x.policy",
    ]);
    assert_ne!(o.status.code(), Some(0));
    assert!(!d.join("x.policy").exists());
    let o = policyc(&["init", d.join("missing").to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2));
}

/// `init --agent` (issue 56) as a user runs it, on a managed root of the
/// test's own: the settings written, the hook that runs from them
/// answering, a broken settings file left alone, a broken policy refused,
/// and `--remove`.
#[test]
fn init_agent_installs_the_hook_keeps_what_it_cannot_read_and_removes_it() {
    let d = folder("agent");
    std::fs::create_dir_all(d.join(".git")).unwrap();
    let root = d.join("root");
    let dir = d.to_str().unwrap();
    let managed = |extra: &[&str]| {
        let mut args = vec![
            "init",
            "--agent",
            "claude-code",
            "--managed",
            "--managed-root",
            root.to_str().unwrap(),
        ];
        args.extend_from_slice(extra);
        args.push(dir);
        policyc(&args)
    };
    let o = managed(&[]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let settings = root.join("etc/claude-code/managed-settings.json");
    let text = std::fs::read_to_string(&settings).unwrap();
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    let command = v["hooks"]["PreToolUse"][0]["hooks"][0]["command"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(command.contains(" hook claude-code "), "{command}");
    assert_eq!(
        v["hooks"]["PreToolUse"][0]["hooks"][0]["onFailure"],
        "block"
    );
    // The starter policy was written, and the installed command answers.
    assert!(d.join("agent.policy").exists());
    let event = serde_json::json!({"hook_event_name": "PreToolUse", "cwd": dir,
        "permission_mode": "default", "tool_name": "Bash",
        "tool_input": {"command": "curl https://example.com"}});
    let words: Vec<&str> = command.split(' ').collect();
    let o = crate::common::policyc_with_stdin(&words[1..], &event.to_string());
    assert!(
        stdout(&o).contains("\"permissionDecision\""),
        "{}",
        stdout(&o)
    );
    // Again: the same file.
    assert_eq!(managed(&[]).status.code(), Some(0));
    assert_eq!(std::fs::read_to_string(&settings).unwrap(), text);
    // A file that is not JSON is never overwritten.
    std::fs::write(&settings, "{ broken").unwrap();
    let o = managed(&[]);
    assert_eq!(o.status.code(), Some(1), "{}", stdout(&o));
    assert!(stderr(&o).contains("not JSON"), "{}", stderr(&o));
    assert_eq!(std::fs::read_to_string(&settings).unwrap(), "{ broken");
    std::fs::write(&settings, &text).unwrap();
    // A policy that does not build is refused, and nothing changes.
    std::fs::write(
        d.join("agent.policy"),
        "policy agent { sandbox nonsense }\n",
    )
    .unwrap();
    let o = managed(&[]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).contains("nothing was installed"),
        "{}",
        stderr(&o)
    );
    // --remove takes it out; a second --remove finds nothing.
    let o = managed(&["--remove"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(std::fs::read_to_string(&settings).unwrap().trim(), "{}");
    assert!(stdout(&managed(&["--remove"])).contains("no gatehouse hook"));
}
