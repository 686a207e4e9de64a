//! `policyc check`: every error and warning of every file, in one run.
//! Human diagnostics go to standard error; the machine formats (JSON,
//! SARIF, GitHub annotations) are the command's result, on standard output.

use gatehouse::diag::{Severity, render_github, render_human, render_json, render_sarif};

use crate::Exit;
use crate::cli::{CheckArgs, CheckFormat};
use crate::output::count;

pub fn run(a: &CheckArgs) -> Exit {
    let sources = match crate::load::paths(&a.paths) {
        Ok(s) => s,
        Err(e) => return e,
    };
    let files = sources.files().count();
    let b = gatehouse::build(sources);
    let errors = b
        .diagnostics
        .iter()
        .filter(|d| d.severity == Severity::Error)
        .count();
    let warnings = b.diagnostics.len() - errors;
    match a.format {
        CheckFormat::Json => outln!("{}", render_json(&b.diagnostics, &b.sources)),
        CheckFormat::Sarif => outln!("{}", render_sarif(&b.diagnostics, &b.sources)),
        CheckFormat::Github => out!("{}", render_github(&b.diagnostics, &b.sources)),
        CheckFormat::Human => {
            if !b.diagnostics.is_empty() {
                err!("{}", render_human(&b.diagnostics, &b.sources));
            }
            if errors == 0 {
                let policies = b.set.as_ref().map_or(0, |s| s.policies().count());
                outln!(
                    "ok: {} in {}{}",
                    count(policies, "policy", "policies"),
                    count(files, "file", "files"),
                    if warnings > 0 {
                        format!(" ({})", count(warnings, "warning", "warnings"))
                    } else {
                        String::new()
                    }
                );
            }
        }
    }
    if errors > 0 || (warnings > 0 && a.deny_warnings) {
        Exit::Failed
    } else {
        Exit::Ok
    }
}
