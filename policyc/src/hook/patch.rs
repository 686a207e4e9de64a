//! The files a Codex `apply_patch` touches: every `*** Add File:`,
//! `*** Update File:`, `*** Delete File:` and `*** Move to:` line of the
//! patch (Codex's patch format, paths relative to the session's folder).

/// Every path the patch writes, deletes or moves to, in order, each once.
/// A patch that names no file, or a file line with no path, cannot be
/// judged and is refused.
pub fn paths(patch: &str) -> Result<Vec<String>, String> {
    const MARKS: [&str; 4] = [
        "*** Add File:",
        "*** Update File:",
        "*** Delete File:",
        "*** Move to:",
    ];
    let mut out: Vec<String> = Vec::new();
    for line in patch.lines() {
        // Codex reads its markers with surrounding whitespace trimmed
        // (a heredoc's indentation): so does this.
        let line = line.trim();
        let Some(path) = MARKS.iter().find_map(|m| line.strip_prefix(m)) else {
            continue;
        };
        let path = path.trim();
        if path.is_empty() {
            return Err(format!("`{line}` names no file"));
        }
        if !out.iter().any(|p| p == path) {
            out.push(path.to_string());
        }
    }
    if out.is_empty() {
        return Err("it names no file (no `*** Add File:`, `*** Update File:`, `*** Delete File:` or `*** Move to:` line)".into());
    }
    Ok(out)
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::indexing_slicing)]
mod tests {
    #[test]
    fn every_file_the_patch_touches_is_named() {
        let patch = "*** Begin Patch\n*** Add File: notes/new.md\n+hello\n*** Update File: src/lib.rs\n*** Move to: src/core.rs\n@@\n-a\n+b\n  *** Delete File: .git/hooks/pre-commit\n*** Update File: src/lib.rs\n*** End Patch\n";
        assert_eq!(
            super::paths(patch).unwrap(),
            [
                "notes/new.md",
                "src/lib.rs",
                "src/core.rs",
                ".git/hooks/pre-commit"
            ]
        );
    }

    #[test]
    fn a_patch_naming_no_file_is_refused() {
        assert!(super::paths("*** Begin Patch\n*** End Patch\n").is_err());
        assert!(super::paths("*** Begin Patch\n*** Add File:   \n*** End Patch").is_err());
        assert!(super::paths("").is_err());
    }
}
