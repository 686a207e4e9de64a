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
