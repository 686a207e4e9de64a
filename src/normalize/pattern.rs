//! Domain patterns of `allow|deny domain` (docs/language.md#network), normalised
//! exactly like query hosts.

use super::host::{HostError, OwnedHost, normalize_host_owned};

/// A normalised domain pattern.
#[derive(
    Clone, Debug, Eq, PartialEq, Hash, Ord, PartialOrd, serde::Serialize, serde::Deserialize,
)]
pub enum DomainPattern {
    /// `example.com`: that name only.
    Exact(String),
    /// `*.example.com`: strict subdomains at any depth.
    Sub(String),
    /// `**.example.com`: the name and every subdomain.
    SelfAndSub(String),
    /// `*`: every host.
    Any,
}

/// Why a pattern was refused.
#[derive(Clone, Debug, Eq, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum PatternError {
    /// A `*` anywhere but a whole first label.
    #[error("`{pattern}` has a wildcard where none is allowed")]
    BadWildcard {
        /// The pattern as written.
        pattern: String,
        /// The pattern that was probably meant.
        suggestion: Option<String>,
    },
    /// Not a host name.
    #[error("`{pattern}` is not a valid domain pattern")]
    Invalid {
        /// The pattern as written.
        pattern: String,
        /// Why the name is not one.
        why: HostError,
    },
    /// An address or a CIDR where a domain belongs.
    #[error("`{pattern}` is an address, not a domain")]
    Address {
        /// The pattern as written.
        pattern: String,
        /// Whether it is a CIDR rather than one address.
        cidr: bool,
    },
}

impl DomainPattern {
    /// Parses and normalises a pattern as written in a rule.
    pub fn parse(text: &str) -> Result<DomainPattern, PatternError> {
        if text == "*" {
            return Ok(DomainPattern::Any);
        }
        let (kind, rest): (fn(String) -> DomainPattern, &str) =
            if let Some(r) = text.strip_prefix("**.") {
                (DomainPattern::SelfAndSub, r)
            } else if let Some(r) = text.strip_prefix("*.") {
                (DomainPattern::Sub, r)
            } else {
                (DomainPattern::Exact, text)
            };
        if rest.contains('*') {
            return Err(PatternError::BadWildcard {
                pattern: text.to_string(),
                suggestion: suggest_wildcard(text),
            });
        }
        if text.contains('/') && text.parse::<ipnet::IpNet>().is_ok() {
            return Err(PatternError::Address {
                pattern: text.to_string(),
                cidr: true,
            });
        }
        match normalize_host_owned(rest) {
            Ok(OwnedHost::Name(n)) => Ok(kind(n)),
            Ok(OwnedHost::Ip(_)) => Err(PatternError::Address {
                pattern: text.to_string(),
                cidr: false,
            }),
            Err(why) => Err(PatternError::Invalid {
                pattern: text.to_string(),
                why,
            }),
        }
    }

    /// Whether this pattern matches a normalised name.
    pub fn matches_name(&self, name: &str) -> bool {
        match self {
            DomainPattern::Exact(n) => name == n,
            DomainPattern::Sub(n) => is_strict_subdomain(name, n),
            DomainPattern::SelfAndSub(n) => name == n || is_strict_subdomain(name, n),
            DomainPattern::Any => true,
        }
    }

    /// Whether every name this pattern matches is matched by `other` too.
    pub fn covered_by(&self, other: &DomainPattern) -> bool {
        use DomainPattern::*;
        match (self, other) {
            (_, Any) => true,
            (Any, _) => false,
            (Exact(a), o) => o.matches_name(a),
            // A pattern covers itself: `*.x` covers `*.x` and every `*.`/`**.`
            // pattern strictly under x, but not `**.x` (x itself).
            (Sub(a), Sub(b)) | (Sub(a), SelfAndSub(b)) | (SelfAndSub(a), SelfAndSub(b)) => {
                a == b || is_strict_subdomain(a, b)
            }
            (SelfAndSub(a), Sub(b)) => is_strict_subdomain(a, b),
            (Sub(_) | SelfAndSub(_), Exact(_)) => false,
        }
    }

    /// The pattern in policy text.
    pub fn text(&self) -> String {
        match self {
            DomainPattern::Exact(n) => n.clone(),
            DomainPattern::Sub(n) => format!("*.{n}"),
            DomainPattern::SelfAndSub(n) => format!("**.{n}"),
            DomainPattern::Any => "*".to_string(),
        }
    }
}

/// `a.b.example.com` is a strict subdomain of `example.com`.
pub fn is_strict_subdomain(name: &str, parent: &str) -> bool {
    name.len() > parent.len() + 1
        && name.ends_with(parent)
        && name.as_bytes().get(name.len() - parent.len() - 1) == Some(&b'.')
}

fn suggest_wildcard(text: &str) -> Option<String> {
    // `*example.com` → `*.example.com`; `api.*.com` and the like have no
    // obvious meaning, so only the general form is suggested.
    if let Some(rest) = text.strip_prefix('*') {
        let rest = rest.trim_start_matches('*').trim_start_matches('.');
        if !rest.is_empty() && !rest.contains('*') {
            return Some(format!(
                "`*.{rest}` (subdomains only) or `**.{rest}` (the name and its subdomains)"
            ));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> DomainPattern {
        DomainPattern::parse(s).unwrap_or(DomainPattern::Exact("<error>".into()))
    }

    #[test]
    fn the_spec_table() {
        assert!(p("example.com").matches_name("example.com"));
        assert!(!p("example.com").matches_name("a.example.com"));
        assert!(p("*.example.com").matches_name("a.b.example.com"));
        assert!(!p("*.example.com").matches_name("example.com"));
        assert!(!p("*.example.com").matches_name("badexample.com"));
        assert!(p("**.example.com").matches_name("example.com"));
        assert!(p("**.example.com").matches_name("a.example.com"));
        assert_eq!(p("*.GitHub.COM."), DomainPattern::Sub("github.com".into()));
    }

    #[test]
    fn bad_patterns() {
        for s in [
            "ex*ample.com",
            "api.*.com",
            "*example.com",
            "*.*.example.com",
            "***.x",
        ] {
            assert!(
                matches!(
                    DomainPattern::parse(s),
                    Err(PatternError::BadWildcard { .. })
                ),
                "{s}"
            );
        }
        assert!(matches!(
            DomainPattern::parse("10.0.0.1"),
            Err(PatternError::Address { .. })
        ));
        assert!(matches!(
            DomainPattern::parse("10.0.0.0/8"),
            Err(PatternError::Address { cidr: true, .. })
        ));
        assert!(matches!(
            DomainPattern::parse("a..b"),
            Err(PatternError::Invalid { .. })
        ));
    }

    #[test]
    fn coverage() {
        assert!(p("a.example.com").covered_by(&p("*.example.com")));
        assert!(!p("example.com").covered_by(&p("*.example.com")));
        assert!(p("example.com").covered_by(&p("**.example.com")));
        assert!(p("*.example.com").covered_by(&p("**.example.com")));
        assert!(!p("**.example.com").covered_by(&p("*.example.com")));
        assert!(p("**.a.example.com").covered_by(&p("*.example.com")));
        assert!(p("*").covered_by(&p("*")));
        assert!(!p("*").covered_by(&p("**.com")));
        // A pattern covers itself, in every form (docs/language.md#requirements).
        for s in ["x.com", "*.x.com", "**.x.com", "*"] {
            assert!(p(s).covered_by(&p(s)), "{s}");
        }
    }

    /// The whole coverage matrix against its meaning: `a` is covered by `b`
    /// exactly when every name `a` matches, `b` matches too. Names are drawn
    /// from every label sequence up to one level deeper than any pattern, so
    /// each pattern has names it matches and names it does not.
    #[test]
    fn coverage_matrix_is_set_inclusion() {
        let labels = ["a", "b", "x", "y", "c"];
        let mut names: Vec<String> = Vec::new();
        let mut layer: Vec<String> = labels.iter().map(|l| l.to_string()).collect();
        for _ in 0..4 {
            names.extend(layer.iter().cloned());
            layer = layer
                .iter()
                .flat_map(|n| labels.iter().map(move |l| format!("{l}.{n}")))
                .collect();
        }
        let mut patterns = vec![DomainPattern::Any];
        for base in ["x", "a.x", "b.a.x", "y", "a.y"] {
            patterns.push(DomainPattern::Exact(base.into()));
            patterns.push(DomainPattern::Sub(base.into()));
            patterns.push(DomainPattern::SelfAndSub(base.into()));
        }
        for a in &patterns {
            for b in &patterns {
                let meaning = names
                    .iter()
                    .all(|n| !a.matches_name(n) || b.matches_name(n));
                assert_eq!(
                    a.covered_by(b),
                    meaning,
                    "`{}` covered by `{}`",
                    a.text(),
                    b.text()
                );
            }
        }
    }
}
