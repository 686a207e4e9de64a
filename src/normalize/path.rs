//! Paths. Socket paths must be written normal (the engine never guesses
//! what a non-normal socket path means: it refuses it); write paths are
//! lexically normalised first (docs/language.md#sandbox), so the decision is on the file the
//! write would reach.

use std::borrow::Cow;

/// Absolute, with no `.` or `..` segment, no `//`, no trailing `/` and no NUL
/// (docs/language.md#network, `socket`).
pub fn is_normal_absolute_path(path: &str) -> bool {
    let Some(rest) = path.strip_prefix('/') else {
        return false;
    };
    !rest.is_empty()
        && !path.contains('\0')
        && rest
            .split('/')
            .all(|seg| !seg.is_empty() && seg != "." && seg != "..")
}

/// Lexically normalises an absolute path (docs/language.md#sandbox, `write`): `.` segments
/// dropped, repeated `/` collapsed, a trailing `/` dropped, and each `..`
/// removes the segment before it (`..` at the root stays at `/`). `None` for
/// a relative or empty path, or one that holds NUL. A path that is already
/// normal is returned borrowed.
pub fn normalize_absolute_path(path: &str) -> Option<Cow<'_, str>> {
    if !path.starts_with('/') || path.contains('\0') {
        return None;
    }
    if path == "/" || is_normal_absolute_path(path) {
        return Some(Cow::Borrowed(path));
    }
    Some(Cow::Owned(resolve(path, true)))
}

/// Lexically normalises any path-like word, for matching (guardian `path`
/// rules): an absolute path as [`normalize_absolute_path`]; a relative one
/// (`./a/../.aws//x`, `~/.ssh/./id_rsa`) with `.` and empty segments dropped
/// and each `..` removing the segment before it where there is one (leading
/// `..` and a leading `~` stay). A word with NUL is returned as it is.
pub fn lexical_path(word: &str) -> Cow<'_, str> {
    if word.contains('\0') {
        return Cow::Borrowed(word);
    }
    let absolute = word.starts_with('/');
    let resolved = resolve(word, absolute);
    if resolved == word {
        Cow::Borrowed(word)
    } else {
        Cow::Owned(resolved)
    }
}

/// The segment walk behind both: `..` pops a segment (at the root of an
/// absolute path it stays at `/`; in a relative one it stays when there is
/// nothing to pop, or only `..` or `~`).
fn resolve(path: &str, absolute: bool) -> String {
    let mut parts: Vec<&str> = Vec::new();
    for seg in path.split('/') {
        match seg {
            "" | "." => {}
            ".." if absolute || parts.last().is_some_and(|p| *p != ".." && *p != "~") => {
                parts.pop();
            }
            s => parts.push(s),
        }
    }
    let joined = parts.join("/");
    if absolute {
        format!("/{joined}")
    } else {
        joined
    }
}

/// Directories whose programs the agent cannot have written itself.
pub const SYSTEM_DIRS: &[&str] = &[
    "/bin",
    "/usr/bin",
    "/usr/local/bin",
    "/sbin",
    "/usr/sbin",
    "/opt/homebrew/bin",
];

/// The program's basename when `program` is a bare name or an absolute path
/// directly in a system directory; `None` for any other path (`./cat`,
/// `/tmp/cat`, `/usr/bin/x/cat`): a program the agent may have written.
pub fn trusted_name(program: &str) -> Option<&str> {
    match program.rsplit_once('/') {
        None => Some(program),
        Some((dir, name)) if SYSTEM_DIRS.contains(&dir) && !name.is_empty() => Some(name),
        Some(_) => None,
    }
}

/// The basename of any program path (`/usr/bin/git` → `git`).
pub fn basename(program: &str) -> &str {
    program.rsplit('/').next().unwrap_or(program)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn path_words_are_normalised_for_matching() {
        for (w, n) in [
            ("/home/dev/.aws/./credentials", "/home/dev/.aws/credentials"),
            ("./a/../.aws//credentials", ".aws/credentials"),
            ("~/.ssh/./id_rsa", "~/.ssh/id_rsa"),
            ("~/../x", "~/../x"),
            ("../../x", "../../x"),
            ("a/b/../../../c", "../c"),
            ("src/main.rs", "src/main.rs"),
        ] {
            assert_eq!(lexical_path(w), n, "{w:?}");
        }
    }

    #[test]
    fn write_paths_are_normalised() {
        for (p, n) in [
            ("/tmp/a/../b", "/tmp/b"),
            ("/w/src/../.git/config", "/w/.git/config"),
            ("/", "/"),
            ("//", "/"),
            ("/..", "/"),
            ("/../../etc/passwd", "/etc/passwd"),
            ("/a/./b/", "/a/b"),
            ("/a//b", "/a/b"),
            ("/a/b/..", "/a"),
            ("/a/.hidden", "/a/.hidden"),
            ("/a/...", "/a/..."),
        ] {
            let got = normalize_absolute_path(p);
            assert_eq!(got.as_deref(), Some(n), "{p:?}");
            // Normalising a normal path changes nothing.
            assert_eq!(normalize_absolute_path(n).as_deref(), Some(n), "{n:?}");
        }
        assert!(matches!(
            normalize_absolute_path("/a/b"),
            Some(Cow::Borrowed(_))
        ));
        for p in ["", "a/b", "./a", "../a", "~/a", "/a\0b"] {
            assert_eq!(normalize_absolute_path(p), None, "{p:?}");
        }
    }

    #[test]
    fn only_normal_absolute_paths() {
        assert!(is_normal_absolute_path("/var/run/docker.sock"));
        assert!(is_normal_absolute_path("/a/.hidden/b"));
        for p in [
            "", "/", "a/b", "./a", "/a/../b", "/a/./b", "//a", "/a//b", "/a/", "/a\0b", "/a/..",
        ] {
            assert!(!is_normal_absolute_path(p), "{p:?}");
        }
    }
}
