//! Host and port as the proxy reads them from request targets, `Host`
//! headers and `CONNECT` lines, and hosts compared as a resolver sees them.

/// `HOST:PORT` (IPv6 in brackets) into the host (brackets kept) and port;
/// no port means `default_port`.
pub fn split_authority(a: &str, default_port: u16) -> Option<(String, u16)> {
    if let Some(rest) = a.strip_prefix('[') {
        let (h, after) = rest.split_once(']')?;
        let port = match after.strip_prefix(':') {
            Some(p) => parse_port(p)?,
            None if after.is_empty() => default_port,
            None => return None,
        };
        return Some((format!("[{h}]"), port));
    }
    match a.rsplit_once(':') {
        Some((h, p)) => Some((h.to_string(), parse_port(p)?)),
        None => Some((a.to_string(), default_port)),
    }
}

/// A port: 1 to 5 ASCII digits (no sign, no blanks), at most 65535.
fn parse_port(p: &str) -> Option<u16> {
    if p.is_empty() || p.len() > 5 || !p.bytes().all(|c| c.is_ascii_digit()) {
        return None;
    }
    p.parse().ok()
}

/// Hosts compared as a resolver would see them: ASCII case and one trailing
/// dot do not matter; anything else does.
pub fn same_host(a: &str, b: &str) -> bool {
    let n = |s: &str| s.trim_end_matches('.').to_ascii_lowercase();
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
        assert!(same_host("A.Example.", "a.example"));
        assert!(!same_host("a.example", "b.example"));
        assert!(!same_host("", ""));
        assert!(is_literal("[::1]") && is_literal("10.0.0.1") && !is_literal("a.test"));
    }
}
