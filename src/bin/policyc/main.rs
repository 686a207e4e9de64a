//! `policyc`: check, evaluate, test and format gatehouse policies.
//!
//! `main` is thin: it picks the subcommand and turns its result into an exit
//! code. Each subcommand lives in its own file.

/// Prints to standard output; a closed pipe ends the program quietly (see
/// [`output::gone`]).
macro_rules! out {
    ($($t:tt)*) => { $crate::output::write(false, format_args!($($t)*)) };
}
/// [`out!`] with a line break.
macro_rules! outln {
    ($($t:tt)*) => { $crate::output::write(true, format_args!($($t)*)) };
}
/// Prints to standard error; a failure to write there is ignored (there is
/// nowhere left to report it), never a panic.
macro_rules! err {
    ($($t:tt)*) => { $crate::output::write_err(false, format_args!($($t)*)) };
}
/// [`err!`] with a line break.
macro_rules! errln {
    ($($t:tt)*) => { $crate::output::write_err(true, format_args!($($t)*)) };
}

mod args;
mod check;
mod compile;
mod eval;
mod export;
mod fmt;
mod import;
mod load;
mod output;
mod test;

use std::process::ExitCode;

const USAGE: &str = "\
usage:
  policyc check [--format human|json] [--deny-warnings] PATH...
  policyc eval  [--policy NAME] [--workspace DIR] [--log FILE] (PATH... | --artifact FILE) (--query TEXT | --queries FILE|-)
  policyc test  PATH...
  policyc fmt   [--check] PATH...
  policyc compile PATH... -o FILE
  policyc import zerocode CONFIG.toml [--requirements REQUIREMENTS.toml] [--profile NAME]
  policyc import zoo POLICY.json
  policyc export nftables PATH... [--policy NAME] [--proxy IP:PORT|none] [--resolver IP:PORT|none]

PATH is a .policy file or a directory (read recursively for *.policy).";

/// How a subcommand ended.
pub enum Exit {
    Ok,
    /// Errors in the policies, or failed tests / unformatted files.
    Failed,
    /// Bad arguments.
    Usage(String),
    /// `eval`: some query lines could not be read.
    BadQueries,
}

fn main() -> ExitCode {
    let mut argv = std::env::args().skip(1);
    let cmd = argv.next();
    let rest: Vec<String> = argv.collect();
    let result = match cmd.as_deref() {
        Some("check") => check::run(&rest),
        Some("eval") => eval::run(&rest),
        Some("test") => test::run(&rest),
        Some("fmt") => fmt::run(&rest),
        Some("compile") => compile::run(&rest),
        Some("import") => import::run(&rest),
        Some("export") => export::run(&rest),
        Some("-h" | "--help" | "help") => {
            outln!("{USAGE}");
            Exit::Ok
        }
        Some("--version" | "-V") => {
            outln!("policyc {}", env!("CARGO_PKG_VERSION"));
            Exit::Ok
        }
        Some(other) => {
            let known = [
                "check", "eval", "test", "fmt", "compile", "import", "export",
            ];
            let hint = gatehouse::diag::did_you_mean(other, known)
                .map(|h| format!(" ({h})"))
                .unwrap_or_default();
            Exit::Usage(format!("unknown command `{other}`{hint}"))
        }
        None => Exit::Usage("no command given".into()),
    };
    match result {
        Exit::Ok => ExitCode::SUCCESS,
        Exit::Failed => ExitCode::from(1),
        Exit::Usage(msg) => {
            errln!("error: {msg}\n\n{USAGE}");
            ExitCode::from(2)
        }
        Exit::BadQueries => ExitCode::from(3),
    }
}
