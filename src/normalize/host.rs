//! Host normalisation (language spec §5).
//!
//! ASCII input is normalised into a caller-provided stack buffer, so the hot
//! path does not allocate; only non-ASCII names go through `idna` (UTS #46
//! non-transitional processing, as `idna::domain_to_ascii` does it).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use super::addr::canonical_ip;

/// The longest name the engine accepts (octets, without a trailing dot).
pub const MAX_NAME: usize = 253;

/// Why a host was refused; each is a reason code of its own.
#[derive(Clone, Copy, Debug, Eq, PartialEq, thiserror::Error)]
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
    Name(&'a str),
    Ip(IpAddr),
}

/// Scratch space for [`normalize_host`]; reuse one per thread to avoid
/// allocation. Only non-ASCII input uses the heap.
#[derive(Clone, Debug)]
pub struct HostBuf {
    ascii: [u8; MAX_NAME + 2],
    idna: String,
}

impl Default for HostBuf {
    fn default() -> Self {
        HostBuf {
            ascii: [0; MAX_NAME + 2],
            idna: String::new(),
        }
    }
}

impl HostBuf {
    pub fn new() -> Self {
        Self::default()
    }
}

/// Normalises a host as a connection target (language spec §5).
pub fn normalize_host<'b>(input: &str, buf: &'b mut HostBuf) -> Result<Host<'b>, HostError> {
    // 1. Characters that never belong in a host field.
    if input.is_empty() {
        return Err(HostError::Invalid("empty host"));
    }
    for c in input.chars() {
        if c.is_whitespace() || c.is_control() {
            return Err(HostError::Invalid("whitespace or control character"));
        }
        if matches!(c, '@' | '/' | '\\' | '?' | '#' | '%' | '*') {
            return Err(HostError::Invalid("character not allowed in a host"));
        }
    }
    // 2. Bracketed and bare IPv6 literals.
    if let Some(rest) = input.strip_prefix('[') {
        let inner = rest
            .strip_suffix(']')
            .ok_or(HostError::Invalid("unbalanced brackets"))?;
        let v6: Ipv6Addr = inner
            .parse()
            .map_err(|_| HostError::Invalid("brackets must hold an IPv6 address"))?;
        return Ok(Host::Ip(canonical_ip(IpAddr::V6(v6))));
    }
    if input.contains(':') {
        return match input.parse::<Ipv6Addr>() {
            Ok(v6) => Ok(Host::Ip(canonical_ip(IpAddr::V6(v6)))),
            Err(_) => Err(HostError::Invalid("a port or colon inside the host")),
        };
    }
    if input.contains(['[', ']']) {
        return Err(HostError::Invalid("brackets must hold an IPv6 address"));
    }
    // 3./4. Map to lowercase A-labels, strip one trailing dot.
    let name: &str = if input.is_ascii() {
        let bytes = input.as_bytes();
        let bytes = bytes.strip_suffix(b".").unwrap_or(bytes);
        let dst = buf
            .ascii
            .get_mut(..bytes.len())
            .ok_or(HostError::Invalid("name too long"))?;
        for (d, s) in dst.iter_mut().zip(bytes) {
            *d = s.to_ascii_lowercase();
        }
        let dst = buf
            .ascii
            .get(..bytes.len())
            .ok_or(HostError::Invalid("name too long"))?;
        std::str::from_utf8(dst).map_err(|_| HostError::Invalid("not UTF-8"))?
    } else {
        buf.idna = idna::domain_to_ascii(input)
            .map_err(|_| HostError::Invalid("rejected by UTS #46 processing"))?;
        if buf.idna.ends_with('.') {
            buf.idna.pop();
        }
        buf.idna.make_ascii_lowercase();
        buf.idna.as_str()
    };
    // 5. Label and length rules.
    check_labels(name)?;
    // 6. Numeric names are addresses or ambiguous spellings.
    let last = name.rsplit('.').next().unwrap_or(name);
    let numeric = last.bytes().all(|b| b.is_ascii_digit())
        || last
            .strip_prefix("0x")
            .is_some_and(|h| h.bytes().all(|b| b.is_ascii_hexdigit()));
    if numeric {
        return match canonical_dotted_quad(name) {
            Some(v4) => Ok(Host::Ip(IpAddr::V4(v4))),
            None => Err(HostError::AmbiguousIp),
        };
    }
    Ok(Host::Name(name))
}

/// Label rules of step 5: no empty label, labels ≤ 63 octets, names ≤ 253,
/// only `a-z 0-9 - _`.
pub(crate) fn check_labels(name: &str) -> Result<(), HostError> {
    if name.is_empty() {
        return Err(HostError::Invalid("empty host"));
    }
    if name.len() > MAX_NAME {
        return Err(HostError::Invalid("name longer than 253 octets"));
    }
    for label in name.split('.') {
        if label.is_empty() {
            return Err(HostError::Invalid("empty label"));
        }
        if label.len() > 63 {
            return Err(HostError::Invalid("label longer than 63 octets"));
        }
        if !label
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'_')
        {
            return Err(HostError::Invalid("character not allowed in a name"));
        }
    }
    Ok(())
}

/// `a.b.c.d` with four decimal octets 0–255 and no leading zeros.
fn canonical_dotted_quad(name: &str) -> Option<Ipv4Addr> {
    let mut octets = [0u8; 4];
    let mut parts = name.split('.');
    for o in octets.iter_mut() {
        let p = parts.next()?;
        if p.is_empty()
            || p.len() > 3
            || (p.len() > 1 && p.starts_with('0'))
            || !p.bytes().all(|b| b.is_ascii_digit())
        {
            return None;
        }
        *o = p.parse().ok()?;
    }
    if parts.next().is_some() {
        return None;
    }
    Some(Ipv4Addr::from(octets))
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
    Name(String),
    Ip(IpAddr),
}

#[cfg(test)]
mod tests {
    use super::*;

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
