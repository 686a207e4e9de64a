//! `HOST:PORT` as written in queries, request targets, `Host` headers and
//! `CONNECT` lines: split without judging the host (the host is normalised
//! and decided afterwards, by [`crate::normalize::normalize_host`] and the
//! engine).

/// Why `HOST:PORT` could not be split.
#[derive(Clone, Copy, Debug, Eq, PartialEq)]
#[non_exhaustive]
pub enum HostPortError {
    /// No `:PORT` (or, for a bracketed host, nothing usable after `]`).
    NoPort,
    /// An IPv6 address without brackets: where its port starts is a guess.
    UnbracketedIpv6,
}

/// Splits `HOST:PORT` (an IPv6 host in brackets, kept) into the host and
/// the port text, neither judged.
///
/// ```
/// use gatehouse::normalize::{split_host_port, HostPortError};
/// assert_eq!(split_host_port("github.com:443"), Ok(("github.com", "443")));
/// assert_eq!(split_host_port("[::1]:8080"), Ok(("[::1]", "8080")));
/// assert_eq!(split_host_port("::1:8080"), Err(HostPortError::UnbracketedIpv6));
/// assert_eq!(split_host_port("github.com"), Err(HostPortError::NoPort));
/// ```
pub fn split_host_port(text: &str) -> Result<(&str, &str), HostPortError> {
    if text.starts_with('[') {
        if let Some(close) = text.find(']') {
            let host = text.get(..=close).unwrap_or(text);
            let rest = text.get(close + 1..).unwrap_or("");
            if let Some(port) = rest.strip_prefix(':') {
                return Ok((host, port));
            }
        }
        return Err(HostPortError::NoPort);
    }
    match text.rsplit_once(':') {
        Some((h, _)) if h.contains(':') => Err(HostPortError::UnbracketedIpv6),
        Some((h, p)) => Ok((h, p)),
        None => Err(HostPortError::NoPort),
    }
}

/// A URI authority or `Host` value, `HOST[:PORT]`, into the host (IPv6
/// brackets kept) and the port, `default_port` when none is written. The
/// port is 1 to 5 ASCII digits no larger than 65535; an unbracketed IPv6
/// address, text after a bracketed host other than `:PORT`, and an empty
/// port are refused (`None`).
///
/// ```
/// use gatehouse::normalize::split_authority;
/// assert_eq!(split_authority("a.test:8080", 80), Some(("a.test", 8080)));
/// assert_eq!(split_authority("a.test", 80), Some(("a.test", 80)));
/// assert_eq!(split_authority("[::1]", 443), Some(("[::1]", 443)));
/// assert_eq!(split_authority("a.test:+80", 80), None);
/// assert_eq!(split_authority("::1", 80), None);
/// ```
pub fn split_authority(text: &str, default_port: u16) -> Option<(&str, u16)> {
    match split_host_port(text) {
        Ok((host, port)) => {
            let digits =
                !port.is_empty() && port.len() <= 5 && port.bytes().all(|c| c.is_ascii_digit());
            digits
                .then(|| port.parse().ok())
                .flatten()
                .map(|p| (host, p))
        }
        Err(HostPortError::NoPort) => {
            if text.starts_with('[') {
                // `[v6]` alone: the only `]` is the last byte.
                (text.find(']') == Some(text.len() - 1)).then_some((text, default_port))
            } else {
                Some((text, default_port))
            }
        }
        Err(HostPortError::UnbracketedIpv6) => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splitting() {
        assert_eq!(split_host_port("a.b:443"), Ok(("a.b", "443")));
        assert_eq!(split_host_port("[::1]:443"), Ok(("[::1]", "443")));
        assert_eq!(
            split_host_port("::1:443"),
            Err(HostPortError::UnbracketedIpv6)
        );
        assert_eq!(split_host_port("a.b"), Err(HostPortError::NoPort));
        assert_eq!(split_host_port("[::1]x"), Err(HostPortError::NoPort));
        assert_eq!(split_authority("[::1]:8080", 80), Some(("[::1]", 8080)));
        assert_eq!(split_authority("[::1]x", 80), None);
        assert_eq!(split_authority("[::1]]", 80), None);
        assert_eq!(split_authority("a:b", 80), None);
        assert_eq!(split_authority("a:", 80), None);
        assert_eq!(split_authority("a:65536", 80), None);
        assert_eq!(split_authority("a:000080", 80), None);
        assert_eq!(split_authority("a:080", 1), Some(("a", 80)));
    }
}
