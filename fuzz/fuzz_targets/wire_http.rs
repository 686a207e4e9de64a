//! gatehouse-wire's HTTP parsers on hostile bytes: request and response
//! heads, where a head ends, and authorities.
//! Never a panic, and what a parser accepts holds the properties the proxy
//! forwards and decides on: no line break, NUL or blank where a smuggled
//! request could hide one, one framing, and a head that reads back the same
//! when written out again.
#![no_main]
use gatehouse_wire::authority::split_authority;
use gatehouse_wire::http::{Framing, MAX_HEAD, head_end, parse_request, parse_response};
use libfuzzer_sys::fuzz_target;

fn tchar(c: u8) -> bool {
    c.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&c)
}

/// A field as the proxy may forward it: a token name, a value without
/// control characters other than HTAB and without surrounding blanks.
fn field_ok(name: &str, value: &str) -> bool {
    !name.is_empty()
        && name.bytes().all(tchar)
        && !value.bytes().any(|c| c.is_ascii_control() && c != b'\t')
        && !value.starts_with([' ', '\t'])
        && !value.ends_with([' ', '\t'])
}

fuzz_target!(|data: &[u8]| {
    if let Some(h) = parse_request(data.to_vec()) {
        assert!(!h.method().is_empty() && h.method().bytes().all(tchar));
        let t = h.target();
        assert!(!t.is_empty() && !t.bytes().any(|c| c.is_ascii_control() || c == b' '));
        let mut written = format!("{} {} {}\r\n", h.method(), t, h.version);
        for (n, v) in h.headers.iter() {
            assert!(field_ok(n, v), "{n:?}: {v:?}");
            written.push_str(&format!("{n}: {v}\r\n"));
        }
        written.push_str("\r\n");
        // One framing: never both a length and chunked, never two lengths.
        let te = h.headers.all("transfer-encoding").count();
        let cl: Vec<&str> = h.headers.all("content-length").collect();
        assert!(te == 0 || cl.is_empty());
        assert!(cl.windows(2).all(|w| w[0] == w[1]));
        assert!(h.headers.all("host").count() <= 1);
        if te > 0 {
            assert_eq!(h.framing(), Framing::Chunked);
        }
        let again = parse_request(written.into_bytes()).expect("a written head reads back");
        assert_eq!((again.method(), again.target()), (h.method(), h.target()));
        assert!(again.headers.iter().eq(h.headers.iter()));
    }
    if let Some(r) = parse_response(data.to_vec()) {
        assert!(!r.reason().bytes().any(|c| c.is_ascii_control() && c != b'\t'));
        for (n, v) in r.headers.iter() {
            assert!(field_ok(n, v), "{n:?}: {v:?}");
        }
    }
    // The end of a head is found the same however its bytes arrive: at
    // once, or in two reads split anywhere.
    let whole = head_end(data, 0);
    if let Ok(Some(end)) = whole {
        assert!(end <= MAX_HEAD && end <= data.len());
        assert_eq!(data.get(end - 4..end), Some(&b"\r\n\r\n"[..]));
    }
    if let Some(&cut) = data.first() {
        let cut = usize::from(cut).min(data.len());
        let first = head_end(&data[..cut], 0);
        let again = match first {
            Ok(None) => head_end(data, cut),
            done => done,
        };
        assert_eq!(again, whole, "split at {cut}");
    }
    if let Ok(text) = std::str::from_utf8(data) {
        if let Some((host, port)) = split_authority(text, 80) {
            // The host holds no port: a bracketed IPv6 literal, or no colon.
            if host.starts_with('[') {
                assert!(host.ends_with(']'), "{host:?}");
            } else {
                assert!(!host.contains(':'), "{host:?}");
            }
            let joined = format!("{host}:{port}");
            assert_eq!(split_authority(&joined, 1), Some((host, port)));
        }
    }
});
