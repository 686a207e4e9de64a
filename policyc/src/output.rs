//! Standard output and error without panics. `println!` panics when its
//! reader has gone (`policyc check x | head -1`); here a closed pipe ends
//! the program quietly, as a Unix tool killed by `SIGPIPE` would: no
//! message, exit status 141 (128 + `SIGPIPE`), so that a pipeline under
//! `pipefail` never takes a cut-short run for a clean one.

use std::io::Write as _;

/// The exit status after a closed pipe.
pub const BROKEN_PIPE: i32 = 141;

/// Writes to standard output, or ends the program (see [`gone`]).
pub fn write(newline: bool, args: std::fmt::Arguments<'_>) {
    let mut out = std::io::stdout().lock();
    let r = out
        .write_fmt(args)
        .and_then(|()| {
            if newline {
                out.write_all(b"\n")
            } else {
                Ok(())
            }
        })
        .and_then(|()| out.flush());
    if let Err(e) = r {
        gone(&e);
    }
}

/// Writes to standard error; an error there is dropped.
pub fn write_err(newline: bool, args: std::fmt::Arguments<'_>) {
    let mut err = std::io::stderr().lock();
    let _ = err.write_fmt(args).and_then(|()| {
        if newline {
            err.write_all(b"\n")
        } else {
            Ok(())
        }
    });
}

/// Standard output failed: a closed pipe exits quietly with
/// [`BROKEN_PIPE`]; any other error says so on standard error and exits 1.
pub fn gone(e: &std::io::Error) -> ! {
    if e.kind() == std::io::ErrorKind::BrokenPipe {
        std::process::exit(BROKEN_PIPE);
    }
    write_err(
        true,
        format_args!("error: cannot write to standard output: {e}"),
    );
    std::process::exit(1)
}

/// A count with its noun: `1 policy`, `2 policies`.
pub fn count(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}
