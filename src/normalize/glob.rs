//! File patterns of the `sandbox` block (docs/language.md#file-rules): a
//! path anchored at the root (`/etc/shadow`), the workspace (`secrets/prod`)
//! or the home directory (`~/.ssh`), whose segments may be globs.
//!
//! The matching rules, in full:
//!
//! - A pattern is split at `/`; empty and `.` segments are dropped; `..` is
//!   refused (a pattern never climbs out of its anchor).
//! - `*` matches any run of characters inside one segment (none included,
//!   and a leading `.` included: `*.env` matches `.env`); `?` one character;
//!   `[abc]`, `[a-z]`, `[!a-z]` or `[^a-z]` one character of a class.
//! - A segment that is exactly `**` matches zero or more whole segments;
//!   `**` inside a longer segment is `*`.
//! - Matching is exact in case (Linux file names), segment by segment.
//! - A pattern *covers* a path when it matches the path or one of its
//!   ancestors: a rule on a directory holds for everything beneath it.
//!
//! ```
//! use gatehouse::normalize::{Anchor, FilePattern};
//!
//! let p = FilePattern::parse("**/*.env").unwrap();
//! assert_eq!(p.anchor(), Anchor::Workspace);
//! assert!(p.covers(&["w"], &["w", "app", ".env"]));
//! assert!(!p.covers(&["w"], &["w", "app", "env.txt"]));
//! let ssh = FilePattern::parse("~/.ssh").unwrap();
//! assert!(ssh.covers(&["home", "me"], &["home", "me", ".ssh", "id_rsa"]));
//! ```

use serde::{Deserialize, Serialize};

/// What a relative pattern is relative to.
#[derive(Clone, Copy, Debug, Eq, PartialEq, Hash, Serialize, Deserialize)]
pub enum Anchor {
    /// `/...`: the file system's root.
    Root,
    /// `PATH` (neither `/` nor `~`): the workspace root of the query.
    Workspace,
    /// `~` or `~/...`: the home directory the query binds.
    Home,
}

/// Why a file pattern was refused.
#[derive(Clone, Debug, Eq, PartialEq, thiserror::Error)]
pub enum FilePatternError {
    /// The pattern is empty (or only `.` and `/` from its anchor on).
    #[error("an empty file pattern")]
    Empty,
    /// The pattern holds NUL.
    #[error("a file pattern cannot hold NUL")]
    Nul,
    /// A `..` segment.
    #[error("`{0}` climbs with `..`")]
    Climbs(String),
    /// `~user/...`: another user's home.
    #[error("`{0}` names another user's home; only `~` and `~/...` are home paths")]
    OtherHome(String),
    /// A `[` with no closing `]`.
    #[error("`{0}` opens a character class `[` that it never closes")]
    OpenClass(String),
    /// Too long.
    #[error("a file pattern is limited to 4096 bytes")]
    TooLong,
}

/// One segment of a pattern.
#[derive(Clone, Debug, Eq, PartialEq, Hash, Serialize, Deserialize)]
pub enum Segment {
    /// A name, compared exactly.
    Literal(String),
    /// A segment with `*`, `?` or `[...]`.
    Glob(String),
    /// `**`: zero or more segments.
    AnyDepth,
}

/// A parsed file pattern.
#[derive(Clone, Debug, Eq, PartialEq, Hash, Serialize, Deserialize)]
pub struct FilePattern {
    anchor: Anchor,
    segments: Vec<Segment>,
}

const MAX_PATTERN: usize = 4096;

impl FilePattern {
    /// Parses a pattern as written in a `sandbox` block.
    pub fn parse(text: &str) -> Result<FilePattern, FilePatternError> {
        if text.len() > MAX_PATTERN {
            return Err(FilePatternError::TooLong);
        }
        if text.contains('\0') {
            return Err(FilePatternError::Nul);
        }
        let (anchor, rest) = if let Some(rest) = text.strip_prefix('/') {
            (Anchor::Root, rest)
        } else if text == "~" {
            (Anchor::Home, "")
        } else if let Some(rest) = text.strip_prefix("~/") {
            (Anchor::Home, rest)
        } else if text.starts_with('~') {
            return Err(FilePatternError::OtherHome(text.to_string()));
        } else {
            (Anchor::Workspace, text)
        };
        let mut segments = Vec::new();
        for seg in rest.split('/') {
            match seg {
                "" | "." => {}
                ".." => return Err(FilePatternError::Climbs(text.to_string())),
                "**" => {
                    // `**/**` is one `**`.
                    if segments.last() != Some(&Segment::AnyDepth) {
                        segments.push(Segment::AnyDepth);
                    }
                }
                s if s.contains(['*', '?', '[']) => {
                    if !classes_closed(s) {
                        return Err(FilePatternError::OpenClass(text.to_string()));
                    }
                    segments.push(Segment::Glob(s.to_string()));
                }
                s => segments.push(Segment::Literal(s.to_string())),
            }
        }
        if segments.is_empty() && anchor == Anchor::Workspace && !text.starts_with('.') {
            return Err(FilePatternError::Empty);
        }
        Ok(FilePattern { anchor, segments })
    }

    /// Where the pattern is anchored.
    pub fn anchor(&self) -> Anchor {
        self.anchor
    }

    /// The pattern's segments after its anchor.
    pub fn segments(&self) -> &[Segment] {
        &self.segments
    }

    /// Whether every segment is a literal name (a plain path).
    pub fn is_literal(&self) -> bool {
        self.segments
            .iter()
            .all(|s| matches!(s, Segment::Literal(_)))
    }

    /// The literal segments, when the pattern is a plain path.
    pub fn literal(&self) -> Option<Vec<&str>> {
        self.segments
            .iter()
            .map(|s| match s {
                Segment::Literal(l) => Some(l.as_str()),
                _ => None,
            })
            .collect()
    }

    /// Whether the pattern, anchored at `base` (the segments of the root,
    /// workspace or home it is relative to), covers `path`: matches it or
    /// one of its ancestors.
    pub fn covers(&self, base: &[&str], path: &[&str]) -> bool {
        let Some(rest) = strip_base(base, path) else {
            return false;
        };
        covers_segments(&self.segments, rest)
    }
}

/// `path` with `base` removed from its front.
fn strip_base<'p, 'q>(base: &[&str], path: &'p [&'q str]) -> Option<&'p [&'q str]> {
    if path.len() < base.len() {
        return None;
    }
    let (head, rest) = path.split_at(base.len());
    (head == base).then_some(rest)
}

/// Whether the pattern matches some prefix of `path`. A set of reachable
/// pattern positions walks the path once: O(path × pattern) segment
/// matches, whatever the `**`s.
fn covers_segments(pattern: &[Segment], path: &[&str]) -> bool {
    let n = pattern.len();
    let mut reach = vec![false; n + 1];
    set(&mut reach, 0);
    close_any_depth(pattern, &mut reach);
    if at(&reach, n) {
        return true;
    }
    for seg in path {
        let mut next = vec![false; n + 1];
        for (i, p) in pattern.iter().enumerate() {
            if !at(&reach, i) {
                continue;
            }
            match p {
                Segment::AnyDepth => set(&mut next, i),
                Segment::Literal(l) if l == seg => set(&mut next, i + 1),
                Segment::Glob(g) if glob_segment(g.as_bytes(), seg.as_bytes()) => {
                    set(&mut next, i + 1)
                }
                _ => {}
            }
        }
        close_any_depth(pattern, &mut next);
        if at(&next, n) {
            return true;
        }
        if !next.iter().any(|b| *b) {
            return false;
        }
        reach = next;
    }
    false
}

fn at(v: &[bool], i: usize) -> bool {
    v.get(i).copied().unwrap_or(false)
}

fn set(v: &mut [bool], i: usize) {
    if let Some(r) = v.get_mut(i) {
        *r = true;
    }
}

/// A `**` may match zero segments: reaching it reaches what follows it.
fn close_any_depth(pattern: &[Segment], reach: &mut [bool]) {
    for (i, p) in pattern.iter().enumerate() {
        if at(reach, i) && *p == Segment::AnyDepth {
            set(reach, i + 1);
        }
    }
}

/// Every `[` is closed by a later `]` (a `]` right after `[`, `[!` or `[^`
/// is a member).
fn classes_closed(seg: &str) -> bool {
    let b = seg.as_bytes();
    let mut i = 0;
    while let Some(&c) = b.get(i) {
        if c == b'[' {
            match class_end(b, i) {
                Some(end) => i = end,
                None => return false,
            }
        } else {
            i += 1;
        }
    }
    true
}

/// The index after the `]` closing the class opened at `open`.
pub(crate) fn class_end(b: &[u8], open: usize) -> Option<usize> {
    let mut i = open + 1;
    if matches!(b.get(i), Some(b'!' | b'^')) {
        i += 1;
    }
    if b.get(i) == Some(&b']') {
        i += 1;
    }
    while let Some(&c) = b.get(i) {
        if c == b']' {
            return Some(i + 1);
        }
        i += 1;
    }
    None
}

/// Whether the class `b[open..end]` (its `]` at `end - 1`) holds `c`.
pub(crate) fn class_holds(b: &[u8], open: usize, end: usize, c: u8) -> bool {
    let mut i = open + 1;
    let negated = matches!(b.get(i), Some(b'!' | b'^'));
    if negated {
        i += 1;
    }
    let last = end.saturating_sub(1);
    let mut hit = false;
    while i < last {
        let Some(&lo) = b.get(i) else { break };
        match (b.get(i + 1), b.get(i + 2)) {
            (Some(b'-'), Some(&hi)) if i + 2 < last => {
                hit |= lo <= c && c <= hi;
                i += 3;
            }
            _ => {
                hit |= lo == c;
                i += 1;
            }
        }
    }
    hit != negated
}

/// One segment against one glob segment, bytewise (a class or `?` takes
/// one byte; non-ASCII names still match `*`). The classic two-pointer walk
/// with one backtrack point: O(g × s) at worst.
fn glob_segment(g: &[u8], s: &[u8]) -> bool {
    let (mut gi, mut si) = (0usize, 0usize);
    let mut star: Option<(usize, usize)> = None;
    while let Some(&c) = s.get(si) {
        match g.get(gi) {
            Some(b'*') => {
                while g.get(gi) == Some(&b'*') {
                    gi += 1;
                }
                star = Some((gi, si));
                continue;
            }
            Some(b'?') => {
                gi += 1;
                si += 1;
                continue;
            }
            Some(b'[') => match class_end(g, gi) {
                Some(end) if class_holds(g, gi, end, c) => {
                    gi = end;
                    si += 1;
                    continue;
                }
                None if c == b'[' => {
                    gi += 1;
                    si += 1;
                    continue;
                }
                _ => {}
            },
            Some(&p) if p == c => {
                gi += 1;
                si += 1;
                continue;
            }
            _ => {}
        }
        match star {
            Some((sg, ss)) => {
                gi = sg;
                si = ss + 1;
                star = Some((sg, ss + 1));
            }
            None => return false,
        }
    }
    while g.get(gi) == Some(&b'*') {
        gi += 1;
    }
    gi == g.len()
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn covers(p: &str, path: &str) -> bool {
        let pat = FilePattern::parse(p).unwrap();
        let segs: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
        let base: &[&str] = match pat.anchor() {
            Anchor::Root => &[],
            Anchor::Workspace => &["w"],
            Anchor::Home => &["home", "me"],
        };
        pat.covers(base, &segs)
    }

    #[test]
    fn the_documented_rules() {
        assert!(covers("/etc/shadow", "/etc/shadow"));
        assert!(!covers("/etc/shadow", "/etc/shadow2"));
        assert!(covers("secrets", "/w/secrets/prod/key"));
        assert!(!covers("secrets", "/x/secrets"));
        assert!(covers("**/*.env", "/w/.env"));
        assert!(covers("**/*.env", "/w/a/b/prod.env"));
        assert!(!covers("**/*.env", "/w/a/b/prod.envy"));
        assert!(covers("*.pem", "/w/k.pem"));
        assert!(!covers("*.pem", "/w/sub/k.pem"));
        assert!(covers("~/.ssh", "/home/me/.ssh/id_rsa"));
        assert!(covers("~", "/home/me/x"));
        assert!(covers("/a/**", "/a"));
        assert!(covers("/a/**/z", "/a/z"));
        assert!(covers("/a/**/z", "/a/b/c/z/q"));
        assert!(!covers("/a/**/z", "/a/b/c/y"));
        assert!(covers("/a/?.txt", "/a/b.txt"));
        assert!(!covers("/a/?.txt", "/a/bb.txt"));
        assert!(covers("/a/[a-c]x", "/a/bx"));
        assert!(!covers("/a/[!a-c]x", "/a/bx"));
        assert!(covers("/a/[^a-c]x", "/a/dx"));
        assert!(covers("/a/[]]x", "/a/]x"));
        assert!(covers("/a/b**c", "/a/bxxc"));
        assert!(!covers("/Etc/shadow", "/etc/shadow"));
    }

    #[test]
    fn refusals() {
        assert_eq!(FilePattern::parse(""), Err(FilePatternError::Empty));
        assert!(matches!(
            FilePattern::parse("a/../b"),
            Err(FilePatternError::Climbs(_))
        ));
        assert!(matches!(
            FilePattern::parse("~bob/x"),
            Err(FilePatternError::OtherHome(_))
        ));
        assert!(matches!(
            FilePattern::parse("/a/[bc"),
            Err(FilePatternError::OpenClass(_))
        ));
        assert!(FilePattern::parse(".").is_ok());
        assert!(FilePattern::parse("/").is_ok());
    }

    #[test]
    fn star_runs_stay_linear() {
        let g = "*a*a*a*a*a*a*a*a*a*a*b";
        let s = "a".repeat(4000);
        assert!(!glob_segment(g.as_bytes(), s.as_bytes()));
    }
}
