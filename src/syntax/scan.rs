//! One lexical scanner for what the grammar keeps whole or skips: string
//! literals, raw strings and comments, and the braces outside them. The
//! comment collector (for the formatter) and the nesting limit (checked
//! before pest sees the text) both read a file through it.
//!
//! Strings are matched exactly as `grammar/policy.pest` matches them: an
//! ordinary string closes on its own line and holds only the grammar's
//! escapes; a quote that does not open such a string is a plain character,
//! as it is to the grammar's recovery rules. Whether `r"` opens a raw string
//! depends on where the grammar is when it meets it, which a scanner cannot
//! know for certain; [`Raw`] says how to read it.

use crate::source::FileId;

/// How a scan reads `r"`.
#[derive(Clone, Copy, Debug, Eq, PartialEq)]
pub(crate) enum Raw {
    /// Never a raw string: the view of the grammar's recovery rules, which
    /// know only ordinary strings.
    Never,
    /// A raw string where a token may start (after a blank, a separator, a
    /// brace, `~` or `=`): the view of the statement rules.
    AtTokenStart,
    /// A raw string wherever `r"` occurs.
    Anywhere,
}

/// What the scanner meets, with byte offsets.
#[derive(Clone, Copy, Debug, Eq, PartialEq)]
pub(crate) enum Lexeme {
    /// `#` up to (not including) the end of the line.
    Comment { start: usize, end: usize },
    /// An ordinary or raw string, both quotes included.
    Str { start: usize, end: usize },
    /// `{` outside strings and comments.
    Open(usize),
    /// `}` outside strings and comments.
    Close(usize),
}

fn is_newline(b: u8) -> bool {
    b == b'\n' || b == b'\r'
}

/// The end (one past the closing quote) of the ordinary string opening at
/// `start`, if one does.
fn ordinary_string(bytes: &[u8], start: usize) -> Option<usize> {
    let mut i = start + 1;
    loop {
        match *bytes.get(i)? {
            b'"' => return Some(i + 1),
            b'\\' => {
                i += 1;
                match *bytes.get(i)? {
                    b'"' | b'\\' | b'n' | b't' => i += 1,
                    b'u' => {
                        if *bytes.get(i + 1)? != b'{' {
                            return None;
                        }
                        let digits = bytes
                            .get(i + 2..)?
                            .iter()
                            .take_while(|b| b.is_ascii_hexdigit())
                            .count();
                        if !(1..=6).contains(&digits) || *bytes.get(i + 2 + digits)? != b'}' {
                            return None;
                        }
                        i += 3 + digits;
                    }
                    _ => return None,
                }
            }
            b if is_newline(b) => return None,
            _ => i += 1,
        }
    }
}

/// The end of the raw string whose `r` is at `start`, if one opens there.
fn raw_string(bytes: &[u8], start: usize) -> Option<usize> {
    let mut i = start + 2;
    loop {
        match *bytes.get(i)? {
            b'"' => return Some(i + 1),
            b if is_newline(b) => return None,
            _ => i += 1,
        }
    }
}

fn token_start(bytes: &[u8], at: usize) -> bool {
    at == 0
        || bytes
            .get(at - 1)
            .is_some_and(|b| b" \t\r\n;{}#\",[]~=".contains(b))
}

/// The bytes a lexeme can start with: 1 for `"`, `#`, `{` and `}`, 2 for
/// the `r` of a raw string.
// Indexing in a constant: an index out of range fails the build, never a run.
#[allow(clippy::indexing_slicing)]
static STARTS: [u8; 256] = {
    let mut t = [0u8; 256];
    t[b'"' as usize] = 1;
    t[b'#' as usize] = 1;
    t[b'{' as usize] = 1;
    t[b'}' as usize] = 1;
    t[b'r' as usize] = 2;
    t
};

/// Scans `text`, calling `f` for every lexeme in order. (`dyn`: one copy of
/// the scanner in the browser module, whoever calls it.)
pub(crate) fn scan(text: &str, raw: Raw, f: &mut dyn FnMut(Lexeme)) {
    let bytes = text.as_bytes();
    let starts = if raw == Raw::Never { 1 } else { 3 };
    let mut i = 0;
    while let Some(rest) = bytes.get(i..) {
        // Past the bytes no lexeme starts with, most of a policy, in one
        // tight loop (a whole file is scanned before it is parsed).
        match rest
            .iter()
            .position(|&b| STARTS.get(usize::from(b)).is_some_and(|s| s & starts != 0))
        {
            Some(n) => i += n,
            None => break,
        }
        let Some(&b) = bytes.get(i) else { break };
        let raw_here = b == b'r'
            && bytes.get(i + 1) == Some(&b'"')
            && match raw {
                Raw::Never => false,
                Raw::AtTokenStart => token_start(bytes, i),
                Raw::Anywhere => true,
            };
        if raw_here {
            if let Some(end) = raw_string(bytes, i) {
                f(Lexeme::Str { start: i, end });
                i = end;
                continue;
            }
        }
        match b {
            b'"' => {
                if let Some(end) = ordinary_string(bytes, i) {
                    f(Lexeme::Str { start: i, end });
                    i = end;
                    continue;
                }
            }
            b'#' => {
                let end = bytes
                    .get(i..)
                    .and_then(|rest| rest.iter().position(|&c| is_newline(c)))
                    .map_or(bytes.len(), |n| i + n);
                f(Lexeme::Comment { start: i, end });
                i = end;
                continue;
            }
            b'{' => f(Lexeme::Open(i)),
            b'}' => f(Lexeme::Close(i)),
            _ => {}
        }
        i += 1;
    }
}

/// The comments of a file, in order (the grammar skips them; the formatter
/// puts them back).
pub(crate) fn comments(file: FileId, text: &str) -> Vec<super::ast::Comment> {
    let mut out = Vec::new();
    scan(text, Raw::AtTokenStart, &mut |l| {
        if let Lexeme::Comment { start, end } = l {
            let body = text.get(start + 1..end).unwrap_or("");
            out.push(super::ast::Comment {
                text: body.to_string(),
                span: crate::source::Span::new(file, start, end),
            });
        }
    });
    out
}

/// Where brace nesting first exceeds `limit`, read in every view of `r"`
/// and the earliest offset kept: the grammar's recovery rule for braces is
/// recursive, so the check must never count fewer braces than the grammar
/// will open, whichever view it takes of a line.
pub(crate) fn too_deep(text: &str, limit: usize) -> Option<usize> {
    // Without an `r"` the three views are one.
    let views: &[Raw] = if text.contains("r\"") {
        &[Raw::Never, Raw::AtTokenStart, Raw::Anywhere]
    } else {
        &[Raw::Never]
    };
    views
        .iter()
        .copied()
        .filter_map(|raw| {
            let mut depth = 0usize;
            let mut at = None;
            scan(text, raw, &mut |l| match l {
                Lexeme::Open(i) => {
                    depth += 1;
                    if depth > limit && at.is_none() {
                        at = Some(i);
                    }
                }
                Lexeme::Close(_) => depth = depth.saturating_sub(1),
                _ => {}
            });
            at
        })
        .min()
}

/// Whether the `"` that starts `rest` opens a string its line never
/// closes (no unescaped `"` follows on the line). A string that does close
/// but holds a bad escape is another error.
pub(crate) fn unterminated_string(rest: &str) -> bool {
    let mut chars = rest.chars().skip(1);
    while let Some(c) = chars.next() {
        match c {
            '"' => return false,
            '\\' => {
                chars.next();
            }
            '\n' | '\r' => return true,
            _ => {}
        }
    }
    true
}

/// When the braces of `text` do not balance (a `{` still open at the end),
/// the `{` most likely left open, and the `}` that seems to have closed it
/// by mistake. Braces are matched as the grammar reads them; among the
/// matched pairs, the first whose `}` starts a line indented differently
/// from the line of its `{` is taken to be the culprit (its own `}` was
/// forgotten, so it took an outer block's); with none, the innermost
/// brace still open.
pub(crate) fn unclosed_brace(text: &str) -> Option<(usize, Option<usize>)> {
    let mut stack = Vec::new();
    let mut pairs = Vec::new();
    scan(text, Raw::AtTokenStart, &mut |l| match l {
        Lexeme::Open(i) => stack.push(i),
        Lexeme::Close(j) => {
            if let Some(i) = stack.pop() {
                pairs.push((i, j));
            }
        }
        _ => {}
    });
    let innermost = *stack.last()?;
    let line_start = |at: usize| {
        text.get(..at)
            .and_then(|t| t.rfind('\n'))
            .map_or(0, |n| n + 1)
    };
    let indent = |at: usize| {
        let start = line_start(at);
        text.get(start..)
            .map_or(0, |l| l.len() - l.trim_start_matches([' ', '\t']).len())
    };
    pairs.sort_unstable();
    let culprit = pairs.into_iter().find(|&(open, close)| {
        let close_starts_line = text
            .get(line_start(close)..close)
            .is_some_and(|t| t.trim().is_empty());
        line_start(open) != line_start(close) && close_starts_line && indent(open) != indent(close)
    });
    Some(match culprit {
        Some((open, close)) => (open, Some(close)),
        None => (innermost, None),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lexemes(text: &str, raw: Raw) -> Vec<Lexeme> {
        let mut v = Vec::new();
        scan(text, raw, &mut |l| v.push(l));
        v
    }

    #[test]
    fn unterminated_strings_and_unclosed_braces() {
        assert!(unterminated_string("\"abc\n\"x\""));
        assert!(unterminated_string("\"abc\\\""));
        assert!(!unterminated_string("\"a\\\"b\""));
        assert_eq!(unclosed_brace("a { b { } }"), None);
        // The innermost open brace, when indentation says nothing.
        assert_eq!(unclosed_brace("a {\n  b {\n  }\n"), Some((2, None)));
        // `network {` lost its `}`: the policy's `}` closed it.
        let text = "policy a {\n  network {\n    allow domain x\n}\npolicy b {\n}\n";
        assert_eq!(unclosed_brace(text), Some((21, Some(42))));
    }

    #[test]
    fn strings_are_the_grammars() {
        use Lexeme::*;
        assert_eq!(
            lexemes(r#"a "x{\"}" { }"#, Raw::Never),
            [Str { start: 2, end: 9 }, Open(10), Close(12)]
        );
        // An unterminated string, or one with an escape the grammar does not
        // know, is no string: its braces count.
        assert_eq!(lexemes("\"{\n}", Raw::Never), [Open(1), Close(3)]);
        assert_eq!(lexemes(r#""\q{""#, Raw::Never), [Open(3)]);
        assert_eq!(
            lexemes(r#""\u{41}""#, Raw::Never),
            [Str { start: 0, end: 8 }]
        );
        assert_eq!(
            lexemes(r#""\u{}" {"#, Raw::Never),
            [Open(3), Close(4), Open(7)]
        );
        // A raw string takes no escapes.
        assert_eq!(
            lexemes(r#"~ r"\" {"#, Raw::AtTokenStart),
            [Str { start: 2, end: 6 }, Open(7)]
        );
        assert_eq!(
            lexemes(r#"xr"\" {""#, Raw::AtTokenStart),
            [Str { start: 2, end: 8 }]
        );
        assert_eq!(
            lexemes(r#"xr"\" {""#, Raw::Anywhere),
            [Str { start: 1, end: 5 }, Open(6)]
        );
    }

    #[test]
    fn comments_outside_strings_only() {
        let c = comments(FileId(0), "a # one\n\"x # not\" r\"y\\\" # two\n");
        let texts: Vec<&str> = c.iter().map(|c| c.text.as_str()).collect();
        assert_eq!(texts, [" one", " two"]);
        let c = comments(FileId(0), "a # crlf\r\nb");
        assert_eq!(c.first().map(|c| c.text.as_str()), Some(" crlf"));
    }

    #[test]
    fn nesting() {
        assert_eq!(too_deep("policy p { network { } }", 2), None);
        assert_eq!(too_deep("policy p { network { { } } }", 2), Some(21));
        assert_eq!(too_deep("policy p { x \"{{{{\" # {{{{\n }", 1), None);
        assert_eq!(too_deep(&"{".repeat(100_000), 64), Some(64));
        // Either view of `r"` counts: as a raw string, `;{{` is outside it.
        assert_eq!(too_deep(r#"a ~ r"a\";{{""#, 1), Some(11));
        // As ordinary strings (the recovery rules' view), `{{` is outside.
        assert_eq!(too_deep(r#"a r"a\" "{{""#, 1), Some(10));
        // An ordinary string holding `r"` hides nothing.
        assert_eq!(too_deep("x \"ar\" {{", 1), Some(8));
        // A string never runs past its line.
        assert_eq!(too_deep("x \"\\\n{{", 1), Some(6));
    }
}
