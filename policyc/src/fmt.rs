//! `policyc fmt`: rewrite files in the canonical layout (or `--check`).

use crate::Exit;
use crate::cli::FmtArgs;

pub fn run(a: &FmtArgs) -> Exit {
    if a.paths.paths == ["-"] {
        return stdin(a.check);
    }
    let sources = match crate::load::paths(&a.paths) {
        Ok(s) => s,
        Err(e) => return e,
    };
    let mut failed = false;
    for (id, file) in sources.files() {
        let formatted = match gatehouse::fmt::format_source(id, file) {
            Ok(text) => text,
            Err(gatehouse::fmt::FormatError::Syntax(diags)) => {
                err!("{}", gatehouse::diag::render_human(&diags, &sources));
                errln!("not formatting `{}`: it has syntax errors", file.name);
                failed = true;
                continue;
            }
            Err(e) => {
                errln!("error: `{}`: {e}", file.name);
                failed = true;
                continue;
            }
        };
        if formatted == file.text {
            continue;
        }
        if a.check {
            outln!("would reformat {}", file.name);
            failed = true;
        } else if let Err(e) = std::fs::write(&file.name, &formatted) {
            errln!("error: cannot write `{}`: {e}", file.name);
            failed = true;
        } else {
            outln!("formatted {}", file.name);
        }
    }
    if failed { Exit::Failed } else { Exit::Ok }
}

/// `policyc fmt -`: policy text on stdin, the formatted text on stdout (as
/// editors pipe it); with `--check`, nothing written and exit 1 when it is
/// not formatted. Syntax errors go to stderr and nothing to stdout.
fn stdin(check: bool) -> Exit {
    use std::io::Read as _;
    let mut text = String::new();
    if let Err(e) = std::io::stdin().read_to_string(&mut text) {
        return Exit::Usage(format!("cannot read stdin: {e}"));
    }
    let mut sources = gatehouse::source::SourceMap::new();
    let id = sources.add("<stdin>", text.as_str());
    let Some(file) = sources.get(id) else {
        return Exit::Failed;
    };
    match gatehouse::fmt::format_source(id, file) {
        Ok(formatted) if check => {
            if formatted == text {
                Exit::Ok
            } else {
                outln!("would reformat <stdin>");
                Exit::Failed
            }
        }
        Ok(formatted) => {
            out!("{formatted}");
            Exit::Ok
        }
        Err(gatehouse::fmt::FormatError::Syntax(diags)) => {
            err!("{}", gatehouse::diag::render_human(&diags, &sources));
            errln!("not formatting <stdin>: it has syntax errors");
            Exit::Failed
        }
        Err(e) => {
            errln!("error: <stdin>: {e}");
            Exit::Failed
        }
    }
}
