//! What no tool call may write, whatever the policy says: the files the
//! hook itself stands on. An agent that could rewrite the policy the hook
//! reads, or the harness settings that run the hook, would switch the hook
//! off with one allowed edit (the starter policy lets an agent write its
//! whole workspace, where `agent.policy` lives). So a `write` to any of
//! them is refused by the hook before the policy is asked:
//!
//! - the policy files and folders the hook was given (a new `.policy`
//!   file in a policy folder would be read at the next call), the
//!   compiled artifact, the trusted keys and the decision log;
//! - the harnesses' settings that hold hooks: `settings.json` and
//!   `settings.local.json` in a `.claude` folder, `hooks.json`,
//!   `config.toml` and `requirements.toml` in a `.codex` folder or in
//!   `/etc/codex`, and `/etc/claude-code/managed-settings.json`.
//!
//! Paths are compared as the kernel would open them: `.` and `..` taken
//! out, and the longest part that exists resolved through its symbolic
//! links. A command that edits these files through a shell (`sed -i`) is
//! judged by the policy's command rules; the kernel-enforced backstop is
//! `gatehouse-run` or host mode (docs/agents.md, the threat model).

use std::path::{Component, Path, PathBuf};

use gatehouse::query::Query;

use crate::cli::HookArgs;

/// The paths the hook guards (`dirs`: everything under them too).
pub struct Guarded {
    files: Vec<PathBuf>,
    dirs: Vec<PathBuf>,
}

impl Guarded {
    pub fn new(a: &HookArgs) -> Guarded {
        let mut files = Vec::new();
        let mut dirs = Vec::new();
        let named = a
            .paths
            .iter()
            .chain(a.artifact.iter())
            .chain(a.trusted_key.iter())
            .chain(a.log.iter());
        for p in named {
            let r = resolve(Path::new(p));
            if r.is_dir() {
                dirs.push(r);
            } else {
                files.push(r);
            }
        }
        Guarded { files, dirs }
    }

    /// Why `q` may not run, when it writes a guarded path.
    pub fn refuses(&self, q: &Query) -> Option<String> {
        let Query::Write { path, .. } = q else {
            return None;
        };
        let r = resolve(Path::new(path));
        let own = self.files.contains(&r) || self.dirs.iter().any(|d| r.starts_with(d));
        if own {
            return Some(format!(
                "gatehouse: `{path}` is the hook's own policy, key or log: no tool call writes it"
            ));
        }
        if harness_settings(&r) {
            return Some(format!(
                "gatehouse: `{path}` is an agent harness's settings, where its hooks are: no tool call writes it"
            ));
        }
        None
    }
}

/// Whether `p` is a file in which a harness reads its hooks.
fn harness_settings(p: &Path) -> bool {
    let name = p.file_name().and_then(|n| n.to_str()).unwrap_or_default();
    let parent = p.parent().unwrap_or(Path::new(""));
    let folder = parent
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or_default();
    match folder {
        ".claude" => matches!(name, "settings.json" | "settings.local.json"),
        ".codex" => matches!(name, "hooks.json" | "config.toml" | "requirements.toml"),
        _ if parent == Path::new("/etc/codex") => {
            matches!(name, "hooks.json" | "config.toml" | "requirements.toml")
        }
        _ => parent == Path::new("/etc/claude-code") && name == "managed-settings.json",
    }
}

/// `p` as the kernel would open it: absolute (from the current folder),
/// `.` and `..` taken out, the longest existing part resolved through its
/// symbolic links, the rest appended.
fn resolve(p: &Path) -> PathBuf {
    let abs = if p.is_absolute() {
        p.to_path_buf()
    } else {
        std::env::current_dir()
            .map(|d| d.join(p))
            .unwrap_or_else(|_| p.to_path_buf())
    };
    let mut lexical = PathBuf::from("/");
    for c in abs.components() {
        match c {
            Component::ParentDir => {
                lexical.pop();
            }
            Component::Normal(n) => lexical.push(n),
            _ => {}
        }
    }
    let mut rest = Vec::new();
    let mut head = lexical.as_path();
    loop {
        if let Ok(real) = std::fs::canonicalize(head) {
            let mut out = real;
            for n in rest.iter().rev() {
                out.push(n);
            }
            return out;
        }
        match (head.file_name(), head.parent()) {
            (Some(n), Some(parent)) => {
                rest.push(n.to_os_string());
                head = parent;
            }
            _ => return lexical,
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    fn write(p: &str) -> Query {
        Query::Write {
            path: p.into(),
            workspace: None,
            home: None,
        }
    }

    #[test]
    fn the_hooks_own_files_and_the_harness_settings_are_refused() {
        let dir = std::env::temp_dir().join(format!("gh-guard-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("pol")).unwrap();
        std::fs::write(dir.join("agent.policy"), "").unwrap();
        let d = dir.display().to_string();
        let args = HookArgs {
            harness: crate::cli::Harness::ClaudeCode,
            policy: None,
            log: Some(format!("{d}/hook.jsonl")),
            deadline_ms: 2000,
            artifact: None,
            trusted_key: vec![],
            paths: vec![format!("{d}/agent.policy"), format!("{d}/pol")],
        };
        let g = Guarded::new(&args);
        for p in [
            format!("{d}/agent.policy"),
            format!("{d}/./sub/../agent.policy"),
            format!("{d}/pol/new.policy"),
            format!("{d}/hook.jsonl"),
            format!("{d}/.claude/settings.json"),
            format!("{d}/.claude/settings.local.json"),
            format!("{d}/.codex/hooks.json"),
            "/root/.codex/config.toml".into(),
            "/etc/codex/requirements.toml".into(),
            "/etc/claude-code/managed-settings.json".into(),
        ] {
            assert!(g.refuses(&write(&p)).is_some(), "{p}");
        }
        for p in [
            format!("{d}/src/main.rs"),
            format!("{d}/agent.policy.md"),
            format!("{d}/.claude/agents/x.md"),
        ] {
            assert!(g.refuses(&write(&p)).is_none(), "{p}");
        }
        // Through a symbolic link to the policy: the same file.
        std::os::unix::fs::symlink(dir.join("agent.policy"), dir.join("alias")).unwrap();
        assert!(g.refuses(&write(&format!("{d}/alias"))).is_some());
        // Reads are the policy's to decide.
        assert!(
            g.refuses(&Query::Read {
                path: format!("{d}/agent.policy"),
                workspace: None,
                home: None
            })
            .is_none()
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
