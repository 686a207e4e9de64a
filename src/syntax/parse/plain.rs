//! The statements of a `network` block read by hand, without the grammar's
//! token queue: a policy of 200 000 rules is almost all such statements,
//! and pest spends most of a build's time on them (issue 62).
//!
//! The grammar hands this reader a block's whole body only when the body
//! has no string, no brace and ends at its `}` (`net_plain` in
//! grammar/policy.pest): there the body's extent is the grammar's for
//! certain, and every statement is keywords and bare words up to a line
//! break, a `;` or a comment.
//! The reader accepts a body only when every statement in it is one the
//! grammar would accept and build without a diagnostic, and builds exactly
//! what the grammar's builder builds, spans included. Anything else — an
//! unknown word, a bad address, a port out of range, a character it does
//! not expect — and the whole body goes through the grammar instead
//! (`net_stmts`, the same rule the block uses otherwise), so every
//! diagnostic comes from the one place it always came from. The tests
//! `plain_reader_agrees_with_the_grammar_on_*` (tests/parse_plain.rs) and
//! the fuzz target `plain` hold the two to each other.

use super::*;

/// One statement's words and where each starts, in the body's offsets.
type Words<'t> = Vec<(usize, &'t str)>;

impl Builder {
    /// The statements of a body the grammar matched as `net_plain`.
    pub(super) fn net_plain(&mut self, p: P<'_>) -> Vec<NetStmt> {
        let start = p.as_span().start();
        let mark = self.diags.len();
        // Not in the browser build: its policies are small, and its size
        // budget has no room for a second reader (wasm/build.sh).
        if self.plain
            && cfg!(not(target_arch = "wasm32"))
            && let Some(stmts) = self.read_plain(p.as_str(), self.base + start)
            && self.diags.len() == mark
        {
            return stmts;
        }
        self.diags.truncate(mark);
        // The same body through the grammar, from where it starts to the
        // end of the input (the rule stops at the block's `}` as the block
        // does), with spans shifted back into the file.
        let input = p.as_span().get_input();
        let Some(rest) = input.get(start..) else {
            self.internal(&p);
            return Vec::new();
        };
        match PolicyParser::parse(Rule::net_stmts, rest) {
            Ok(mut pairs) => {
                let Some(body) = pairs.next() else {
                    return Vec::new();
                };
                let shifted = self.base + start;
                let saved = std::mem::replace(&mut self.base, shifted);
                let out = self.stmts(body, &NETWORK_CTX, Rule::net_stmt, Self::net_stmt);
                self.base = saved;
                out
            }
            Err(_) => {
                self.internal(&p);
                Vec::new()
            }
        }
    }

    /// Every statement of `body` (at file offset `at`), or `None` at the
    /// first the reader does not accept.
    fn read_plain(&mut self, body: &str, at: usize) -> Option<Vec<NetStmt>> {
        let bytes = body.as_bytes();
        // A statement a line, near enough: one allocation, no copies while
        // the list grows (a large policy's statements are most of its AST).
        let lines = bytes.iter().filter(|&&b| b == b'\n').count();
        let mut out = Vec::with_capacity(lines + 1);
        let mut words: Words<'_> = Vec::with_capacity(8);
        let mut i = 0;
        while i < bytes.len() {
            // One statement: words up to a separator or a comment.
            words.clear();
            let mut word_start = None;
            let end = loop {
                let b = bytes.get(i).copied();
                match b {
                    Some(b' ' | b'\t') | None | Some(b'\n' | b'\r' | b';' | b'#') => {
                        if let Some(s) = word_start.take() {
                            words.push((s, body.get(s..i)?));
                        }
                        if !matches!(b, Some(b' ' | b'\t')) {
                            break i;
                        }
                    }
                    // Printable ASCII but for what a bare word cannot hold
                    // (the grammar's `net_plain` leaves out quotes and
                    // braces already).
                    Some(b'!'..=b'~') if !matches!(b, Some(b',' | b'[' | b']')) => {
                        word_start.get_or_insert(i);
                    }
                    // A port list's commas: kept in the word, split below.
                    Some(b',') => {
                        word_start.get_or_insert(i);
                    }
                    _ => return None,
                }
                i += 1;
            };
            if !words.is_empty() {
                out.push(self.plain_stmt(&words, at)?);
            }
            i = end;
            if bytes.get(i) == Some(&b'#') {
                while i < bytes.len() && !matches!(bytes.get(i), Some(b'\n' | b'\r')) {
                    i += 1;
                }
            }
            i += 1;
        }
        Some(out)
    }

    fn plain_stmt(&mut self, words: &[(usize, &str)], at: usize) -> Option<NetStmt> {
        let file = self.file;
        let span = |(s, w): (usize, &str)| Span::new(file, at + s, at + s + w.len());
        let (&first, rest) = words.split_first()?;
        match (first.1, rest) {
            ("default" | "local", &[value]) => {
                let effect = Effect::parse(ident(value.1)?)?;
                let v = Spanned::new(effect, span(first).to(span(value)));
                Some(if first.1 == "default" {
                    NetStmt::Default(v)
                } else {
                    NetStmt::Local(v)
                })
            }
            ("dns", &[value]) => {
                let switch = Switch::parse(ident(value.1)?)?;
                Some(NetStmt::Dns(Spanned::new(
                    switch,
                    span(first).to(span(value)),
                )))
            }
            ("allow" | "deny", &[(_, kind), target, ref tail @ ..]) => {
                let effect = if first.1 == "allow" {
                    Effect::Allow
                } else {
                    Effect::Deny
                };
                if target.1.contains(',') {
                    return None;
                }
                let target_span = span(target);
                let (ports, last) = match tail {
                    [] => (None, target_span),
                    [(_, "port"), list @ ..] if kind != "socket" => {
                        let (ports, last) = plain_ports(list, at, self.file)?;
                        (Some(ports), last)
                    }
                    _ => return None,
                };
                let target = match kind {
                    "domain" => NetTarget::Domain(target.1.to_string()),
                    "ip" => NetTarget::Ip(self.ip(target.1, target_span)?),
                    "cidr" => NetTarget::Cidr(self.cidr(target.1, target_span)?),
                    "socket" if target.1 == "*" => NetTarget::Socket(SocketTarget::Any),
                    "socket" => NetTarget::Socket(SocketTarget::Path(target.1.to_string())),
                    _ => return None,
                };
                Some(NetStmt::Rule(NetRule {
                    effect,
                    target,
                    ports,
                    span: span(first).to(last),
                    target_span,
                }))
            }
            _ => None,
        }
    }
}

/// The word when the grammar reads it as one `ident`.
fn ident(word: &str) -> Option<&str> {
    let mut chars = word.bytes();
    let first_ok = chars.next().is_some_and(|b| b.is_ascii_alphabetic());
    (first_ok && chars.all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')).then_some(word)
}

/// A port list written after `port`: items separated by commas, blanks
/// allowed around a comma and nowhere else, each item valid. The list and
/// the span of its last item.
fn plain_ports(words: &[(usize, &str)], at: usize, file: FileId) -> Option<(Vec<PortRange>, Span)> {
    let mut out = Vec::new();
    let mut last = None;
    // Whether the next piece must be a port (at the start, after a comma).
    let mut want_port = true;
    for &(s, word) in words {
        let mut offset = 0;
        for (k, piece) in word.split(',').enumerate() {
            if k > 0 {
                if want_port {
                    return None;
                }
                want_port = true;
            }
            if !piece.is_empty() {
                if !want_port || !port_item(piece) {
                    return None;
                }
                out.push(parse_port_range(piece).ok()?);
                let from = at + s + offset;
                last = Some(Span::new(file, from, from + piece.len()));
                want_port = false;
            }
            offset += piece.len() + 1;
        }
    }
    if want_port {
        return None;
    }
    Some((out, last?))
}

/// `DIGITS` or `DIGITS-DIGITS`, as the grammar's `port_item`.
fn port_item(piece: &str) -> bool {
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    match piece.split_once('-') {
        None => digits(piece),
        Some((a, b)) => digits(a) && digits(b),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn read(body: &str) -> Option<usize> {
        let mut b = Builder {
            file: FileId(0),
            diags: Vec::new(),
            base: 0,
            plain: true,
        };
        let out = b.read_plain(body, 0);
        assert!(b.diags.is_empty() || out.is_none());
        out.map(|v| v.len())
    }

    /// The reader takes the plain statements itself (the agreement tests
    /// in tests/parse_plain.rs would pass if it handed every body to the
    /// grammar), and leaves to the grammar what it must.
    #[test]
    fn the_reader_reads_plain_bodies_and_hands_over_the_rest() {
        let body = "\n    default deny\n    dns on; local allow\n    allow domain *.a.test port 443, 8000-8999 # c; x\n    deny cidr 10.0.0.0/8\n    allow ip fd00::1\n    allow socket *\r\n  ";
        assert_eq!(read(body), Some(7));
        assert_eq!(read(""), Some(0));
        for bad in [
            "allow domain a.com port 443 80",
            "default allw",
            "allow cidr 10.0.0.1/8",
            "allow domain a[1].com",
            "allow domain bücher.example",
            "alow domain a.com",
            "allow socket * port 1",
        ] {
            assert_eq!(read(bad), None, "{bad}");
        }
    }
}
