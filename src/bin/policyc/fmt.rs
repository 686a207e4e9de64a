//! `policyc fmt`: rewrite files in the canonical layout (or `--check`).

use gatehouse::source::SourceMap;
use gatehouse::syntax::parse_file;

use crate::Exit;

pub fn run(args: &[String]) -> Exit {
    let (a, sources) = match crate::load::args_and_sources(args, &["--check"], &[]) {
        Ok(x) => x,
        Err(e) => return e,
    };
    let check = a.flag("--check");
    let mut failed = false;
    for (id, file) in sources.files() {
        let (ast, diags) = parse_file(id, &file.text);
        if diags.iter().any(|d| d.is_error()) {
            eprint!("{}", gatehouse::diag::render_human(&diags, &sources));
            eprintln!("not formatting `{}`: it has syntax errors", file.name);
            failed = true;
            continue;
        }
        let formatted = gatehouse::fmt::format_file(&ast, file);
        // Never write text that would mean something else.
        let mut again = SourceMap::new();
        let id2 = again.add(file.name.clone(), formatted.clone());
        let (ast2, diags2) = parse_file(id2, &formatted);
        if ast2 != ast || !diags2.is_empty() || ast2.comments.len() != ast.comments.len() {
            eprintln!(
                "error: formatting `{}` would change its meaning; left as it is (please report this)",
                file.name
            );
            failed = true;
            continue;
        }
        if formatted == file.text {
            continue;
        }
        if check {
            println!("would reformat {}", file.name);
            failed = true;
        } else if let Err(e) = std::fs::write(&file.name, &formatted) {
            eprintln!("error: cannot write `{}`: {e}", file.name);
            failed = true;
        } else {
            println!("formatted {}", file.name);
        }
    }
    if failed { Exit::Failed } else { Exit::Ok }
}
