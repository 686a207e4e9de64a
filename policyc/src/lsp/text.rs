//! Positions and names: LSP speaks in lines and UTF-16 code units and
//! names documents by URI; gatehouse speaks in byte offsets and file names.

use serde_json::{Value, json};

static NULL: Value = Value::Null;

/// The value at a JSON pointer (`/textDocument/uri`), or null: a message
/// missing a field is read as an empty one, never a panic.
pub fn at<'a>(v: &'a Value, pointer: &str) -> &'a Value {
    v.pointer(pointer).unwrap_or(&NULL)
}

/// Line starts of a text, to turn byte offsets into LSP positions and back.
pub struct Lines<'a> {
    text: &'a str,
    starts: Vec<usize>,
}

impl<'a> Lines<'a> {
    pub fn new(text: &'a str) -> Self {
        let mut starts = vec![0];
        starts.extend(text.match_indices('\n').map(|(i, _)| i + 1));
        Lines { text, starts }
    }

    /// The LSP position of a byte offset (clamped to the text).
    pub fn position(&self, offset: usize) -> Value {
        let offset = offset.min(self.text.len());
        let line = self
            .starts
            .partition_point(|&s| s <= offset)
            .saturating_sub(1);
        let start = self.starts.get(line).copied().unwrap_or(0);
        let character: usize = self
            .text
            .get(start..offset)
            .map_or(0, |s| s.chars().map(char::len_utf16).sum());
        json!({ "line": line, "character": character })
    }

    /// The LSP range of a byte span.
    pub fn range(&self, start: usize, end: usize) -> Value {
        json!({ "start": self.position(start), "end": self.position(end.max(start)) })
    }

    /// The byte offset of an LSP position (clamped to its line).
    pub fn offset(&self, pos: &Value) -> usize {
        let line = at(pos, "/line").as_u64().unwrap_or(0) as usize;
        let want = at(pos, "/character").as_u64().unwrap_or(0) as usize;
        let Some(&start) = self.starts.get(line) else {
            return self.text.len();
        };
        let end = self.starts.get(line + 1).map_or(self.text.len(), |&e| e);
        let mut units = 0;
        for (i, c) in self.text.get(start..end).unwrap_or("").char_indices() {
            if units >= want || c == '\n' {
                return start + i;
            }
            units += c.len_utf16();
        }
        end
    }

    /// The range of the whole text.
    pub fn all(&self) -> Value {
        self.range(0, self.text.len())
    }
}

/// The word (letters, digits, `_`, `-`, `.`) around a byte offset, with its
/// span.
pub fn word_at(text: &str, offset: usize) -> Option<(usize, usize, &str)> {
    let is_word = |c: char| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.');
    let offset = offset.min(text.len());
    let before = text.get(..offset)?;
    let start = before
        .char_indices()
        .rev()
        .take_while(|(_, c)| is_word(*c))
        .last()
        .map_or(offset, |(i, _)| i);
    let after = text.get(offset..)?;
    let end = offset + after.find(|c: char| !is_word(c)).unwrap_or(after.len());
    let word = text.get(start..end)?.trim_end_matches('.');
    (!word.is_empty()).then_some((start, start + word.len(), word))
}

/// The path a `file:` URI names, percent-decoded; `None` for other schemes.
pub fn uri_to_path(uri: &str) -> Option<String> {
    let rest = uri.strip_prefix("file://")?;
    // `file://localhost/x` and `file:///x` both name `/x`.
    let rest = rest.strip_prefix("localhost").unwrap_or(rest);
    let bytes = rest.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while let Some(&b) = bytes.get(i) {
        if b == b'%' {
            let hex = rest
                .get(i + 1..i + 3)
                .and_then(|h| u8::from_str_radix(h, 16).ok());
            if let Some(v) = hex {
                out.push(v);
                i += 3;
                continue;
            }
        }
        out.push(b);
        i += 1;
    }
    String::from_utf8(out).ok()
}

/// The `file:` URI of a path (absolute paths; others are returned as they
/// are, since they came from a URI that was not a file).
pub fn path_to_uri(path: &str) -> String {
    if !path.starts_with('/') {
        return path.to_string();
    }
    let mut out = String::from("file://");
    for b in path.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~/".contains(&b) {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn positions_are_utf16() {
        let text = "ab\n\u{1F600}x = \"é\"\n";
        let l = Lines::new(text);
        let off = text.find('x').unwrap_or(0);
        assert_eq!(l.position(off), json!({"line": 1, "character": 2}));
        assert_eq!(l.offset(&json!({"line": 1, "character": 2})), off);
        assert_eq!(l.offset(&json!({"line": 9, "character": 0})), text.len());
    }

    #[test]
    fn uris_round_trip() {
        let p = "/tmp/my policies/a.policy";
        assert_eq!(uri_to_path(&path_to_uri(p)).as_deref(), Some(p));
        assert_eq!(uri_to_path("untitled:1"), None);
    }

    #[test]
    fn words() {
        let t = "  deny shell.exec # x";
        assert_eq!(word_at(t, 9).map(|w| w.2), Some("shell.exec"));
        assert_eq!(word_at(t, 2).map(|w| w.2), Some("deny"));
    }
}
