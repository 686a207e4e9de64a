//! Lexical helpers: spans widened to their keyword, port ranges, string
//! escapes.

use super::*;

/// Moves a keyword-valued statement's span to start at its keyword.
pub(super) fn widen<T>(v: Spanned<T>, keyword: Span) -> Spanned<T> {
    Spanned {
        span: keyword.to(v.span),
        node: v.node,
    }
}

/// `443` or `8000-8999`, each from 1 to 65535.
pub(crate) fn parse_port_range(text: &str) -> Result<PortRange, (String, Option<String>)> {
    let one = |s: &str| -> Result<u16, (String, Option<String>)> {
        match s.parse::<u32>() {
            Ok(0) => Err((
                "port `0` is never a destination".into(),
                Some("ports run from 1 to 65535".into()),
            )),
            Ok(n) if n <= 65535 && !(s.len() > 1 && s.starts_with('0')) => Ok(n as u16),
            Ok(n) if n <= 65535 => Err((
                format!("port `{s}` has a leading zero"),
                Some(format!("write `{n}`")),
            )),
            _ => Err((
                format!("port `{s}` is out of range"),
                Some("ports run from 1 to 65535".into()),
            )),
        }
    };
    match text.split_once('-') {
        None => one(text).map(|p| PortRange { lo: p, hi: p }),
        Some((a, b)) => {
            let (lo, hi) = (one(a)?, one(b)?);
            if lo > hi {
                Err((
                    format!("port range `{text}` is reversed"),
                    Some(format!("did you mean `{hi}-{lo}`?")),
                ))
            } else {
                Ok(PortRange { lo, hi })
            }
        }
    }
}

/// Resolves the escapes of a double-quoted string.
pub(super) fn unescape(text: &str) -> Result<String, String> {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('"') => out.push('"'),
            Some('\\') => out.push('\\'),
            Some('n') => out.push('\n'),
            Some('t') => out.push('\t'),
            Some('u') => {
                let rest: String = chars.by_ref().take_while(|c| *c != '}').collect();
                let hex = rest.trim_start_matches('{');
                match u32::from_str_radix(hex, 16).ok().and_then(char::from_u32) {
                    Some(ch) => out.push(ch),
                    None => return Err(format!("`\\u{{{hex}}}` is not a Unicode scalar value")),
                }
            }
            other => {
                return Err(format!(
                    "unknown escape `\\{}`",
                    other.map(String::from).unwrap_or_default()
                ));
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ports_are_checked() {
        assert_eq!(parse_port_range("443"), Ok(PortRange { lo: 443, hi: 443 }));
        assert_eq!(parse_port_range("80-90"), Ok(PortRange { lo: 80, hi: 90 }));
        assert!(parse_port_range("0").is_err());
        assert!(parse_port_range("70000").is_err());
        assert!(parse_port_range("9-3").is_err());
        assert!(parse_port_range("080").is_err());
    }

    #[test]
    fn host_port_splitting() {
        use super::super::query::split_host_port;
        assert_eq!(split_host_port("a.b:443"), Ok(("a.b", "443")));
        assert_eq!(split_host_port("[::1]:443"), Ok(("[::1]", "443")));
        assert!(split_host_port("::1:443").is_err());
        assert!(split_host_port("a.b").is_err());
    }

    #[test]
    fn escapes() {
        assert_eq!(unescape(r#"a\"b\\c\n\u{e9}"#), Ok("a\"b\\c\né".to_string()));
        assert!(unescape(r"\q").is_err());
        assert!(unescape(r"\u{d800}").is_err());
    }
}
