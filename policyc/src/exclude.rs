//! `--exclude GLOB`: `*` and `?` within one path segment, `**` across
//! segments. A glob without `/` is tried against the name of every file and
//! directory, at any depth (`--exclude invalid`, `--exclude '*.draft.policy'`);
//! one with `/` against the whole path as given on the command line, with a
//! leading `./` dropped (`--exclude 'policies/drafts/**'`). An excluded
//! directory is not read at all.

pub struct Excludes(Vec<String>);

impl Excludes {
    pub fn new(globs: &[String]) -> Self {
        Excludes(
            globs
                .iter()
                .map(|g| g.trim_start_matches("./").trim_end_matches('/').to_string())
                .collect(),
        )
    }

    /// Whether `path` (as the walk names it) is excluded.
    pub fn excludes(&self, path: &std::path::Path) -> bool {
        let full = path.to_string_lossy();
        let full = full.trim_start_matches("./");
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy())
            .unwrap_or_default();
        self.0.iter().any(|g| {
            if g.contains('/') {
                matches(g.as_bytes(), full.as_bytes())
            } else {
                matches(g.as_bytes(), name.as_bytes())
            }
        })
    }
}

/// Whether `glob` matches all of `text`.
fn matches(glob: &[u8], text: &[u8]) -> bool {
    match glob {
        [] => text.is_empty(),
        [b'*', b'*', rest @ ..] => {
            // `**/` also matches nothing: `a/**/b` matches `a/b`.
            let rest_after_slash = rest.strip_prefix(b"/").unwrap_or(rest);
            (0..=text.len()).any(|i| {
                text.get(i..)
                    .is_some_and(|t| matches(rest, t) || matches(rest_after_slash, t))
            })
        }
        [b'*', rest @ ..] => {
            let segment = text.iter().position(|&c| c == b'/').unwrap_or(text.len());
            (0..=segment).any(|i| text.get(i..).is_some_and(|t| matches(rest, t)))
        }
        [b'?', rest @ ..] => match text {
            [c, t @ ..] if *c != b'/' => matches(rest, t),
            _ => false,
        },
        [g, rest @ ..] => match text {
            [c, t @ ..] if c == g => matches(rest, t),
            _ => false,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    #[test]
    fn globs() {
        let e = |g: &str, p: &str| Excludes::new(&[g.to_string()]).excludes(Path::new(p));
        assert!(e("invalid", "policies/invalid"));
        assert!(!e("invalid", "policies/invalid.policy"));
        assert!(e("*.draft.policy", "a/b/x.draft.policy"));
        assert!(e("policies/drafts/**", "policies/drafts/x.policy"));
        assert!(e("policies/drafts/**", "./policies/drafts/a/b.policy"));
        assert!(e("policies/drafts", "policies/drafts"));
        assert!(!e("policies/*.policy", "policies/a/b.policy"));
        assert!(e("policies/*.policy", "policies/b.policy"));
        assert!(e("**/x.policy", "x.policy"));
        assert!(e("a/**/b.policy", "a/b.policy"));
        assert!(e("a?c", "abc"));
        assert!(!e("a?c", "a/c"));
    }
}
