//! `policyc init`: the ZeroCode seed's "defaults and recommendations" as a
//! starter policy. A version-controlled folder gets Auto (workspace-write,
//! on-request approvals), any other folder read-only; the network is denied
//! by default with the package registries commented in; a test block
//! checks the recommendation. The text is laid out by the formatter and
//! checked and tested before it is written.

use std::path::{Path, PathBuf};

use crate::Exit;
use crate::cli::InitArgs;

mod agent;

/// Where the folder's version control is: the `.git` (directory or file)
/// in `dir` or the nearest folder above it.
fn version_control(dir: &Path) -> Option<PathBuf> {
    dir.ancestors().map(|d| d.join(".git")).find(|g| g.exists())
}

/// The starter text for a policy named `name`, before formatting.
fn starter(name: &str, dir: &Path, git: Option<&Path>, found: &[&str]) -> String {
    let (sandbox, why, tests) = match git {
        Some(g) => (
            "workspace-write",
            format!(
                "# {} is version-controlled ({}), so the recommendation is ZeroCode's\n# Auto: the agent writes in the workspace and asks before anything else.\n",
                dir.display(),
                g.display()
            ),
            "  expect allow write \"/home/dev/repo/src/main.rs\" in \"/home/dev/repo\" because writable_root\n  expect ask write \"/home/dev/repo/.git/config\" in \"/home/dev/repo\" because protected_path\n  expect ask write \"/home/dev/notes.txt\" in \"/home/dev/repo\" because outside_writable_roots\n",
        ),
        None => (
            "read-only",
            format!(
                "# {} is not version-controlled, so the recommendation is read-only:\n# nothing the agent changes could be reviewed or undone. Make the folder a\n# git repository and run `policyc init --force` for workspace-write.\n",
                dir.display()
            ),
            "  expect ask write \"/home/dev/repo/src/main.rs\" in \"/home/dev/repo\" because read_only_sandbox\n",
        ),
    };
    let also = if found.is_empty() {
        String::new()
    } else {
        format!(" (this folder has {})", found.join(" and "))
    };
    format!(
        "# Written by `policyc init` as a start: read it, then make it yours.\n{why}#\n# Protected inside the workspace, always: .git, .agents and .zerocode{also},\n# and the git directory a .git file names; `protect \".name\"` adds more.\npolicy {name} {{\n  sandbox {sandbox}\n  approvals on-request\n  network {{\n    default deny\n    dns on\n    # The package registries, for an agent that installs packages:\n    # allow domain pypi.org\n    # allow domain files.pythonhosted.org\n    # allow domain registry.npmjs.org\n    # allow domain crates.io\n    # allow domain static.crates.io\n  }}\n}}\n\ntest \"the starter policy\" {{\n  policy {name}\n{tests}  expect ask exec cargo build escalate because escalation\n  expect deny connect example.com:443 because not_allowed\n  expect deny connect 169.254.169.254:80 because local_address\n}}\n"
    )
}

pub fn run(a: &InitArgs) -> Exit {
    let dir = a.dir.clone().unwrap_or_else(|| PathBuf::from("."));
    if !dir.is_dir() {
        return Exit::Usage(format!("`{}` is not a folder", dir.display()));
    }
    let abs = std::fs::canonicalize(&dir).unwrap_or_else(|_| dir.clone());
    let file = policy_file(a, &dir);
    if let Some(harness) = a.agent {
        return agent::run(a, harness, &abs, &file);
    }
    if file.exists() && !a.force {
        return Exit::Usage(format!(
            "`{}` exists; init never overwrites a file without --force",
            file.display()
        ));
    }
    write_starter(a, &abs, &file)
}

/// The policy file init writes (or, with --agent, uses): DIR/NAME.policy
/// or --output.
fn policy_file(a: &InitArgs, dir: &Path) -> PathBuf {
    dir.join(
        a.output
            .clone()
            .unwrap_or_else(|| PathBuf::from(format!("{}.policy", a.name))),
    )
}

/// Writes the starter policy for the folder `abs` to `file`.
fn write_starter(a: &InitArgs, abs: &Path, file: &Path) -> Exit {
    let git = version_control(abs);
    let found: Vec<&str> = [".agents", ".zerocode"]
        .into_iter()
        .filter(|n| abs.join(n).exists())
        .collect();
    let text = starter(&a.name, abs, git.as_deref(), &found);
    // Laid out by the formatter, then checked and tested, before a byte is
    // written: a name that is not a policy name fails here.
    let name = file.display().to_string();
    if let Err(e) = gatehouse::PolicySet::from_source(&name, &text) {
        {
            errln!(
                "error: the starter policy for `{}` does not build:\n{e}",
                a.name
            );
            return Exit::Failed;
        }
    }
    let mut sources = gatehouse::source::SourceMap::new();
    let id = sources.add(&name, &text);
    let formatted = sources
        .get(id)
        .and_then(|f| gatehouse::fmt::format_source(id, f).ok())
        .unwrap_or(text);
    if let Err(e) = std::fs::write(file, &formatted) {
        errln!("error: cannot write `{}`: {e}", file.display());
        return Exit::Failed;
    }
    let mode = if git.is_some() {
        "workspace-write with on-request approvals: the folder is version-controlled"
    } else {
        "read-only: the folder is not version-controlled"
    };
    outln!(
        "wrote {} ({mode})\nnext: policyc check {f} && policyc test {f}",
        file.display(),
        f = file.display()
    );
    Exit::Ok
}
