//! Message heads, read strictly: httparse tokenises them, and on top of it
//! every byte the proxy and a lenient server might read differently is
//! refused (RFC 9112 §2.2, §5, §6.3).

use crate::http::conn::{Conn, ReadError};
use tokio::io::AsyncRead;

/// The largest head read, request or response.
pub const MAX_HEAD: usize = 64 * 1024;
/// The most header fields in one head.
pub const MAX_HEADERS: usize = 128;

/// A request head: the request line and the headers, as read.
#[derive(Clone, Debug)]
pub struct Head {
    pub method: String,
    pub target: String,
    /// `HTTP/1.0` or `HTTP/1.1`.
    pub version: String,
    pub headers: Vec<(String, String)>,
}

/// A response head.
#[derive(Clone, Debug)]
pub struct Response {
    pub code: u16,
    pub reason: String,
    /// Minor version: 0 or 1.
    pub minor: u8,
    pub headers: Vec<(String, String)>,
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

pub(crate) fn header<'h>(headers: &'h [(String, String)], name: &str) -> Option<&'h str> {
    headers
        .iter()
        .find(|(k, _)| k.eq_ignore_ascii_case(name))
        .map(|(_, v)| v.as_str())
}

/// Whether a `Connection` header lists `token`.
pub(crate) fn connection_has(headers: &[(String, String)], token: &str) -> bool {
    headers
        .iter()
        .filter(|(k, _)| k.eq_ignore_ascii_case("connection"))
        .flat_map(|(_, v)| v.split(','))
        .any(|t| t.trim().eq_ignore_ascii_case(token))
}

impl Head {
    pub fn header(&self, name: &str) -> Option<&str> {
        header(&self.headers, name)
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
        self.version == "HTTP/1.1" && !connection_has(&self.headers, "close")
    }
}

impl Response {
    pub fn header(&self, name: &str) -> Option<&str> {
        header(&self.headers, name)
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
        self.minor == 1 && !connection_has(&self.headers, "close")
    }
}

/// A header name's characters (RFC 9110 `tchar`).
pub(crate) fn is_tchar(c: u8) -> bool {
    c.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&c)
}

/// The byte rules httparse leaves to the caller: lines end in CRLF only (no
/// bare CR or LF), no NUL or other control character (HTAB only inside
/// field values), no whitespace before a colon and no obs-fold (a line that
/// starts with a blank). `head` is everything before the blank line.
fn strict_bytes(head: &[u8]) -> bool {
    let mut lines = head.split(|&c| c == b'\n');
    let Some(first) = lines.next() else {
        return false;
    };
    let body = |l: &[u8]| l.strip_suffix(b"\r").map(<[u8]>::to_vec);
    // Every line but the last ends in CRLF; the caller cut off the final
    // CRLF CRLF, so the last line has no terminator.
    let mut all: Vec<&[u8]> = vec![first];
    all.extend(lines);
    let n = all.len();
    for (i, line) in all.into_iter().enumerate() {
        let content = if i + 1 < n {
            match body(line) {
                Some(c) => c,
                None => return false, // bare LF
            }
        } else {
            line.to_vec()
        };
        if i == 0 {
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
    true
}

/// A request head from `bytes` (everything before the blank line), or why
/// not.
pub fn parse_request(bytes: &[u8]) -> Option<Head> {
    if !strict_bytes(bytes) {
        return None;
    }
    let mut with_end = bytes.to_vec();
    with_end.extend_from_slice(b"\r\n\r\n");
    let mut fields = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut req = httparse::Request::new(&mut fields);
    match req.parse(&with_end) {
        Ok(httparse::Status::Complete(n)) if n == with_end.len() => {}
        _ => return None,
    }
    let (method, target, minor) = (req.method?, req.path?, req.version?);
    // The request line is exactly three tokens with single spaces.
    let line = bytes.split(|&c| c == b'\r').next()?;
    if line != format!("{method} {target} HTTP/1.{minor}").as_bytes() || target.is_empty() {
        return None;
    }
    let headers = fields_of(req.headers)?;
    semantic(&headers, true)?;
    Some(Head {
        method: method.to_string(),
        target: target.to_string(),
        version: format!("HTTP/1.{minor}"),
        headers,
    })
}

/// A response head from `bytes` (everything before the blank line).
pub fn parse_response(bytes: &[u8]) -> Option<Response> {
    if !strict_bytes(bytes) {
        return None;
    }
    let mut with_end = bytes.to_vec();
    with_end.extend_from_slice(b"\r\n\r\n");
    let mut fields = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut resp = httparse::Response::new(&mut fields);
    match resp.parse(&with_end) {
        Ok(httparse::Status::Complete(n)) if n == with_end.len() => {}
        _ => return None,
    }
    let (code, minor) = (resp.code?, resp.version?);
    let reason = resp.reason.unwrap_or("").to_string();
    let headers = fields_of(resp.headers)?;
    semantic(&headers, false)?;
    Some(Response {
        code,
        reason,
        minor,
        headers,
    })
}

fn fields_of(fields: &[httparse::Header<'_>]) -> Option<Vec<(String, String)>> {
    fields
        .iter()
        .map(|h| {
            let v = std::str::from_utf8(h.value).ok()?;
            Some((h.name.to_string(), v.trim_matches([' ', '\t']).to_string()))
        })
        .collect()
}

/// At most one `Host`; lengths that all agree and are plain digits; never a
/// length beside `Transfer-Encoding`; a request's `Transfer-Encoding` is
/// exactly `chunked`.
fn semantic(headers: &[(String, String)], request: bool) -> Option<()> {
    let named = |n: &'static str| {
        headers
            .iter()
            .filter(move |(k, _)| k.eq_ignore_ascii_case(n))
    };
    if named("Host").count() > 1 {
        return None;
    }
    let te: Vec<&str> = named("Transfer-Encoding")
        .map(|(_, v)| v.as_str())
        .collect();
    let mut lengths = named("Content-Length").map(|(_, v)| v.as_str());
    if let Some(len) = lengths.next() {
        let digits = !len.is_empty() && len.len() <= 18 && len.bytes().all(|c| c.is_ascii_digit());
        if !digits || lengths.any(|other| other != len) || !te.is_empty() {
            return None;
        }
    }
    if request
        && !te.is_empty()
        && (te.len() > 1 || !te.iter().all(|v| v.eq_ignore_ascii_case("chunked")))
    {
        return None;
    }
    Some(())
}

/// Reads a head up to its blank line; `Ok(None)` when the peer closed
/// before sending a byte of it.
pub async fn read_raw<S: AsyncRead + Unpin>(
    conn: &mut Conn<S>,
) -> Result<Option<Vec<u8>>, ReadError> {
    let mut searched: usize = 0;
    loop {
        let buf = conn.buffered();
        if let Some(end) = buf
            .get(searched.saturating_sub(3)..)
            .and_then(|b| b.windows(4).position(|w| w == b"\r\n\r\n"))
        {
            let end = end + searched.saturating_sub(3);
            let head = buf.get(..end).unwrap_or_default().to_vec();
            conn.consume(end + 4);
            return Ok(Some(head));
        }
        searched = buf.len();
        if searched > MAX_HEAD {
            return Err(ReadError::TooLarge);
        }
        if conn.fill().await? == 0 {
            return if conn.buffered().is_empty() {
                Ok(None)
            } else {
                Err(ReadError::Eof)
            };
        }
    }
}

#[cfg(test)]
#[allow(clippy::expect_used)]
mod tests {
    use super::*;

    fn head(text: &str) -> Option<Head> {
        parse_request(text.as_bytes())
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
        let r = |t: &str| parse_response(t.as_bytes()).expect("parses");
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
        assert!(parse_response(b"HTTP/1.1 200 OK\r\nX: a\nY: b").is_none());
        assert!(
            parse_response(b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\nTransfer-Encoding: chunked")
                .is_none()
        );
    }
}
