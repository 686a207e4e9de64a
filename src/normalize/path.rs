//! Paths. The engine never guesses what a non-normal path means: it refuses
//! it.

/// Absolute, with no `.` or `..` segment, no `//`, no trailing `/` and no NUL
/// (language spec §3, `socket`).
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

#[cfg(test)]
mod tests {
    use super::*;

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
