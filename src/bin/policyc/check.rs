//! `policyc check`: every error and warning of every file, in one run.

use gatehouse::diag::{Severity, render_human, render_json};

use crate::Exit;
use crate::args::Args;

pub fn run(args: &[String]) -> Exit {
    let a = match Args::parse(args, &["--deny-warnings"], &["--format"]) {
        Ok(a) => a,
        Err(e) => return e,
    };
    if let Err(e) = a.need_paths() {
        return e;
    }
    let json = match a.value("--format") {
        None | Some("human") => false,
        Some("json") => true,
        Some(other) => {
            return Exit::Usage(format!("unknown format `{other}`: use `human` or `json`"));
        }
    };
    let sources = match crate::load::sources(&a.paths) {
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
    if json {
        println!("{}", render_json(&b.diagnostics, &b.sources));
    } else if b.diagnostics.is_empty() {
        let policies = b.set.as_ref().map_or(0, |s| s.policies().count());
        println!(
            "ok: {policies} {} in {files} {}",
            plural(policies, "policy", "policies"),
            plural(files, "file", "files")
        );
    } else {
        print!("{}", render_human(&b.diagnostics, &b.sources));
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
