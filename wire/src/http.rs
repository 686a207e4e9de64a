//! Message heads, read strictly: httparse tokenises them, and on top of it
//! every byte the proxy and a lenient server might read differently is
//! refused (RFC 9112 §2.2, §5, §6.3).
//!
//! A parsed head keeps its text in one string and its parts as ranges into
//! it: reading a head costs two allocations, whatever its number of fields.

use std::ops::Range;

/// The largest head read, request or response.
pub const MAX_HEAD: usize = 64 * 1024;
/// The most header fields in one head.
pub const MAX_HEADERS: usize = 128;

/// Header fields: names and values (values without surrounding blanks),
/// as ranges into the head's text.
#[derive(Clone, Debug, Default)]
pub struct Fields {
    text: String,
    spans: Vec<(Range<u32>, Range<u32>)>,
}

impl Fields {
    /// The length of the head's text (a capacity hint for rewriting it).
    pub fn text_len(&self) -> usize {
        self.text.len()
    }

    /// Every field, in order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &str)> {
        self.spans
            .iter()
            .map(|(k, v)| (self.slice(k), self.slice(v)))
    }

    fn slice(&self, r: &Range<u32>) -> &str {
        self.text
            .get(r.start as usize..r.end as usize)
            .unwrap_or_default()
    }

    /// The first field named `name` (any case).
    pub fn get(&self, name: &str) -> Option<&str> {
        self.iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v)
    }

    /// Every field named `name`.
    pub fn all<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a str> + 'a {
        self.iter()
            .filter(move |(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v)
    }

    /// Whether a `Connection` field lists `token`.
    pub fn connection_has(&self, token: &str) -> bool {
        self.all("connection")
            .flat_map(|v| v.split(','))
            .any(|t| t.trim().eq_ignore_ascii_case(token))
    }
}

/// A request head.
#[derive(Clone, Debug)]
pub struct Head {
    method: Range<u32>,
    target: Range<u32>,
    /// `HTTP/1.0` or `HTTP/1.1`.
    pub version: &'static str,
    /// The header fields, as ranges into the head.
    pub headers: Fields,
}

/// A response head.
#[derive(Clone, Debug)]
pub struct Response {
    /// The status code.
    pub code: u16,
    reason: Range<u32>,
    /// Minor version: 0 or 1.
    pub minor: u8,
    /// The header fields, as ranges into the head.
    pub headers: Fields,
}

/// How the body of a message is delimited.
#[derive(Clone, Copy, Debug, Eq, PartialEq)]
pub enum Framing {
    /// No body.
    None,
    /// Exactly this many bytes.
    Length(u64),
    /// `Transfer-Encoding: chunked`.
    Chunked,
    /// Until the sender closes (responses only).
    Close,
}

impl Head {
    /// The request method.
    pub fn method(&self) -> &str {
        self.headers.slice(&self.method)
    }

    /// The request target, as the client sent it.
    pub fn target(&self) -> &str {
        self.headers.slice(&self.target)
    }

    /// The first field called `name` (ASCII case-insensitive).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name)
    }

    /// The request body's framing (already checked by [`parse_request`]:
    /// at most one of a single valid length and `chunked`).
    pub fn framing(&self) -> Framing {
        if self.header("Transfer-Encoding").is_some() {
            Framing::Chunked
        } else {
            match self.header("Content-Length").and_then(|v| v.parse().ok()) {
                Some(0) | None => Framing::None,
                Some(n) => Framing::Length(n),
            }
        }
    }

    /// Whether the client wants the connection kept after this request:
    /// HTTP/1.1 unless `Connection: close`; HTTP/1.0 never (its keep-alive
    /// extension is not offered).
    pub fn keep_alive(&self) -> bool {
        self.version == "HTTP/1.1" && !self.headers.connection_has("close")
    }
}

impl Response {
    /// The first field called `name` (ASCII case-insensitive).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name)
    }

    /// The reason phrase.
    pub fn reason(&self) -> &str {
        self.headers.slice(&self.reason)
    }

    /// The body's framing for a response to `method` (RFC 9112 §6.3).
    pub fn framing(&self, method: &str) -> Framing {
        if method.eq_ignore_ascii_case("HEAD")
            || (100..200).contains(&self.code)
            || self.code == 204
            || self.code == 304
        {
            return Framing::None;
        }
        if let Some(te) = self.header("Transfer-Encoding") {
            let last = te.rsplit(',').next().unwrap_or("").trim();
            return if last.eq_ignore_ascii_case("chunked") {
                Framing::Chunked
            } else {
                Framing::Close
            };
        }
        match self.header("Content-Length").and_then(|v| v.parse().ok()) {
            Some(n) => Framing::Length(n),
            None => Framing::Close,
        }
    }

    /// Whether the server keeps the connection after this response.
    pub fn keep_alive(&self) -> bool {
        self.minor == 1 && !self.headers.connection_has("close")
    }
}

/// A header name's characters (RFC 9110 `tchar`).
pub fn is_tchar(c: u8) -> bool {
    c.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&c)
}

/// The byte rules httparse leaves to the caller: lines end in CRLF only (no
/// bare CR or LF), no NUL or other control character (HTAB only inside
/// field values), no whitespace before a colon and no obs-fold (a line that
/// starts with a blank). `head` is everything before the blank line.
fn strict_bytes(head: &[u8]) -> bool {
    let mut lines = head.split(|&c| c == b'\n').peekable();
    let mut first = true;
    while let Some(line) = lines.next() {
        // Every line but the last ends in CRLF (the caller cut off the
        // final CRLF CRLF, so the last has no terminator).
        let content = if lines.peek().is_some() {
            match line.strip_suffix(b"\r") {
                Some(c) => c,
                None => return false, // bare LF
            }
        } else {
            line
        };
        if first {
            first = false;
            if content.iter().any(u8::is_ascii_control) {
                return false;
            }
            continue;
        }
        if content.iter().any(|&c| c.is_ascii_control() && c != b'\t') {
            return false; // bare CR, NUL, ESC, ...
        }
        let name_len = content.iter().take_while(|&&c| is_tchar(c)).count();
        if name_len == 0 || content.get(name_len) != Some(&b':') {
            return false; // obs-fold, whitespace before the colon, no colon
        }
    }
    !first
}

/// The head's text, ending in its blank line, or `None` when the bytes
/// break the byte rules or are not UTF-8.
fn checked_text(mut raw: Vec<u8>) -> Option<String> {
    if !raw.ends_with(b"\r\n\r\n") {
        raw.extend_from_slice(b"\r\n\r\n");
    }
    let body = raw.get(..raw.len() - 4)?;
    if !strict_bytes(body) {
        return None;
    }
    String::from_utf8(raw).ok()
}

/// A request head from `raw` (a head up to [`head_end`], ending in
/// its blank line; one without is given one), or `None` when it breaks a
/// rule.
pub fn parse_request(raw: Vec<u8>) -> Option<Head> {
    let text = checked_text(raw)?;
    let mut fields = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut req = httparse::Request::new(&mut fields);
    match req.parse(text.as_bytes()) {
        Ok(httparse::Status::Complete(n)) if n == text.len() => {}
        _ => return None,
    }
    let (method, target, minor) = (req.method?, req.path?, req.version?);
    // The request line is exactly three tokens with single spaces.
    let line = text.split('\r').next()?;
    let expected = method.len() + target.len() + 10;
    if line.len() != expected
        || !line.starts_with(method)
        || line.get(method.len()..method.len() + 1) != Some(" ")
        || line.get(method.len() + 1..method.len() + 1 + target.len()) != Some(target)
        || !line.ends_with(if minor == 1 { " HTTP/1.1" } else { " HTTP/1.0" })
        || target.is_empty()
        || minor > 1
    {
        return None;
    }
    let base = text.as_ptr() as usize;
    let (m, t) = (
        range(base, method.as_bytes()),
        range(base, target.as_bytes()),
    );
    let spans = spans(base, req.headers);
    let headers = Fields { text, spans };
    semantic(&headers, true)?;
    Some(Head {
        method: m,
        target: t,
        version: if minor == 1 { "HTTP/1.1" } else { "HTTP/1.0" },
        headers,
    })
}

/// Where `part` (a slice httparse returned of the text starting at `base`)
/// lies in that text. Ranges are taken before the text moves into its
/// [`Fields`] (moving a `String` does not move its bytes).
fn range(base: usize, part: &[u8]) -> Range<u32> {
    let start = (part.as_ptr() as usize).saturating_sub(base);
    u32::try_from(start).unwrap_or(0)..u32::try_from(start + part.len()).unwrap_or(0)
}

/// The name and value ranges of every field (values without surrounding
/// blanks).
fn spans(base: usize, fields: &[httparse::Header<'_>]) -> Vec<(Range<u32>, Range<u32>)> {
    fields
        .iter()
        .map(|h| {
            (
                range(base, h.name.as_bytes()),
                range(base, trim_blanks(h.value)),
            )
        })
        .collect()
}

fn trim_blanks(v: &[u8]) -> &[u8] {
    let start = v
        .iter()
        .position(|&c| c != b' ' && c != b'\t')
        .unwrap_or(v.len());
    let end = v
        .iter()
        .rposition(|&c| c != b' ' && c != b'\t')
        .map_or(start, |e| e + 1);
    v.get(start..end).unwrap_or_default()
}

/// A response head from `raw` (as for [`parse_request`]).
pub fn parse_response(raw: Vec<u8>) -> Option<Response> {
    let text = checked_text(raw)?;
    let mut fields = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut resp = httparse::Response::new(&mut fields);
    match resp.parse(text.as_bytes()) {
        Ok(httparse::Status::Complete(n)) if n == text.len() => {}
        _ => return None,
    }
    let (code, minor) = (resp.code?, resp.version?);
    let base = text.as_ptr() as usize;
    let reason = resp.reason.map_or(0..0, |r| range(base, r.as_bytes()));
    let spans = spans(base, resp.headers);
    let headers = Fields { text, spans };
    semantic(&headers, false)?;
    Some(Response {
        code,
        reason,
        minor,
        headers,
    })
}

/// At most one `Host`; lengths that all agree and are plain digits; never a
/// length beside `Transfer-Encoding`; a request's `Transfer-Encoding` is
/// exactly `chunked`.
fn semantic(headers: &Fields, request: bool) -> Option<()> {
    if headers.all("host").count() > 1 {
        return None;
    }
    let te = headers.all("transfer-encoding").count();
    let mut lengths = headers.all("content-length");
    if let Some(len) = lengths.next() {
        let digits = !len.is_empty() && len.len() <= 18 && len.bytes().all(|c| c.is_ascii_digit());
        if !digits || lengths.any(|other| other != len) || te > 0 {
            return None;
        }
    }
    if request
        && te > 0
        && (te > 1
            || !headers
                .all("transfer-encoding")
                .all(|v| v.eq_ignore_ascii_case("chunked")))
    {
        return None;
    }
    Some(())
}

/// A head longer than [`MAX_HEAD`] bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TooLarge;

/// Where the head in `buf` ends (just after its blank line), when it is
/// all there; `searched` is how much of `buf` an earlier call already
/// searched (0 the first time), so that a head arriving in many reads is
/// searched once. The limit holds at the byte, wherever the reads happened
/// to end (issue 35, finding 12): a head longer than [`MAX_HEAD`], or no
/// blank line in the first `MAX_HEAD` bytes, is [`TooLarge`].
pub fn head_end(buf: &[u8], searched: usize) -> Result<Option<usize>, TooLarge> {
    let from = searched.saturating_sub(3);
    if let Some(end) = buf
        .get(from..)
        .and_then(|b| b.windows(4).position(|w| w == b"\r\n\r\n"))
    {
        let end = end + from + 4;
        return if end > MAX_HEAD {
            Err(TooLarge)
        } else {
            Ok(Some(end))
        };
    }
    if buf.len() >= MAX_HEAD {
        return Err(TooLarge);
    }
    Ok(None)
}

#[cfg(test)]
#[allow(clippy::expect_used, clippy::indexing_slicing)]
mod tests {
    use super::*;

    /// A head of exactly MAX_HEAD bytes (its blank line included) is
    /// found; one byte more is too large, whatever the read sizes.
    #[test]
    fn the_head_limit_holds_at_the_byte() {
        let head = |len: usize| {
            let start = "GET http://a.test/ HTTP/1.1\r\nHost: a.test\r\nX-Pad: ";
            let pad = len - start.len() - 4;
            format!("{start}{}\r\n\r\n", "a".repeat(pad)).into_bytes()
        };
        for (len, ok) in [(MAX_HEAD, true), (MAX_HEAD + 1, false), (70 * 1024, false)] {
            let bytes = head(len);
            for step in [1, 7, 4096, len] {
                let (mut searched, mut got) = (0, Ok(None));
                let mut upto = 0;
                while upto < len && matches!(got, Ok(None)) {
                    upto = (upto + step).min(len);
                    got = head_end(&bytes[..upto], searched);
                    searched = upto;
                }
                assert_eq!(got.is_ok(), ok, "{len} in steps of {step}: {got:?}");
                if ok {
                    assert_eq!(got, Ok(Some(len)));
                }
            }
        }
    }

    fn head(text: &str) -> Option<Head> {
        parse_request(text.as_bytes().to_vec())
    }

    #[test]
    fn heads_are_parsed_strictly() {
        let ok = "GET / HTTP/1.1\r\nHost: a.test\r\nX-A: 1\t2\r\nContent-Length: 3";
        let h = head(ok).expect("parses");
        assert_eq!(h.framing(), Framing::Length(3));
        assert_eq!(h.header("x-a"), Some("1\t2"));
        assert!(head("GET / HTTP/1.0").is_some());
        for bad in [
            "GET / HTTP/1.1\r\nX-A: 1\nHost: denied.test", // bare LF
            "GET / HTTP/1.1\nHost: denied.test",
            "GET / HTTP/1.1\r\nX-A: 1\rHost: denied.test", // bare CR
            "GET / HTTP/1.1\r\nX-A: 1\0",                  // NUL
            "GET / HTTP/1.1\r\nX-A: \u{1b}[0m",            // another control
            "GET / HTTP/1.1\r\nX-A : 1",                   // whitespace before the colon
            "GET / HTTP/1.1\r\nX-A\t: 1",
            "GET / HTTP/1.1\r\nX-A: 1\r\n folded", // obs-fold
            "GET / HTTP/1.1\r\nX-A: 1\r\n\tfolded",
            "GET / HTTP/1.1\r\nHost: a.test\r\nhost: denied.test", // two Hosts
            "POST / HTTP/1.1\r\nContent-Length: 3\r\nTransfer-Encoding: chunked",
            "POST / HTTP/1.1\r\nContent-Length: 3\r\nContent-Length: 4",
            "POST / HTTP/1.1\r\nContent-Length: +3",
            "POST / HTTP/1.1\r\nContent-Length: 3, 3",
            "POST / HTTP/1.1\r\nContent-Length: 99999999999999999999",
            "POST / HTTP/1.1\r\nTransfer-Encoding: gzip, chunked",
            "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked",
            "POST / HTTP/1.1\r\nTransfer-Encoding: identity",
            "GET /\t HTTP/1.1",
            "GET  / HTTP/1.1",
            "GET / HTTP/1.1 ",
            "G(T / HTTP/1.1",
            "GET / HTTP/2.0",
            "GET / HTTP/1.1\r\n",
            "GET / HTTP/1.1\r\nNoColon",
        ] {
            assert!(head(bad).is_none(), "{bad:?}");
        }
    }

    #[test]
    fn response_framing() {
        let r = |t: &str| parse_response(t.as_bytes().to_vec()).expect("parses");
        assert_eq!(
            r("HTTP/1.1 200 OK\r\nContent-Length: 5").framing("GET"),
            Framing::Length(5)
        );
        assert_eq!(
            r("HTTP/1.1 200 OK\r\nContent-Length: 5").framing("HEAD"),
            Framing::None
        );
        assert_eq!(
            r("HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked").framing("GET"),
            Framing::Chunked
        );
        assert_eq!(
            r("HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip").framing("GET"),
            Framing::Close
        );
        assert_eq!(r("HTTP/1.1 204 No Content").framing("GET"), Framing::None);
        assert_eq!(r("HTTP/1.1 200 OK").framing("GET"), Framing::Close);
        assert!(r("HTTP/1.1 200 OK").keep_alive());
        assert!(!r("HTTP/1.0 200 OK").keep_alive());
        assert!(!r("HTTP/1.1 200 OK\r\nConnection: Keep-Alive, close").keep_alive());
        assert!(parse_response(b"HTTP/1.1 200 OK\r\nX: a\nY: b".to_vec()).is_none());
        assert!(
            parse_response(
                b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\nTransfer-Encoding: chunked".to_vec()
            )
            .is_none()
        );
        assert_eq!(r("HTTP/1.1 404 Not  Found").reason(), "Not  Found");
    }
}
