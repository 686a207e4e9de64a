//! The rule table of a compiled set, compact (issue 62): file names
//! interned and named by runs of rules, every statement's text in one
//! arena in rule order, the few `because` texts beside it, and three bytes
//! a rule — the length of its text, its line less the previous rule's, its
//! column — with the rare value a byte cannot hold in a list beside them.
//! Every 64th rule's text start and line are kept (derived, rebuilt on
//! load), so finding a rule reads at most 63 rules' bytes.
//!
//! Artifacts (format 8) hold the table as it is, decoded in place;
//! [`RuleTable::is_valid`] checks every range and order a load relies on.

use serde::{Deserialize, Serialize};

use super::{RuleId, RuleRef};

/// Rules from one mark to the next.
const MARK: usize = 64;
/// A text length byte saying the length is in `wide_lens`.
const LEN_WIDE: u8 = u8::MAX;
/// A line byte saying the rule's line (itself, not a difference) is in
/// `wide_lines`.
const LINE_WIDE: u8 = u8::MAX;
/// A column byte saying the column is in `wide_columns` (columns count
/// from 1).
const COLUMN_WIDE: u8 = 0;

/// The table as artifacts hold it: every field but the derived ones.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
struct Stored {
    files: Vec<String>,
    /// `(first rule, file)`: the rules from `first` on, up to the next run,
    /// were written in `files[file]`.
    file_runs: Vec<(u32, u32)>,
    text: String,
    /// Each rule's text length in bytes, or [`LEN_WIDE`].
    lens: Vec<u8>,
    /// Each rule's line less the previous rule's (the first rule's less
    /// 0), or [`LINE_WIDE`].
    lines: Vec<u8>,
    /// Each rule's column, or [`COLUMN_WIDE`].
    columns: Vec<u8>,
    /// `(rule, value)` for each byte above that could not hold its value,
    /// by rule.
    wide_lens: Vec<(u32, u32)>,
    wide_lines: Vec<(u32, u32)>,
    wide_columns: Vec<(u32, u32)>,
    /// `(rule, range in because_text)`, by rule.
    because: Vec<(u32, [u32; 2])>,
    because_text: String,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(from = "Stored")]
pub(crate) struct RuleTable {
    s: Stored,
    /// `(text start, line)` of rules 0, [`MARK`], 2 × [`MARK`], …:
    /// derived, never stored.
    marks: Vec<(u32, u32)>,
    /// The line of the rule pushed last (while building).
    last_line: u32,
}

impl Serialize for RuleTable {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.s.serialize(s)
    }
}

impl From<Stored> for RuleTable {
    /// Rebuilds the marks. A table that does not add up (a byte without
    /// its wide value, lengths past `u32`) gets marks that stop where it
    /// stops adding up, and [`RuleTable::is_valid`] refuses it.
    fn from(s: Stored) -> RuleTable {
        let mut t = RuleTable {
            s,
            marks: Vec::new(),
            last_line: 0,
        };
        t.marks = t.walk().map(|(_, m)| m).unwrap_or_default();
        t
    }
}

/// The value a wide list holds for `rule`.
fn wide(list: &[(u32, u32)], rule: usize) -> Option<u32> {
    let rule = u32::try_from(rule).ok()?;
    let k = list.binary_search_by_key(&rule, |&(r, _)| r).ok()?;
    list.get(k).map(|&(_, v)| v)
}

impl RuleTable {
    pub(crate) fn len(&self) -> usize {
        self.s.lens.len()
    }

    /// Gives back the growth room of the table's vectors (a compiled set
    /// lives long; its size is what a proxy holds).
    pub(crate) fn shrink(&mut self) {
        self.s.files.shrink_to_fit();
        self.s.file_runs.shrink_to_fit();
        self.s.text.shrink_to_fit();
        self.s.lens.shrink_to_fit();
        self.s.lines.shrink_to_fit();
        self.s.columns.shrink_to_fit();
        self.s.wide_lens.shrink_to_fit();
        self.s.wide_lines.shrink_to_fit();
        self.s.wide_columns.shrink_to_fit();
        self.s.because.shrink_to_fit();
        self.s.because_text.shrink_to_fit();
        self.marks.shrink_to_fit();
    }

    /// Adds a rule; `file` is interned.
    pub(crate) fn push(
        &mut self,
        file: &str,
        line: usize,
        column: usize,
        source: &str,
        because: Option<&str>,
    ) -> RuleId {
        let file = match self.s.files.iter().rposition(|f| f == file) {
            Some(i) => i,
            None => {
                self.s.files.push(file.to_string());
                self.s.files.len() - 1
            }
        };
        self.push_at(
            u32::try_from(file).unwrap_or(u32::MAX),
            u32::try_from(line).unwrap_or(u32::MAX),
            u32::try_from(column).unwrap_or(u32::MAX),
            source,
            because,
        )
    }

    fn push_at(
        &mut self,
        file: u32,
        line: u32,
        column: u32,
        source: &str,
        because: Option<&str>,
    ) -> RuleId {
        let i = self.s.lens.len();
        let id = u32::try_from(i).unwrap_or(u32::MAX);
        if self.s.file_runs.last().is_none_or(|&(_, f)| f != file) {
            self.s.file_runs.push((id, file));
        }
        let start = u32::try_from(self.s.text.len()).unwrap_or(u32::MAX);
        if i.is_multiple_of(MARK) {
            self.marks.push((start, line));
        }
        self.s.text.push_str(source);
        let len = u32::try_from(source.len()).unwrap_or(u32::MAX);
        match u8::try_from(len) {
            Ok(b) if b != LEN_WIDE => self.s.lens.push(b),
            _ => {
                self.s.lens.push(LEN_WIDE);
                self.s.wide_lens.push((id, len));
            }
        }
        match line.checked_sub(self.last_line).map(u8::try_from) {
            Some(Ok(b)) if b != LINE_WIDE => self.s.lines.push(b),
            _ => {
                self.s.lines.push(LINE_WIDE);
                self.s.wide_lines.push((id, line));
            }
        }
        self.last_line = line;
        match u8::try_from(column) {
            Ok(b) if b != COLUMN_WIDE => self.s.columns.push(b),
            _ => {
                self.s.columns.push(COLUMN_WIDE);
                self.s.wide_columns.push((id, column));
            }
        }
        if let Some(b) = because {
            let from = u32::try_from(self.s.because_text.len()).unwrap_or(u32::MAX);
            self.s.because_text.push_str(b);
            let to = u32::try_from(self.s.because_text.len()).unwrap_or(u32::MAX);
            self.s.because.push((id, [from, to]));
        }
        RuleId(id)
    }

    /// The length of rule `i`'s text.
    fn len_of(&self, i: usize) -> Option<u32> {
        match *self.s.lens.get(i)? {
            LEN_WIDE => wide(&self.s.wide_lens, i),
            b => Some(u32::from(b)),
        }
    }

    /// The line of rule `i`, the previous rule's being `prev`.
    fn line_of(&self, i: usize, prev: u32) -> Option<u32> {
        match *self.s.lines.get(i)? {
            LINE_WIDE => wide(&self.s.wide_lines, i),
            b => prev.checked_add(u32::from(b)),
        }
    }

    fn column_of(&self, i: usize) -> Option<u32> {
        match *self.s.columns.get(i)? {
            COLUMN_WIDE => wide(&self.s.wide_columns, i),
            b => Some(u32::from(b)),
        }
    }

    /// Walks every rule in order: the end of the last text, and the marks
    /// — `None` as soon as a rule does not add up.
    fn walk(&self) -> Option<(u32, Vec<(u32, u32)>)> {
        let n = self.len();
        if self.s.lines.len() != n || self.s.columns.len() != n {
            return None;
        }
        let mut marks = Vec::with_capacity(n.div_ceil(MARK));
        let (mut start, mut line) = (0u32, 0u32);
        for i in 0..n {
            line = self.line_of(i, line)?;
            if i.is_multiple_of(MARK) {
                marks.push((start, line));
            }
            start = start.checked_add(self.len_of(i)?)?;
        }
        Some((start, marks))
    }

    /// The file index of a rule: the run it falls in.
    fn file_of(&self, id: RuleId) -> Option<u32> {
        let at = self
            .s
            .file_runs
            .partition_point(|&(first, _)| first <= id.0);
        self.s.file_runs.get(at.checked_sub(1)?).map(|&(_, f)| f)
    }

    pub(crate) fn get(&self, id: RuleId) -> Option<RuleRef<'_>> {
        let i = id.0 as usize;
        if i >= self.len() {
            return None;
        }
        let from = i - i % MARK;
        let &(mark_start, mark_line) = self.marks.get(from / MARK)?;
        // The texts before it since the mark: their length bytes summed
        // (at most 63 × 255), each wide one's byte then swapped for its
        // value.
        let lens = self.s.lens.get(from..i)?;
        let mut start = mark_start.checked_add(lens.iter().map(|&b| u32::from(b)).sum::<u32>())?;
        for (k, _) in lens.iter().enumerate().filter(|&(_, &b)| b == LEN_WIDE) {
            start = start
                .checked_sub(u32::from(LEN_WIDE))?
                .checked_add(wide(&self.s.wide_lens, from + k)?)?;
        }
        // Its line: the last line given whole since the mark (or the
        // mark's), and the differences after it.
        let steps = self.s.lines.get(from + 1..=i)?;
        let (base, after) = match steps.iter().rposition(|&b| b == LINE_WIDE) {
            Some(k) => (wide(&self.s.wide_lines, from + 1 + k)?, steps.get(k + 1..)?),
            None => (mark_line, steps),
        };
        let line = base.checked_add(after.iter().map(|&b| u32::from(b)).sum::<u32>())?;
        let end = start.checked_add(self.len_of(i)?)?;
        let because = match self.s.because.binary_search_by_key(&id.0, |&(r, _)| r) {
            Ok(k) => {
                let [from, to] = self.s.because.get(k)?.1;
                Some(self.s.because_text.get(from as usize..to as usize)?)
            }
            Err(_) => None,
        };
        Some(RuleRef {
            file: self.s.files.get(self.file_of(id)? as usize)?,
            line: line as usize,
            column: self.column_of(i)? as usize,
            source: self.s.text.get(start as usize..end as usize)?,
            because,
        })
    }

    /// Whether the table is as [`RuleTable::push`] builds it (one loaded
    /// from an artifact): the texts' lengths add up to the arena and each
    /// ends on a character boundary; every byte that says its value is
    /// wide has one, and the wide lists name only such rules, in order;
    /// file runs and `because` ranges are in rule order and name what
    /// exists; the marks are the walk's.
    pub(crate) fn is_valid(&self) -> bool {
        let n = self.len();
        let Ok(n32) = u32::try_from(n) else {
            return false;
        };
        let Some((end, marks)) = self.walk() else {
            return false;
        };
        let texts_ok = end as usize == self.s.text.len()
            && marks == self.marks
            && (0..n)
                .try_fold(0u32, |start, i| {
                    let end = start.checked_add(self.len_of(i)?)?;
                    self.s.text.get(start as usize..end as usize)?;
                    Some(end)
                })
                .is_some();
        let wide_ok = |list: &[(u32, u32)], bytes: &[u8], escape: u8| {
            list.windows(2).all(|w| matches!(w, [a, b] if a.0 < b.0))
                && list
                    .iter()
                    .all(|&(r, _)| bytes.get(r as usize) == Some(&escape))
                && bytes.iter().filter(|&&b| b == escape).count() == list.len()
        };
        let wides_ok = wide_ok(&self.s.wide_lens, &self.s.lens, LEN_WIDE)
            && wide_ok(&self.s.wide_lines, &self.s.lines, LINE_WIDE)
            && wide_ok(&self.s.wide_columns, &self.s.columns, COLUMN_WIDE);
        let runs_ok = self
            .s
            .file_runs
            .first()
            .is_none_or(|&(first, _)| first == 0)
            && (n == 0 || !self.s.file_runs.is_empty())
            && self
                .s
                .file_runs
                .windows(2)
                .all(|w| matches!(w, [a, b] if a.0 < b.0))
            && self
                .s
                .file_runs
                .iter()
                .all(|&(first, f)| first < n32.max(1) && (f as usize) < self.s.files.len());
        let because_ok = self
            .s
            .because
            .windows(2)
            .all(|w| matches!(w, [a, b] if a.0 < b.0))
            && self.s.because.iter().all(|&(r, [from, to])| {
                r < n32
                    && self
                        .s
                        .because_text
                        .get(from as usize..to as usize)
                        .is_some()
            });
        texts_ok && wides_ok && runs_ok && because_ok
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]
mod tests {
    use super::*;

    fn table() -> RuleTable {
        let mut t = RuleTable::default();
        t.push("a.policy", 3, 5, "allow domain x.example", None);
        t.push("a.policy", 4, 5, "forbid rm -rf", Some("never wipe"));
        t.push("b.policy", 1, 1, "deny cidr 10.0.0.0/8", None);
        t.push("a.policy", 9, 7, "prompt git push", Some("a person"));
        t
    }

    #[test]
    fn every_rule_reads_back_as_it_was_pushed() {
        let t = table();
        let r = t.get(RuleId(1)).unwrap();
        assert_eq!(
            (r.file, r.line, r.column, r.source, r.because),
            ("a.policy", 4, 5, "forbid rm -rf", Some("never wipe"))
        );
        let r = t.get(RuleId(2)).unwrap();
        assert_eq!(
            (r.file, r.line, r.source, r.because),
            ("b.policy", 1, "deny cidr 10.0.0.0/8", None)
        );
        let r = t.get(RuleId(3)).unwrap();
        assert_eq!(
            (r.file, r.line, r.column, r.because),
            ("a.policy", 9, 7, Some("a person"))
        );
        assert!(t.get(RuleId(4)).is_none());
        assert!(t.is_valid());
    }

    /// Rules past several marks, with every value a byte cannot hold
    /// (long texts, lines going back or jumping, columns of 0 and past
    /// 255), read back as pushed, before and after a round trip.
    #[test]
    fn wide_values_and_marks_read_back() {
        let mut t = RuleTable::default();
        let mut want = Vec::new();
        let mut line = 1usize;
        for i in 0..1000usize {
            line = match i % 7 {
                0 => line + 1,
                1 => line + 300,
                2 => line.saturating_sub(40).max(1),
                3 => line + 254,
                4 => line + 255,
                _ => line + i % 3,
            };
            let column = [1, 5, 255, 256, 0, 70_000][i % 6];
            let text = "é".repeat([3, 127, 128, 200, 0][i % 5]) + &format!("r{i}");
            let file = ["a", "b"][(i / 100) % 2];
            t.push(file, line, column, &text, None);
            want.push((file.to_string(), line, column, text));
        }
        t.shrink();
        let back: RuleTable = serde_json::from_value(serde_json::to_value(&t).unwrap()).unwrap();
        for t in [&t, &back] {
            assert!(t.is_valid());
            assert_eq!(t.len(), want.len());
            for (i, (file, line, column, text)) in want.iter().enumerate() {
                let r = t.get(RuleId(i as u32)).unwrap();
                assert_eq!(
                    (r.file, r.line, r.column, r.source),
                    (file.as_str(), *line, *column, text.as_str()),
                    "rule {i}"
                );
            }
        }
    }

    #[test]
    fn the_wire_form_is_the_table_and_every_lie_is_refused() {
        let t = table();
        let json = serde_json::to_value(&t).unwrap();
        assert_eq!(
            json["text"],
            "allow domain x.exampleforbid rm -rfdeny cidr 10.0.0.0/8prompt git push"
        );
        assert_eq!(json["because_text"], "never wipea person");
        assert_eq!(
            json["file_runs"],
            serde_json::json!([[0, 0], [2, 1], [3, 0]])
        );
        assert_eq!(json["lens"], serde_json::json!([22, 13, 20, 15]));
        assert_eq!(json["lines"], serde_json::json!([3, 1, 255, 8]));
        assert_eq!(json["wide_lines"], serde_json::json!([[2, 1]]));
        assert!(json.get("marks").is_none());
        let back: RuleTable = serde_json::from_value(json.clone()).unwrap();
        assert_eq!(serde_json::to_value(&back).unwrap(), json);
        assert!(back.is_valid());
        let refused = |path: &[&str], index: Option<usize>, v: serde_json::Value| {
            let mut bad = json.clone();
            let mut at = &mut bad;
            for p in path {
                at = &mut at[*p];
            }
            if let Some(i) = index {
                at = &mut at[i];
            }
            *at = v;
            let back: RuleTable = serde_json::from_value(bad).unwrap();
            assert!(!back.is_valid(), "{path:?} {index:?}");
        };
        // Texts longer or shorter than the arena; a length byte, a line
        // byte, a column byte saying wide with no wide value; a wide value
        // for a rule whose byte holds its own; wide lists out of order.
        refused(&["lens"], Some(3), serde_json::json!(16));
        refused(&["lens"], Some(0), serde_json::json!(21));
        refused(&["lens"], Some(1), serde_json::json!(255));
        refused(&["lines"], Some(1), serde_json::json!(255));
        refused(&["columns"], Some(1), serde_json::json!(0));
        refused(&["wide_lines"], Some(0), serde_json::json!([1, 4]));
        refused(&["lens"], None, serde_json::json!([22, 13, 20]));
        refused(&["columns"], None, serde_json::json!([5, 5, 1]));
        let mut two = json.clone();
        two["lines"] = serde_json::json!([3, 255, 255, 8]);
        two["wide_lines"] = serde_json::json!([[2, 1], [1, 4]]);
        assert!(!serde_json::from_value::<RuleTable>(two).unwrap().is_valid());
        // A text split inside a character.
        let mut t2 = RuleTable::default();
        t2.push("a.policy", 1, 1, "allow domain é.example", None);
        t2.push("a.policy", 2, 1, "deny cidr 10.0.0.0/8", None);
        let mut j2 = serde_json::to_value(&t2).unwrap();
        j2["lens"] = serde_json::json!([14, 21]);
        assert!(!serde_json::from_value::<RuleTable>(j2).unwrap().is_valid());
        // File runs: an unknown file, out of order, not from rule 0.
        refused(&["file_runs"], Some(1), serde_json::json!([2, 7]));
        refused(&["file_runs"], Some(1), serde_json::json!([3, 1]));
        refused(&["file_runs"], Some(0), serde_json::json!([1, 0]));
        refused(&["file_runs"], None, serde_json::json!([]));
        // Because: past its arena, a rule that does not exist, out of order.
        refused(&["because"], Some(0), serde_json::json!([1, [0, 999]]));
        refused(&["because"], Some(1), serde_json::json!([9, [10, 18]]));
        refused(&["because"], Some(1), serde_json::json!([0, [10, 18]]));
    }
}
