//! The launcher's walks of the host's file system at start: the nested
//! repositories below each write root, and a glob's matches (what the
//! kernel can hold of a glob: the paths that match at launch).

use std::collections::BTreeSet;
use std::path::Path;

use crate::plan::segs;

/// Most entries a glob's expansion may visit.
const WALK_LIMIT: usize = 200_000;

/// The most directories looked at below one write root for nested
/// repositories (a bound on the launch's cost).
const MAX_WALK: usize = 20_000;

/// Adds the `.git/hooks` and `.git/config` (any case) of every repository
/// found below `root` (not directly under it: that `.git` is protected
/// whole) to `anchors`, so that the engine decides them (protected: read
/// only). Symbolic links are not followed; past [`MAX_WALK`] directories a
/// note says where the search stopped.
pub(crate) fn nested_repositories(
    root: &Path,
    anchors: &mut BTreeSet<String>,
    notes: &mut Vec<String>,
) {
    let mut stack: Vec<(std::path::PathBuf, usize)> = vec![(root.to_path_buf(), 0)];
    let mut seen = 0usize;
    while let Some((dir, depth)) = stack.pop() {
        seen += 1;
        if seen > MAX_WALK {
            notes.push(format!(
                "looked for nested repositories in {MAX_WALK} directories below `{}` and stopped: the hooks and config of repositories further in are protected by the engine's decisions, not by the kernel",
                root.display()
            ));
            return;
        }
        let Ok(rd) = std::fs::read_dir(&dir) else {
            continue;
        };
        for e in rd.flatten() {
            let Ok(kind) = e.file_type() else { continue };
            if !kind.is_dir() {
                continue;
            }
            let name = e.file_name().to_string_lossy().into_owned();
            if name.eq_ignore_ascii_case(".git") {
                if depth >= 1 {
                    for inner in std::fs::read_dir(e.path()).into_iter().flatten().flatten() {
                        let n = inner.file_name().to_string_lossy().into_owned();
                        if n.eq_ignore_ascii_case("hooks") || n.eq_ignore_ascii_case("config") {
                            anchors.insert(inner.path().display().to_string());
                        }
                    }
                }
                continue;
            }
            stack.push((e.path(), depth + 1));
        }
    }
}

/// Adds the paths under `dir` a glob matches (the shallowest of each
/// branch) to `anchors`. Symbolic links to directories are followed, as
/// sandbox-runtime's expansion (ripgrep `--follow`) follows them, so that
/// `**/*.env` reaches `WS/link-home/project.env` (the mount made on that
/// path covers the file the link leads to); each directory is walked once,
/// so a link loop ends.
pub(crate) fn expand(
    pattern: &gatehouse::normalize::FilePattern,
    base: &str,
    dir: &Path,
    anchors: &mut BTreeSet<String>,
    seen: &mut usize,
) {
    let mut walked = BTreeSet::new();
    expand_in(pattern, base, dir, anchors, seen, &mut walked);
}

fn expand_in(
    pattern: &gatehouse::normalize::FilePattern,
    base: &str,
    dir: &Path,
    anchors: &mut BTreeSet<String>,
    seen: &mut usize,
    walked: &mut BTreeSet<(u64, u64)>,
) {
    use std::os::unix::fs::MetadataExt;
    let Ok(meta) = std::fs::metadata(dir) else {
        return;
    };
    if !walked.insert((meta.dev(), meta.ino())) {
        return;
    }
    let Ok(rd) = std::fs::read_dir(dir) else {
        return;
    };
    for e in rd.flatten() {
        *seen += 1;
        if *seen > WALK_LIMIT {
            return;
        }
        let p = e.path();
        let text = p.to_string_lossy().into_owned();
        if pattern.covers(&segs(base), &segs(&text)) {
            anchors.insert(text);
        } else if e
            .file_type()
            .is_ok_and(|t| t.is_dir() || (t.is_symlink() && p.is_dir()))
        {
            expand_in(pattern, base, &p, anchors, seen, walked);
        }
    }
}
