//! `policyc`: check, evaluate, test and format gatehouse policies.
//!
//! `main` is thin: it picks the subcommand and turns its result into an exit
//! code. Each subcommand lives in its own file.

#![deny(missing_docs)]

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

mod check;
mod cli;
mod compile;
mod diff;
mod eval;
mod exclude;
mod export;
mod fmt;
mod hook;
mod import;
mod init;
mod keys;
mod load;
mod lsp;
mod output;
mod prove;
mod telemetry;
mod test;

use std::process::ExitCode;

use clap::{CommandFactory, Parser};

use cli::{Cli, Command};

/// How a subcommand ended.
pub enum Exit {
    /// Success.
    Ok,
    /// Errors in the policies, or failed tests / unformatted files.
    Failed,
    /// Bad arguments that clap could not see (a policy name, an address).
    Usage(String),
    /// `eval`: some query lines could not be read.
    BadQueries,
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            // `--help` and `--version` print on stdout and exit 0; usage
            // errors on stderr with the subcommand's usage, exit 2.
            let code = e.exit_code();
            if e.use_stderr() {
                errln!("{}", e.render());
            } else {
                out!("{}", e.render());
            }
            return ExitCode::from(u8::try_from(code).unwrap_or(2));
        }
    };
    let (name, result) = match cli.command {
        Command::Check(a) => ("check", check::run(&a)),
        Command::Eval(a) => ("eval", eval::run(&a)),
        Command::Test(a) => ("test", test::run(&a)),
        Command::Diff(a) => ("diff", diff::run(&a)),
        Command::Prove(a) => ("prove", prove::run(&a)),
        Command::Fmt(a) => ("fmt", fmt::run(&a)),
        Command::Compile(a) => ("compile", compile::run(&a)),
        Command::Init(a) => ("init", init::run(&a)),
        Command::Keygen { out } => ("keygen", keys::keygen(&out)),
        Command::Verify {
            trusted_key,
            bundle,
        } => ("verify", keys::verify(&trusted_key, &bundle)),
        Command::Import(a) => ("import", import::run(&a)),
        Command::Export(a) => ("export", export::run(&a)),
        Command::Completions { shell } => ("completions", completions(shell)),
        Command::Hook(a) => ("hook", hook::run(&a)),
        Command::Lsp => ("lsp", lsp::run()),
    };
    match result {
        Exit::Ok => ExitCode::SUCCESS,
        Exit::Failed => ExitCode::from(1),
        Exit::Usage(msg) => {
            errln!("error: {msg}\n\nFor more information, try 'policyc {name} --help'.");
            ExitCode::from(2)
        }
        Exit::BadQueries => ExitCode::from(3),
    }
}

fn completions(shell: cli::Shell) -> Exit {
    let shell = match shell {
        cli::Shell::Bash => clap_complete::Shell::Bash,
        cli::Shell::Zsh => clap_complete::Shell::Zsh,
        cli::Shell::Fish => clap_complete::Shell::Fish,
    };
    let mut script = Vec::new();
    clap_complete::generate(shell, &mut Cli::command(), "policyc", &mut script);
    out!("{}", String::from_utf8_lossy(&script));
    Exit::Ok
}
