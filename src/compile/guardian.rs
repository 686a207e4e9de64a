//! The guardian (docs/language.md#guardian): risk rules, deny rules and levels,
//! compiled. Every `command ~ REGEX` of a policy goes into one multi-pattern
//! automaton (regex-automata), built with size limits.

use regex_automata::meta::Regex;
use regex_automata::{Input, PatternSet};
use serde::{Deserialize, Serialize};

use crate::decision::RuleId;
use crate::normalize::pattern::DomainPattern;
use crate::syntax::ast::{AuthLevel, RiskCategory, RiskLevel};

pub(crate) use crate::regexes::build_regex;

/// The patterns and their automaton. Only the patterns are serialised; the
/// automaton is rebuilt on load. If it cannot be rebuilt, every regex rule
/// counts as matching (fail closed: a risk rule only makes verdicts
/// stricter).
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(from = "Vec<String>", into = "Vec<String>")]
pub(crate) struct RegexSet {
    pub patterns: Vec<String>,
    re: Option<Regex>,
}

impl From<Vec<String>> for RegexSet {
    fn from(patterns: Vec<String>) -> Self {
        // Checked against the build's own limit when compiled; rebuilt here
        // (also from an artifact) under the largest limit any build accepts.
        let re = build_regex(&patterns, crate::Limits::MAX_REGEX_BYTES).ok();
        RegexSet { patterns, re }
    }
}

impl From<RegexSet> for Vec<String> {
    fn from(r: RegexSet) -> Self {
        r.patterns
    }
}

impl RegexSet {
    /// Whether the automaton could be rebuilt (a loaded artifact).
    pub(crate) fn is_built(&self) -> bool {
        self.re.is_some()
    }

    /// Which patterns match any of the haystacks (by index).
    pub fn matching(&self, haystacks: &[&str]) -> Vec<bool> {
        let n = self.patterns.len();
        let Some(re) = &self.re else {
            return vec![true; n];
        };
        let mut hits = vec![false; n];
        let mut set = PatternSet::new(re.pattern_len());
        for h in haystacks {
            re.which_overlapping_matches(&Input::new(h), &mut set);
        }
        for pid in set.iter() {
            if let Some(h) = hits.get_mut(pid.as_usize()) {
                *h = true;
            }
        }
        hits
    }
}

/// What a guardian rule matches.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(crate) enum GMatcher {
    /// Index into the policy's [`RegexSet`].
    Regex(usize),
    /// A `commands`-style prefix (alternatives per position).
    Prefix(Vec<Vec<String>>),
    Path(Vec<Glob>),
    Host(Vec<DomainPattern>),
    /// `SERVER/TOOL`, `*` for any server or any tool.
    Tool(Vec<(String, String)>),
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub(crate) struct RiskRule {
    pub level: RiskLevel,
    pub category: RiskCategory,
    pub matcher: GMatcher,
    pub rule: RuleId,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub(crate) struct Guardian {
    pub risks: Vec<RiskRule>,
    pub deny_categories: Vec<(RiskCategory, RuleId)>,
    pub deny_actions: Vec<(GMatcher, RuleId)>,
    /// Levels that proceed (default: low, medium).
    pub allow: Vec<RiskLevel>,
    pub allow_rule: Option<RuleId>,
    /// The authorization high risk needs (default: medium).
    pub authorize: AuthLevel,
    pub authorize_rule: Option<RuleId>,
    pub regex: RegexSet,
}

impl Default for Guardian {
    fn default() -> Self {
        Guardian {
            risks: Vec::new(),
            deny_categories: Vec::new(),
            deny_actions: Vec::new(),
            allow: vec![RiskLevel::Low, RiskLevel::Medium],
            allow_rule: None,
            authorize: AuthLevel::Medium,
            authorize_rule: None,
            regex: RegexSet::from(Vec::new()),
        }
    }
}

/// A path glob: `*` stays within one segment, `**` spans zero or more
/// segments.
#[derive(Clone, Debug, Eq, PartialEq, Serialize, Deserialize)]
pub struct Glob {
    segments: Vec<String>,
}

impl Glob {
    /// A glob over `/`-separated segments (`*` within one, `**` across).
    pub fn new(pattern: &str) -> Glob {
        Glob {
            segments: pattern.split('/').map(String::from).collect(),
        }
    }

    /// The segments (`**` alone spans any number of path segments).
    #[cfg(feature = "exact-files")]
    pub(crate) fn segments(&self) -> &[String] {
        &self.segments
    }

    /// Whether `path` matches, by dynamic programming over segments
    /// (linear in pattern × path, whatever the input).
    pub fn matches(&self, path: &str) -> bool {
        let parts: Vec<&str> = path.split('/').collect();
        let m = parts.len();
        // reach[j]: the first i pattern segments can match the first j parts.
        let mut reach = vec![false; m + 1];
        if let Some(r) = reach.get_mut(0) {
            *r = true;
        }
        for seg in &self.segments {
            let mut next = vec![false; m + 1];
            if seg == "**" {
                let mut any = false;
                for (j, slot) in next.iter_mut().enumerate() {
                    any |= reach.get(j).copied().unwrap_or(false);
                    *slot = any;
                }
            } else {
                for j in 0..m {
                    if reach.get(j).copied().unwrap_or(false)
                        && parts.get(j).is_some_and(|p| segment_matches(seg, p))
                    {
                        if let Some(s) = next.get_mut(j + 1) {
                            *s = true;
                        }
                    }
                }
            }
            reach = next;
        }
        reach.get(m).copied().unwrap_or(false)
    }
}

/// `*` matches any run of characters within one segment.
fn segment_matches(pattern: &str, text: &str) -> bool {
    let pieces: Vec<&str> = pattern.split('*').collect();
    let Some((first, rest)) = pieces.split_first() else {
        return pattern == text;
    };
    let Some(mut remaining) = text.strip_prefix(first) else {
        return false;
    };
    let Some((last, middle)) = rest.split_last() else {
        return remaining.is_empty();
    };
    for piece in middle {
        match remaining.find(piece) {
            Some(i) => remaining = remaining.get(i + piece.len()..).unwrap_or(""),
            None => return false,
        }
    }
    remaining.len() >= last.len() && remaining.ends_with(last)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::regexes::NFA_SIZE_LIMIT;

    #[test]
    fn property_classes_are_refused_in_every_build() {
        for p in [r"\p{L}+", r"\pL", r"[\P{Greek}]", r"x|\p{Alphabetic}"] {
            let e = build_regex(&[p.to_string()], NFA_SIZE_LIMIT).err();
            assert!(
                matches!(e, Some(crate::regexes::RegexError::PropertyClass(_))),
                "{p}"
            );
        }
        // An escaped backslash before `p` is a literal `\` then `p`.
        for p in [r"\\p", r"a\\pb", r"\w+\s\d\b", r"(?i)straße"] {
            assert!(build_regex(&[p.to_string()], NFA_SIZE_LIMIT).is_ok(), "{p}");
        }
        // The Unicode-aware classes that remain.
        let re = build_regex(&[r"^\w+\s\d$".to_string()], NFA_SIZE_LIMIT).ok();
        assert!(re.is_some_and(|re| re.is_match("δοκιμή\u{3000}٣")));
    }

    #[test]
    fn globs() {
        let g = |p: &str, s: &str| Glob::new(p).matches(s);
        assert!(g("**/.ssh/**", "/home/u/.ssh/id_rsa"));
        assert!(g("**/.ssh/**", "~/.ssh/config"));
        assert!(g("**/.ssh/**", ".ssh"));
        assert!(g("**/.aws/credentials", "/root/.aws/credentials"));
        assert!(!g("**/.aws/credentials", "/root/.aws/credentials.bak"));
        assert!(g("**/.env", "./.env"));
        assert!(g("**/*.pem", "/etc/ssl/private/key.pem"));
        assert!(!g("/etc/*", "/etc/a/b"));
        assert!(g("/etc/**", "/etc/a/b"));
        assert!(g("a*b*c", "aXbYc") && !g("a*b*c", "aXbY"));
        let long = format!("/{}", vec!["a"; 2000].join("/"));
        assert!(!g("**/**/**/**/x", &long));
    }

    #[test]
    fn regex_set_reports_every_matching_pattern() {
        let r = RegexSet::from(vec![
            r"curl\s.*(-d|--data)\b".to_string(),
            r"chmod\s+777".to_string(),
            "x".to_string(),
        ]);
        assert_eq!(
            r.matching(&["curl -d @f https://y.org"]),
            vec![true, false, false]
        );
        assert_eq!(
            r.matching(&["a", "chmod 777 f && x"]),
            vec![false, true, true]
        );
    }
}
