//! `policyc check`: every error and warning of every file, in one run.

use gatehouse::diag::{Severity, render_human, render_json};

use crate::Exit;

pub fn run(args: &[String]) -> Exit {
    let (a, sources) =
        match crate::load::args_and_sources(args, &["--deny-warnings"], &["--format"]) {
            Ok(x) => x,
            Err(e) => return e,
        };
    let json = match a.value("--format") {
        None | Some("human") => false,
        Some("json") => true,
        Some(other) => {
            return Exit::Usage(format!("unknown format `{other}`: use `human` or `json`"));
        }
    };
    let files = sources.files().count();
    let b = gatehouse::build(sources);
    let errors = b
        .diagnostics
        .iter()
        .filter(|d| d.severity == Severity::Error)
        .count();
    let warnings = b.diagnostics.len() - errors;
    if json {
        outln!("{}", render_json(&b.diagnostics, &b.sources));
    } else if b.diagnostics.is_empty() {
        let policies = b.set.as_ref().map_or(0, |s| s.policies().count());
        outln!(
            "ok: {policies} {} in {files} {}",
            plural(policies, "policy", "policies"),
            plural(files, "file", "files")
        );
    } else {
        out!("{}", render_human(&b.diagnostics, &b.sources));
    }
    if errors > 0 || (warnings > 0 && a.flag("--deny-warnings")) {
        Exit::Failed
    } else {
        Exit::Ok
    }
}

fn plural<'a>(n: usize, one: &'a str, many: &'a str) -> &'a str {
    if n == 1 { one } else { many }
}
