//! Finds the comments of a file (the grammar skips them), so that the
//! formatter can put them back.

use super::ast::Comment;
use crate::source::{FileId, Span};

/// Every `#` comment outside string literals, in order.
pub(crate) fn scan(file: FileId, text: &str) -> Vec<Comment> {
    let bytes = text.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while let Some(&b) = bytes.get(i) {
        match b {
            b'"' => {
                let raw = i > 0
                    && bytes.get(i - 1) == Some(&b'r')
                    && !bytes
                        .get(i.wrapping_sub(2))
                        .is_some_and(|c| c.is_ascii_alphanumeric() || *c == b'_');
                i += 1;
                while let Some(&c) = bytes.get(i) {
                    match c {
                        b'\\' if !raw => i += 2,
                        b'"' | b'\n' => break,
                        _ => i += 1,
                    }
                }
                i += 1;
            }
            b'#' => {
                let end = text
                    .get(i..)
                    .and_then(|t| t.find('\n'))
                    .map_or(text.len(), |n| i + n);
                let body = text.get(i + 1..end).unwrap_or("").trim_end_matches('\r');
                out.push(Comment {
                    text: body.to_string(),
                    span: Span::new(file, i, end),
                });
                i = end;
            }
            _ => i += 1,
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn comments_outside_strings_only() {
        let c = scan(FileId(0), "a # one\n\"x # not\" r\"y\\\" # two\n");
        let texts: Vec<&str> = c.iter().map(|c| c.text.as_str()).collect();
        assert_eq!(texts, [" one", " two"]);
    }
}
