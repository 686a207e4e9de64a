//! Host and port as the proxy reads them from request targets, `Host`
//! headers and `CONNECT` lines, and hosts compared as a resolver sees them.

/// `HOST[:PORT]` (IPv6 in brackets) into the host (brackets kept) and
/// port; no port means `default_port`. The engine's own splitting
/// ([`gatehouse::normalize::split_authority`]): an unbracketed IPv6 address,
/// a signed, empty or oversized port, or text after `]` is refused.
pub fn split_authority(a: &str, default_port: u16) -> Option<(String, u16)> {
    gatehouse::normalize::split_authority(a, default_port).map(|(h, p)| (h.to_string(), p))
}

/// Hosts compared as a resolver would see them: ASCII case and one trailing
/// dot do not matter; anything else does (`a.test..` is not `a.test`: the
/// engine strips exactly one dot too).
pub fn same_host(a: &str, b: &str) -> bool {
    let n = |s: &str| s.strip_suffix('.').unwrap_or(s).to_ascii_lowercase();
    !a.is_empty() && n(a) == n(b)
}

/// Whether `host` (brackets allowed) is an IP literal.
pub fn is_literal(host: &str) -> bool {
    host.trim_start_matches('[')
        .trim_end_matches(']')
        .parse::<std::net::IpAddr>()
        .is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn authorities() {
        assert_eq!(
            split_authority("a.example:443", 80),
            Some(("a.example".into(), 443))
        );
        assert_eq!(
            split_authority("a.example", 80),
            Some(("a.example".into(), 80))
        );
        assert_eq!(
            split_authority("[::1]:8080", 80),
            Some(("[::1]".into(), 8080))
        );
        assert_eq!(split_authority("[::1]", 80), Some(("[::1]".into(), 80)));
        assert_eq!(split_authority("a:b", 80), None);
        assert_eq!(split_authority("a:+80", 80), None);
        assert_eq!(split_authority("a:65536", 80), None);
        assert_eq!(split_authority("::1", 80), None);
        assert!(same_host("A.Example.", "a.example"));
        assert!(same_host("a.example.", "A.EXAMPLE."));
        assert!(!same_host("a.example..", "a.example"));
        assert!(!same_host("a.example", "a.example.."));
        assert!(!same_host("a.example", "b.example"));
        assert!(!same_host("", ""));
        assert!(is_literal("[::1]") && is_literal("10.0.0.1") && !is_literal("a.test"));
    }
}
