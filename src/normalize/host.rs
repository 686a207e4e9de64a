//! Host normalisation (docs/language.md#host-normalisation).
//!
//! ASCII input is normalised into a caller-provided stack buffer, so the hot
//! path does not allocate; only non-ASCII names go through `idna` (UTS #46
//! non-transitional processing, as `idna::domain_to_ascii` does it).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use super::addr::canonical_ip;
use super::scan::fast_scan;
pub(crate) use super::scan::{Labels, word};

/// The longest name the engine accepts (octets, without a trailing dot).
pub const MAX_NAME: usize = 253;

/// Why a host was refused; each is a reason code of its own.
#[derive(Clone, Copy, Debug, Eq, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum HostError {
    /// Not a host name or address (`invalid_host`).
    #[error("invalid host: {0}")]
    Invalid(&'static str),
    /// A numeric spelling that resolvers turn into an address
    /// (`ambiguous_ip_literal`).
    #[error("numeric host that is not a canonical dotted-quad address")]
    AmbiguousIp,
}

impl HostError {
    /// What is wrong, without the reason code's words.
    pub fn detail(&self) -> &'static str {
        match self {
            HostError::Invalid(why) => why,
            HostError::AmbiguousIp => "a numeric name that resolvers would read as an address",
        }
    }
}

/// A normalised host: a lowercase A-label name without trailing dot, or an
/// address (IPv4-mapped and -compatible IPv6 already turned into IPv4).
#[derive(Clone, Copy, Debug, Eq, PartialEq)]
pub enum Host<'a> {
    /// A name: lowercase ASCII (A-labels for IDN), no trailing dot.
    Name(&'a str),
    /// An address, canonical.
    Ip(IpAddr),
}

/// Scratch space for [`normalize_host`], on the stack. Only non-ASCII input
/// uses the heap.
#[derive(Clone, Debug, Default)]
pub struct HostBuf {
    /// Set up (zeroed) only when a host needs lowercasing.
    ascii: Option<[u8; MAX_NAME + 2]>,
    idna: String,
}

impl HostBuf {
    /// Empty scratch space.
    pub fn new() -> Self {
        Self::default()
    }
}

/// A normalised host and, for a name the fast path saw, its layout for the
/// domain automaton.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Split<'b> {
    pub host: Host<'b>,
    pub labels: Option<Labels<'b>>,
}

/// The other common host: a canonical dotted-quad IPv4 address (at most
/// one trailing dot), read directly. Anything else numeric — leading zeros,
/// fewer parts, octets over 255 — is left to the general path, which
/// refuses it as an ambiguous spelling.
#[inline]
fn fast_dotted_quad(input: &str) -> Option<Ipv4Addr> {
    let text = input.strip_suffix('.').unwrap_or(input);
    if !(7..=15).contains(&text.len()) || !text.bytes().all(|b| b.is_ascii_digit() || b == b'.') {
        return None;
    }
    canonical_dotted_quad(text)
}

/// [`normalize_host`], with the name laid out for the domain automaton
/// when the fast path took it. Always inlined: returned through memory,
/// the split's dot bitmap would be stored a word at a time and read back
/// wider, which stalls. (Not forced in the browser build, where the
/// module's size matters more: see docs/wasm.md.)
#[cfg_attr(not(target_arch = "wasm32"), inline(always))]
#[cfg_attr(target_arch = "wasm32", inline)]
pub(crate) fn normalize_split<'b>(
    input: &'b str,
    buf: &'b mut HostBuf,
) -> Result<Split<'b>, HostError> {
    if let Some(v4) = fast_dotted_quad(input) {
        return Ok(Split {
            host: Host::Ip(IpAddr::V4(v4)),
            labels: None,
        });
    }
    if let Some((len, upper, dots)) = fast_scan(input) {
        // Input already in lower case is its own normal form.
        let text = if upper {
            let ascii = buf.ascii.get_or_insert([0; MAX_NAME + 2]);
            let dst = ascii
                .get_mut(..len)
                .ok_or(HostError::Invalid("name longer than 253 octets"))?;
            for (d, s) in dst.iter_mut().zip(input.as_bytes()) {
                *d = s.to_ascii_lowercase();
            }
            std::str::from_utf8(dst).map_err(|_| HostError::Invalid("not UTF-8"))?
        } else {
            input.get(..len).ok_or(HostError::Invalid("empty host"))?
        };
        return Ok(Split {
            host: Host::Name(text),
            labels: Some(Labels {
                bytes: text.as_bytes(),
                dots,
            }),
        });
    }
    Ok(Split {
        host: normalize_general(input, buf)?,
        labels: None,
    })
}

/// Normalises a host as a connection target (docs/language.md#host-normalisation).
///
/// ASCII input takes a fast path: one pass over the bytes validates them and
/// notes colons, brackets and upper case; a host that is already lowercase is
/// borrowed, not copied. Non-ASCII input goes through UTS #46.
pub fn normalize_host<'b>(input: &'b str, buf: &'b mut HostBuf) -> Result<Host<'b>, HostError> {
    normalize_split(input, buf).map(|s| s.host)
}

/// Every host the fast path leaves: IP literals, IDN, errors.
fn normalize_general<'b>(input: &'b str, buf: &'b mut HostBuf) -> Result<Host<'b>, HostError> {
    if input.is_empty() {
        return Err(HostError::Invalid("empty host"));
    }
    if !input.is_ascii() {
        return normalize_unicode(input, buf);
    }
    // 1. Characters that never belong in a host field (ASCII whitespace and
    // control characters are all at or below 0x20, or 0x7f).
    let (mut colon, mut bracket, mut upper) = (false, false, false);
    for &b in input.as_bytes() {
        match b {
            0..=0x20 | 0x7f => return Err(HostError::Invalid("whitespace or control character")),
            b'@' | b'/' | b'\\' | b'?' | b'#' | b'%' | b'*' => {
                return Err(HostError::Invalid("character not allowed in a host"));
            }
            b':' => colon = true,
            b'[' | b']' => bracket = true,
            b'A'..=b'Z' => upper = true,
            _ => {}
        }
    }
    // 2. Bracketed and bare IPv6 literals.
    if bracket || colon {
        return ipv6_literal(input);
    }
    // 3./4. Lowercase (a copy only when needed); strip one trailing dot.
    let bytes = input.as_bytes();
    let bytes = bytes.strip_suffix(b".").unwrap_or(bytes);
    let name: &str = if upper {
        let ascii = buf.ascii.get_or_insert([0; MAX_NAME + 2]);
        let dst = ascii
            .get_mut(..bytes.len())
            .ok_or(HostError::Invalid("name longer than 253 octets"))?;
        for (d, s) in dst.iter_mut().zip(bytes) {
            *d = s.to_ascii_lowercase();
        }
        std::str::from_utf8(dst).map_err(|_| HostError::Invalid("not UTF-8"))?
    } else {
        input
            .get(..bytes.len())
            .ok_or(HostError::Invalid("empty host"))?
    };
    finish(name)
}

/// Steps 5 and 6 on a lowercase ASCII name: label rules, then numeric names.
fn finish(name: &str) -> Result<Host<'_>, HostError> {
    let last_numeric = check_labels(name)?;
    if last_numeric {
        return match canonical_dotted_quad(name) {
            Some(v4) => Ok(Host::Ip(IpAddr::V4(v4))),
            None => Err(HostError::AmbiguousIp),
        };
    }
    Ok(Host::Name(name))
}

fn ipv6_literal(input: &str) -> Result<Host<'static>, HostError> {
    if let Some(rest) = input.strip_prefix('[') {
        let inner = rest
            .strip_suffix(']')
            .ok_or(HostError::Invalid("unbalanced brackets"))?;
        let v6: Ipv6Addr = inner
            .parse()
            .map_err(|_| HostError::Invalid("brackets must hold an IPv6 address"))?;
        return Ok(Host::Ip(canonical_ip(IpAddr::V6(v6))));
    }
    if input.contains(['[', ']']) {
        return Err(HostError::Invalid("brackets must hold an IPv6 address"));
    }
    match input.parse::<Ipv6Addr>() {
        Ok(v6) => Ok(Host::Ip(canonical_ip(IpAddr::V6(v6)))),
        Err(_) => Err(HostError::Invalid("a port or colon inside the host")),
    }
}

/// The slow path: non-ASCII input (UTS #46 through `idna`).
fn normalize_unicode<'b>(input: &str, buf: &'b mut HostBuf) -> Result<Host<'b>, HostError> {
    for c in input.chars() {
        if c.is_whitespace() || c.is_control() {
            return Err(HostError::Invalid("whitespace or control character"));
        }
        if matches!(c, '@' | '/' | '\\' | '?' | '#' | '%' | '*') {
            return Err(HostError::Invalid("character not allowed in a host"));
        }
    }
    if input.contains([':', '[', ']']) {
        // Only ASCII can spell an IPv6 literal; anything else is no host.
        return match input.parse::<Ipv6Addr>() {
            Ok(v6) => Ok(Host::Ip(canonical_ip(IpAddr::V6(v6)))),
            Err(_) => Err(HostError::Invalid(
                "a port, colon or bracket inside the host",
            )),
        };
    }
    buf.idna = idna::domain_to_ascii(input)
        .map_err(|_| HostError::Invalid("rejected by UTS #46 processing"))?;
    if buf.idna.ends_with('.') {
        buf.idna.pop();
    }
    buf.idna.make_ascii_lowercase();
    finish(buf.idna.as_str())
}

/// Label rules of step 5, in one pass: no empty label, labels ≤ 63 octets,
/// names ≤ 253, only `a-z 0-9 - _`. Returns whether the last label is
/// numeric (all digits, or a `0x` hex number).
pub(crate) fn check_labels(name: &str) -> Result<bool, HostError> {
    if name.is_empty() {
        return Err(HostError::Invalid("empty host"));
    }
    if name.len() > MAX_NAME {
        return Err(HostError::Invalid("name longer than 253 octets"));
    }
    let mut len = 0usize;
    let mut digits = true;
    let mut label_start = 0usize;
    for (i, &b) in name.as_bytes().iter().enumerate() {
        if b == b'.' {
            if len == 0 {
                return Err(HostError::Invalid("empty label"));
            }
            len = 0;
            digits = true;
            label_start = i + 1;
            continue;
        }
        if !(b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'_') {
            return Err(HostError::Invalid("character not allowed in a name"));
        }
        len += 1;
        if len > 63 {
            return Err(HostError::Invalid("label longer than 63 octets"));
        }
        digits &= b.is_ascii_digit();
    }
    if len == 0 {
        return Err(HostError::Invalid("empty label"));
    }
    let last = name.get(label_start..).unwrap_or("");
    let hex = last
        .strip_prefix("0x")
        .is_some_and(|h| h.bytes().all(|b| b.is_ascii_hexdigit()));
    Ok(digits || hex)
}

/// `a.b.c.d` with four decimal octets 0–255 and no leading zeros, in one
/// pass over the bytes.
fn canonical_dotted_quad(name: &str) -> Option<Ipv4Addr> {
    let mut octets = [0u8; 4];
    let (mut i, mut value, mut digits, mut leading_zero) = (0usize, 0u32, 0u32, false);
    for &b in name.as_bytes().iter().chain(std::iter::once(&b'.')) {
        if b == b'.' {
            if digits == 0 || value > 255 || (leading_zero && digits > 1) {
                return None;
            }
            *octets.get_mut(i)? = value as u8;
            (i, value, digits, leading_zero) = (i + 1, 0, 0, false);
        } else if b.is_ascii_digit() {
            if digits == 0 {
                leading_zero = b == b'0';
            }
            digits += 1;
            if digits > 3 {
                return None;
            }
            value = value * 10 + u32::from(b - b'0');
        } else {
            return None;
        }
    }
    (i == 4).then(|| Ipv4Addr::from(octets))
}

/// Normalises a name outside the hot path (for patterns and reports).
pub fn normalize_host_owned(input: &str) -> Result<OwnedHost, HostError> {
    let mut buf = HostBuf::new();
    Ok(match normalize_host(input, &mut buf)? {
        Host::Name(n) => OwnedHost::Name(n.to_string()),
        Host::Ip(ip) => OwnedHost::Ip(ip),
    })
}

/// An owned [`Host`].
#[derive(Clone, Debug, Eq, PartialEq, Hash)]
pub enum OwnedHost {
    /// A name, normalised as in [`Host::Name`].
    Name(String),
    /// An address, canonical.
    Ip(IpAddr),
}

#[cfg(test)]
#[allow(clippy::indexing_slicing)]
mod tests {
    use super::*;

    /// The fast path must answer exactly as the general path, and lay out
    /// exactly the name it returns.
    fn same_as_general(input: &str) {
        let mut a = HostBuf::new();
        let mut b = HostBuf::new();
        let fast = normalize_split(input, &mut a);
        let general = normalize_general(input, &mut b);
        assert_eq!(fast.map(|s| s.host), general, "{input:?}");
        if let Ok(Split {
            host: Host::Name(n),
            labels: Some(l),
        }) = fast
        {
            assert_eq!(l.bytes, n.as_bytes(), "{input:?}");
            let mut dots = [0u64; 4];
            for (i, b) in n.bytes().enumerate() {
                if b == b'.' {
                    dots[i / 64] |= 1 << (i % 64);
                }
            }
            assert_eq!(l.dots, dots, "{input:?}");
        }
    }

    #[test]
    fn the_fast_path_agrees_with_the_general_path_on_every_character() {
        let templates = [
            "#",
            "#.com",
            "a#.com",
            "ab.c#",
            "ab.cd#",
            "#ab.example.org",
            "abcdefg#.x",
            "abcdefgh#.x",
            "abcdefghijklmno#.example.co.uk",
            "abcdefghijklmnop#.example.co.uk",
            "abcdefghijklmnopqrstuvwxyz01234#.x",
            "abcdefghijklmnopqrstuvwxyz012345#.x",
            "abcdefghijklmnopqrstuvwxyz.abcdefghijklmnopqrstuvwxyz.012345678#.x",
            "abcdefghijklmnopqrstuvwxyz.abcdefghijklmnopqrstuvwxyz.0123456789#.x",
            "abcdefghijklmnopqrstuvwxyz.abcdefghijklmnopqrstuvwxyz.0123456789a#.x",
            "abcdefghijklmnopqrstuvwxyz.abcdefghijklmnopqrstuvwxyz.0123456789ab#.x",
            "x.#",
            "x.#.",
            "#.",
            "a.#b",
            "a..#",
            "0#.com",
            "a.0#",
            "a.b-#",
            "A#Z.COM.",
            "1.2.3.#",
            "#.2.3.4",
            "1.2.3.4#",
            "10.0.0.1#.",
            "255.255.255.25#",
            "1.2.3#4",
            "0#.1.2.3",
            "1.2.#.4.",
        ];
        for c in (0u32..0x250).filter_map(char::from_u32) {
            for t in templates {
                same_as_general(&t.replace('#', &c.to_string()));
            }
        }
    }

    #[test]
    fn the_fast_path_agrees_on_numeric_hosts() {
        for s in [
            "1.2.3.4",
            "1.2.3.4.",
            "1.2.3.4..",
            "0.0.0.0",
            "255.255.255.255",
            "256.1.1.1",
            "01.2.3.4",
            "1.2.3",
            "1.2.3.4.5",
            "1..2.3",
            "1.2.3.04",
            "127.1",
            "0x7f.0.0.1",
            "999.999.999.999",
            "1.2.3.4444",
            "12345678901234567",
        ] {
            same_as_general(s);
        }
    }

    #[test]
    fn the_fast_path_agrees_on_lengths_and_label_limits() {
        for len in 0..=260 {
            let mut s = "a".repeat(len);
            same_as_general(&s);
            s.push('.');
            same_as_general(&s);
            // Labels of 62, 63 and 64 octets at every place of a long name.
            let dotted: String = (0..len)
                .map(|i| if i % 64 == 63 { '.' } else { 'b' })
                .collect();
            same_as_general(&dotted);
            let dotted: String = (0..len)
                .map(|i| if i % 65 == 64 { '.' } else { 'C' })
                .collect();
            same_as_general(&dotted);
            let dotted: String = (0..len)
                .map(|i| if i % 3 == 2 { '.' } else { 'x' })
                .collect();
            same_as_general(&dotted);
        }
    }

    proptest::proptest! {
        #[test]
        fn the_fast_path_agrees_on_generated_hosts(
            parts in proptest::collection::vec(0usize..44, 0..300)
        ) {
            const ALPHABET: &[u8] = b"abcxyzABCXYZ0123456789-_....\x00 :[]@/*%%#?e\x7f";
            let s: String = parts.iter().map(|&i| char::from(ALPHABET[i % ALPHABET.len()])).collect();
            same_as_general(&s);
        }
    }

    fn n(s: &str) -> Result<OwnedHost, HostError> {
        normalize_host_owned(s)
    }
    fn name(s: &str) -> Result<OwnedHost, HostError> {
        Ok(OwnedHost::Name(s.to_string()))
    }
    fn ip(s: &str) -> Result<OwnedHost, HostError> {
        Ok(OwnedHost::Ip(
            s.parse().unwrap_or(IpAddr::V4(Ipv4Addr::UNSPECIFIED)),
        ))
    }

    #[test]
    fn the_spec_examples() {
        assert_eq!(n("GitHub.COM."), name("github.com"));
        assert_eq!(n("straße.de"), name("xn--strae-oqa.de"));
        assert_eq!(n("bücher.example"), name("xn--bcher-kva.example"));
        assert_eq!(n("a。b．c｡d"), name("a.b.c.d"));
        assert_eq!(n("ｅｘａｍｐｌｅ.com"), name("example.com"));
        assert_eq!(n("ex\u{ad}ample.com"), name("example.com"));
        assert_eq!(n("127。0。0。1"), ip("127.0.0.1"));
        assert_eq!(n("10.0.0.1"), ip("10.0.0.1"));
        assert_eq!(n("[::1]"), ip("::1"));
        assert_eq!(n("::ffff:10.1.2.3"), ip("10.1.2.3"));
        assert_eq!(n("[::ffff:a01:203]"), ip("10.1.2.3"));
    }

    #[test]
    fn numeric_spellings_are_ambiguous() {
        for s in [
            "2130706433",
            "0x7f.1",
            "127.1",
            "0177.0.0.1",
            "127.000.000.001",
            "0x7f000001",
            "1.2.3.4.5",
            "a.0x",
            "x.123",
        ] {
            assert_eq!(n(s), Err(HostError::AmbiguousIp), "{s}");
        }
    }

    #[test]
    fn junk_is_invalid() {
        for s in [
            "",
            " a.com",
            "a .com",
            "user@a.com",
            "a.com/x",
            "a\\b",
            "a?b",
            "a#b",
            "a%2e.com",
            "fe80::1%eth0",
            "a.com:443",
            "*.a.com",
            "a..b",
            ".a.com",
            "..",
            "a.com..",
            "[1.2.3.4]",
            "[::1",
            "a\u{0}b",
            "a!b.com",
        ] {
            assert!(
                matches!(n(s), Err(HostError::Invalid(_))),
                "{s:?} -> {:?}",
                n(s)
            );
        }
        let long_label = format!("{}.com", "a".repeat(64));
        assert!(n(&long_label).is_err());
        let long_name = vec!["a".repeat(50); 6].join(".");
        assert!(long_name.len() > 253 && n(&long_name).is_err());
    }
}
