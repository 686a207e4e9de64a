//! Known-safe (read-only) commands and the dangerous-command rule
//! (docs/language.md#sandbox), written as data plus small predicates.

pub use crate::normalize::path::{basename, trusted_name};

/// How a known-safe program is judged.
enum Check {
    /// Any arguments.
    Any,
    /// Safe unless one of these options appears in any spelling.
    Without(&'static [&'static str]),
    /// Safe unless one of these words appears (`find` primaries).
    WithoutWords(&'static [&'static str]),
    /// `sed -n Np` / `sed -n M,Np` with at most one file.
    SedPrint,
    /// Read-only `git` subcommands.
    Git,
}

const KNOWN_SAFE: &[(&str, Check)] = &[
    ("cat", Check::Any),
    ("cd", Check::Any),
    ("cut", Check::Any),
    ("echo", Check::Any),
    ("expr", Check::Any),
    ("false", Check::Any),
    ("grep", Check::Any),
    ("head", Check::Any),
    ("id", Check::Any),
    ("ls", Check::Any),
    ("nl", Check::Any),
    ("paste", Check::Any),
    ("pwd", Check::Any),
    ("rev", Check::Any),
    ("seq", Check::Any),
    ("stat", Check::Any),
    ("tail", Check::Any),
    ("tr", Check::Any),
    ("true", Check::Any),
    ("uname", Check::Any),
    ("uniq", Check::Any),
    ("wc", Check::Any),
    ("which", Check::Any),
    ("whoami", Check::Any),
    ("numfmt", Check::Any),
    ("tac", Check::Any),
    ("base64", Check::Without(&["-o", "--output"])),
    (
        "find",
        Check::WithoutWords(&[
            "-exec", "-execdir", "-ok", "-okdir", "-delete", "-fls", "-fprint", "-fprint0",
            "-fprintf",
        ]),
    ),
    (
        "rg",
        Check::Without(&["--pre", "--hostname-bin", "--search-zip", "-z"]),
    ),
    ("sed", Check::SedPrint),
    ("git", Check::Git),
];

/// Whether any argument is one of `forbidden` in any spelling: separate
/// (`-o FILE`), attached (`-oFILE`), with `=` (`--output=x`), inside a bundle
/// of single-letter options (`-nz`), or an abbreviation of a long option
/// (`--out` for `--output`).
pub fn has_option(args: &[String], forbidden: &[&str]) -> bool {
    args.iter().any(|a| {
        if let Some(long) = a.strip_prefix("--") {
            let name = long.split('=').next().unwrap_or(long);
            !name.is_empty()
                && forbidden
                    .iter()
                    .filter_map(|f| f.strip_prefix("--"))
                    .any(|f| f.starts_with(name))
        } else if let Some(bundle) = a.strip_prefix('-') {
            forbidden
                .iter()
                .filter(|f| !f.starts_with("--"))
                .filter_map(|f| f.strip_prefix('-'))
                .any(|letter| bundle.contains(letter))
        } else {
            false
        }
    })
}

/// The programs the known-safe list names.
#[cfg(feature = "diff")]
pub(crate) fn known_safe_programs() -> impl Iterator<Item = &'static str> {
    KNOWN_SAFE.iter().map(|(n, _)| *n)
}

/// Which of [`builtin_class`]'s classes (neither, known-safe, dangerous)
/// a command line with this program can fall in, whatever its arguments:
/// known-safe only for a trusted known-safe program, and then always when
/// it takes any arguments; dangerous only for `rm` and the wrappers.
#[cfg(feature = "diff")]
pub(crate) fn possible_classes(program: &str) -> [bool; 3] {
    let name = basename(program);
    let dangerous = name == "rm" || COMMAND_WRAPPERS.contains(&name);
    match trusted_name(program).and_then(|n| KNOWN_SAFE.iter().find(|(k, _)| *k == n)) {
        Some((_, Check::Any)) => [false, true, false],
        Some(_) => [true, true, dangerous],
        None => [true, false, dangerous],
    }
}

/// Every word the built-in tests single out after the program: the
/// options and words that keep a program from being known-safe, git's
/// subcommands and options, `sed -n`, and `rm` (for the wrappers). The
/// diff draws the word after a rule's prefix from these
/// (`src/diff/exec.rs`), so a new entry in any list here is tried there
/// too.
#[cfg(feature = "diff")]
pub(crate) fn special_words() -> Vec<&'static str> {
    let mut out: Vec<&'static str> = Vec::new();
    for (_, check) in KNOWN_SAFE {
        match check {
            Check::Without(w) | Check::WithoutWords(w) => out.extend(w.iter().copied()),
            Check::Any | Check::SedPrint | Check::Git => {}
        }
    }
    out.extend(GIT_NEVER);
    out.extend(GIT_GLOBAL_FORBIDDEN);
    out.extend(GIT_BRANCH_READ);
    out.extend([
        "-n",
        "status",
        "log",
        "diff",
        "show",
        "branch",
        "-C",
        "--no-pager",
        "rm",
        "-f",
        "-rf",
        "--force",
    ]);
    out
}

/// What the built-in tests make of a command line no rule decides
/// (docs/language.md#exec, step 3): 2 dangerous (`rm` with a force
/// flag, also behind wrappers), 1 known-safe, 0 neither.
#[cfg(feature = "diff")]
pub(crate) fn builtin_class(argv: &[String]) -> u8 {
    if is_dangerous(argv) {
        2
    } else if is_known_safe(argv) {
        1
    } else {
        0
    }
}

/// Whether `argv` is a known-safe (read-only) command.
pub fn is_known_safe(argv: &[String]) -> bool {
    let Some((program, args)) = argv.split_first() else {
        return false;
    };
    let Some(name) = trusted_name(program) else {
        return false;
    };
    let Some((_, check)) = KNOWN_SAFE.iter().find(|(n, _)| *n == name) else {
        return false;
    };
    match check {
        Check::Any => true,
        Check::Without(opts) => !has_option(args, opts),
        // Forbidden in every spelling: `-fprint=x` is `-fprint x`.
        Check::WithoutWords(words) => !args.iter().any(|a| {
            let name = a.split_once('=').map_or(a.as_str(), |(n, _)| n);
            words.contains(&name)
        }),
        Check::SedPrint => sed_print(args),
        Check::Git => git_read_only(args),
    }
}

fn sed_print(args: &[String]) -> bool {
    let range = |s: &str| {
        let Some(body) = s.strip_suffix('p') else {
            return false;
        };
        let num = |n: &str| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit());
        match body.split_once(',') {
            Some((m, n)) => num(m) && num(n),
            None => num(body),
        }
    };
    match args {
        [n, script] => n == "-n" && range(script),
        [n, script, file] => n == "-n" && range(script) && !file.starts_with('-'),
        _ => false,
    }
}

/// Options git may never carry here, in any spelling.
const GIT_NEVER: &[&str] = &[
    "--output",
    "--ext-diff",
    "--textconv",
    "--exec",
    "--paginate",
];
/// Global options that are forbidden before the subcommand.
const GIT_GLOBAL_FORBIDDEN: &[&str] = &[
    "-c",
    "--config-env",
    "--exec-path",
    "--git-dir",
    "--namespace",
    "--super-prefix",
    "--work-tree",
    "-p",
    "--paginate",
];
const GIT_BRANCH_READ: &[&str] = &[
    "--list",
    "-l",
    "--show-current",
    "-a",
    "--all",
    "-r",
    "--remotes",
    "-v",
    "-vv",
    "--verbose",
];

fn git_read_only(args: &[String]) -> bool {
    // Global options: only `-C DIR` and `--no-pager` are known to be harmless.
    let mut i = 0;
    while let Some(a) = args.get(i) {
        if !a.starts_with('-') {
            break;
        }
        match a.as_str() {
            "-C" => i += 2,
            // `-Cdir`: the rest is a directory, not an option bundle.
            s if s.starts_with("-C") => i += 1,
            _ if has_option(std::slice::from_ref(a), GIT_GLOBAL_FORBIDDEN) => return false,
            "--no-pager" => i += 1,
            _ => return false,
        }
    }
    let Some((sub, rest)) = args.get(i..).and_then(<[String]>::split_first) else {
        return false;
    };
    if has_option(rest, GIT_NEVER) {
        return false;
    }
    match sub.as_str() {
        "status" | "log" | "diff" | "show" => true,
        "branch" => rest
            .iter()
            .all(|a| GIT_BRANCH_READ.contains(&a.as_str()) || a.starts_with("--format=")),
        _ => false,
    }
}

/// Programs that run the command given in their arguments (docs/language.md#sandbox, the
/// dangerous-command rule). Their options and option values differ from one
/// to the next and from one platform to another, so they are not parsed:
/// behind any of them, every later `rm` word is tried.
pub const COMMAND_WRAPPERS: &[&str] = &[
    "sudo", "doas", "env", "timeout", "nice", "nohup", "ionice", "stdbuf", "time", "command",
    "exec",
];

/// `rm` (bare or any path) with a force flag in any spelling, directly or
/// behind any chain of [`COMMAND_WRAPPERS`]: when the program is a wrapper,
/// every later word that is `rm` is tried with the words after it, so no
/// wrapper option, option value (`sudo --user root`, `timeout 5`) or
/// `NAME=value` assignment hides it.
pub fn is_dangerous(argv: &[String]) -> bool {
    let Some((program, args)) = argv.split_first() else {
        return false;
    };
    match basename(program) {
        "rm" => has_force(args),
        name if COMMAND_WRAPPERS.contains(&name) => {
            let mut rest = args;
            while let Some((word, after)) = rest.split_first() {
                if basename(word) == "rm" && has_force(after) {
                    return true;
                }
                rest = after;
            }
            false
        }
        _ => false,
    }
}

/// `-f`, `-rf`, `-fr`, `-Rf`, `--force` (and its abbreviations), anywhere.
pub fn has_force(args: &[String]) -> bool {
    args.iter().any(|a| is_force(a))
}

/// `-f`, `-rf`, `--force`, `--fo`, ...: one word that is a force flag of
/// `rm` in any spelling.
pub fn is_force(a: &str) -> bool {
    if let Some(long) = a.strip_prefix("--") {
        !long.is_empty() && "force".starts_with(long)
    } else {
        a.strip_prefix('-').is_some_and(|b| b.contains('f'))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(s: &str) -> Vec<String> {
        s.split_whitespace().map(String::from).collect()
    }

    #[test]
    fn known_safe_commands() {
        for s in [
            "cat a",
            "/bin/ls -la",
            "/usr/local/bin/rg foo",
            "base64 x",
            "find . -name x",
            "rg -n foo",
            "sed -n 5p f",
            "sed -n 1,10p",
            "git status",
            "git -C dir log",
            "git branch",
            "git branch --list -v",
            "git branch --format=%(refname)",
            "git diff HEAD~1",
            "git --no-pager show",
            "git -Csrc status",
        ] {
            assert!(is_known_safe(&v(s)), "{s}");
        }
    }

    #[test]
    fn not_known_safe() {
        for s in [
            "./cat a",
            "/tmp/cat a",
            "/usr/bin/x/cat",
            "base64 -o out",
            "base64 -dofile",
            "base64 --out=x",
            "find . -delete",
            "find . -exec rm {} ;",
            "find . -fprint=x",
            "find . -delete=x",
            "find . -exec=x",
            "find . -fls=x",
            "find . -execdir=rm",
            "find . -fprintf=x",
            "rg -nz foo",
            "rg --pre x",
            "rg --search-z",
            "sed -n 5p -i",
            "sed -i s/a/b/ f",
            "sed 5p",
            "git push",
            "git -c x=y status",
            "git -cx=y log",
            "git --git-dir=x status",
            "git --exec-path=/x log",
            "git diff --output=f",
            "git log --ext-diff",
            "git show --textc",
            "git -p log",
            "git --bare status",
            "git branch -d x",
            "git branch new",
            "cargo build",
            "",
        ] {
            assert!(!is_known_safe(&v(s)), "{s}");
        }
    }

    #[test]
    fn dangerous_commands() {
        for s in [
            "rm -f x",
            "rm -rf /",
            "rm -fr x",
            "rm -Rf x",
            "rm --force x",
            "rm --forc x",
            "/tmp/rm -rf x",
            "sudo rm -rf /",
            "sudo -u root rm -f x",
            "sudo -E -- rm -rf x",
            // Every sudo option that takes a separate value, long or short.
            "sudo --user root rm -rf /tmp/x",
            "sudo --chdir /tmp rm -rf x",
            "sudo --group wheel rm -rf x",
            "sudo --host h rm -rf x",
            "sudo --prompt p rm -rf x",
            "sudo --close-from 3 rm -rf x",
            "sudo --command-timeout 5 rm -rf x",
            "sudo --chroot / rm -rf x",
            "sudo --other-user u rm -rf x",
            "sudo -u root -g wheel rm -f x",
            // Any chain of wrappers, with options, values and assignments.
            "timeout 5 rm -rf x",
            "timeout -s KILL 5 rm -rf x",
            "env FOO=1 rm -f x",
            "env -i PATH=/bin /bin/rm -f x",
            "sudo -E doas rm -rf /",
            "doas -u root rm -rf /",
            "nice -n 5 rm -rf x",
            "nohup rm -rf x",
            "ionice -c 3 rm -rf x",
            "stdbuf -o0 rm -rf x",
            "time rm -rf x",
            "command rm -rf x",
            "exec rm -rf x",
            "/usr/bin/sudo /usr/bin/env X=1 nice -n 19 timeout 1 rm --force x",
            "sudo -u rm rm -rf x",
        ] {
            assert!(is_dangerous(&v(s)), "{s}");
        }
        for s in [
            "rm x",
            "rm -r x",
            "sudo ls",
            "echo rm -rf",
            "rmdir -f",
            "sudo rm x",
            "timeout 5 rm -r x",
            "env rmx -f",
        ] {
            assert!(!is_dangerous(&v(s)), "{s}");
        }
    }
}
