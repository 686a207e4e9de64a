//! Source files, byte spans and line/column lookup.
//!
//! Every AST node carries a [`Span`]. Spans never take part in equality: two
//! ASTs that differ only in layout compare equal, which is what lets the
//! formatter prove that it preserves meaning (`parse(fmt(x)) == parse(x)`).

use serde::{Deserialize, Serialize};

/// Index of a file in a [`SourceMap`].
#[derive(Clone, Copy, Debug, Default, Eq, PartialEq, Hash, Serialize, Deserialize)]
pub struct FileId(pub u32);

/// A byte range in one source file.
///
/// `PartialEq` is deliberately always `true` (and `Hash` hashes nothing) so
/// that spans never take part in AST equality. Compare [`Span::range`] when
/// the location itself matters.
#[derive(Clone, Copy, Debug, Default, Serialize, Deserialize)]
pub struct Span {
    /// The file it is in.
    pub file: FileId,
    /// The first byte.
    pub start: u32,
    /// One past the last byte.
    pub end: u32,
}

impl PartialEq for Span {
    fn eq(&self, _other: &Self) -> bool {
        true
    }
}
impl Eq for Span {}
impl std::hash::Hash for Span {
    fn hash<H: std::hash::Hasher>(&self, _state: &mut H) {}
}

impl Span {
    /// The bytes `start..end` of a file (clamped to `u32`).
    pub fn new(file: FileId, start: usize, end: usize) -> Self {
        Span {
            file,
            start: clamp(start),
            end: clamp(end),
        }
    }
    /// The span's location, for comparisons that do care about it.
    pub fn range(&self) -> (FileId, u32, u32) {
        (self.file, self.start, self.end)
    }
    /// The smallest span covering both.
    pub fn to(self, other: Span) -> Span {
        Span {
            file: self.file,
            start: self.start.min(other.start),
            end: self.end.max(other.end),
        }
    }
}

fn clamp(n: usize) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

/// One loaded source file with its line index.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct SourceFile {
    /// The name diagnostics show (usually the path).
    pub name: String,
    /// The text.
    pub text: String,
    line_starts: Vec<usize>,
}

/// A resolved position: 1-based line and column (columns count characters).
#[derive(Clone, Copy, Debug, Default, Eq, PartialEq, Serialize, Deserialize)]
pub struct LineCol {
    /// The line, from 1.
    pub line: usize,
    /// The column, from 1, in characters.
    pub column: usize,
}

impl SourceFile {
    /// A file and its line index.
    pub fn new(name: impl Into<String>, text: impl Into<String>) -> Self {
        let text = text.into();
        let mut line_starts = vec![0];
        line_starts.extend(text.match_indices('\n').map(|(i, _)| i + 1));
        SourceFile {
            name: name.into(),
            text,
            line_starts,
        }
    }

    /// Line and column of a byte offset (clamped to the text).
    pub fn line_col(&self, offset: u32) -> LineCol {
        self.line_col_near(offset, &mut 0)
    }

    /// [`SourceFile::line_col`] for offsets asked in increasing order (a
    /// compiler naming every rule): `near` is the line index of the last
    /// answer, walked forward a line or two instead of a binary search over
    /// every line; an earlier offset searches. The same answer either way.
    pub(crate) fn line_col_near(&self, offset: u32, near: &mut usize) -> LineCol {
        let offset = (offset as usize).min(self.text.len());
        let start_of = |l: usize| self.line_starts.get(l).copied();
        let mut line = *near;
        if start_of(line).is_none_or(|s| s > offset) {
            line = self
                .line_starts
                .partition_point(|&s| s <= offset)
                .saturating_sub(1);
        } else {
            // Forward at most a few lines, then search the rest.
            let mut steps = 0;
            while start_of(line + 1).is_some_and(|s| s <= offset) {
                line += 1;
                steps += 1;
                if steps == 8 {
                    line = self
                        .line_starts
                        .partition_point(|&s| s <= offset)
                        .saturating_sub(1);
                    break;
                }
            }
        }
        *near = line;
        let start = self.line_starts.get(line).copied().unwrap_or(0);
        let column = self
            .text
            .get(start..offset)
            .map_or(0, |s| s.chars().count())
            + 1;
        LineCol {
            line: line + 1,
            column,
        }
    }

    /// The text of a 1-based line, without its line break.
    pub fn line_text(&self, line: usize) -> &str {
        let start = self
            .line_starts
            .get(line.wrapping_sub(1))
            .copied()
            .unwrap_or(self.text.len());
        let end = self
            .line_starts
            .get(line)
            .copied()
            .unwrap_or(self.text.len());
        self.text
            .get(start..end)
            .unwrap_or("")
            .trim_end_matches(['\n', '\r'])
    }

    /// The source text under a span.
    pub fn slice(&self, span: Span) -> &str {
        self.text
            .get(span.start as usize..span.end as usize)
            .unwrap_or("")
    }
}

/// All files of one policy set: what [`build()`](crate::build()) and
/// [`PolicySet::from_sources`](crate::PolicySet::from_sources) read, and
/// what diagnostics are rendered against.
///
/// ```
/// use gatehouse::SourceMap;
///
/// let mut sources = SourceMap::new();
/// let id = sources.add("net.policy", "policy p {\n  network {\n    allow domain github.com\n  }\n}\n");
/// let file = sources.get(id).expect("added");
/// assert_eq!(file.line_text(3), "    allow domain github.com");
/// assert_eq!(file.line_col(27).line, 3);
/// ```
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct SourceMap {
    files: Vec<SourceFile>,
}

impl SourceMap {
    /// No files yet.
    pub fn new() -> Self {
        Self::default()
    }
    /// Adds a file; its id is its position.
    pub fn add(&mut self, name: impl Into<String>, text: impl Into<String>) -> FileId {
        self.files.push(SourceFile::new(name, text));
        FileId(clamp(self.files.len() - 1))
    }
    /// The file with this id.
    pub fn get(&self, id: FileId) -> Option<&SourceFile> {
        self.files.get(id.0 as usize)
    }
    /// Every file with its id, in order.
    pub fn files(&self) -> impl Iterator<Item = (FileId, &SourceFile)> {
        self.files
            .iter()
            .enumerate()
            .map(|(i, f)| (FileId(clamp(i)), f))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn line_col_counts_characters() {
        let f = SourceFile::new("x", "ab\nçd e\n");
        assert_eq!(f.line_col(0), LineCol { line: 1, column: 1 });
        assert_eq!(f.line_col(3), LineCol { line: 2, column: 1 });
        // 'ç' is two bytes; 'd' is the second character.
        assert_eq!(f.line_col(5), LineCol { line: 2, column: 2 });
        assert_eq!(f.line_text(2), "çd e");
        assert_eq!(f.line_text(9), "");
    }

    #[test]
    fn line_col_near_agrees_with_a_search() {
        let text = "a\n\nbc d\n".repeat(20) + "çé\nlast";
        let f = SourceFile::new("x", text.as_str());
        let offsets: Vec<u32> = (0..=text.len() as u32 + 2).collect();
        // Increasing, decreasing, and jumping (a fresh hint each time too).
        let mut near = 0;
        for &o in offsets
            .iter()
            .chain(offsets.iter().rev())
            .chain([3, 70, 1, 90, 0].iter())
        {
            let mut fresh = 0;
            assert_eq!(
                f.line_col_near(o, &mut near),
                f.line_col_near(o, &mut fresh)
            );
            let line = f
                .line_starts
                .partition_point(|&s| s <= (o as usize).min(text.len()));
            assert_eq!(f.line_col_near(o, &mut 0).line, line);
        }
    }

    #[test]
    fn spans_do_not_take_part_in_equality() {
        let a = Span::new(FileId(0), 1, 2);
        let b = Span::new(FileId(3), 7, 9);
        assert_eq!(a, b);
        assert_ne!(a.range(), b.range());
    }
}
