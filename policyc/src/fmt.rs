//! `policyc fmt`: rewrite files in the canonical layout (or `--check`).

use crate::Exit;
use crate::cli::FmtArgs;

pub fn run(a: &FmtArgs) -> Exit {
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
