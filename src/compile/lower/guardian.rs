//! `guardian`: risk rules, deny rules, levels and the regex automaton.

use super::super::*;

impl Compiler<'_> {
    pub(in crate::compile) fn guardian(
        &mut self,
        stmts: &[GuardianStmt],
    ) -> Result<guardian::Guardian, Inconsistency> {
        use guardian::{GMatcher, Glob, RiskRule};
        let mut g = guardian::Guardian::default();
        let mut patterns: Vec<String> = Vec::new();
        let mut matcher = |m: &Matcher| -> Result<GMatcher, Inconsistency> {
            Ok(match m {
                Matcher::CommandRegex(s) => {
                    patterns.push(s.value.clone());
                    GMatcher::Regex(patterns.len() - 1)
                }
                Matcher::CommandPrefix(words) => {
                    GMatcher::Prefix(words.iter().map(|w| w.alternatives.clone()).collect())
                }
                Matcher::Path(v) => GMatcher::Path(v.iter().map(|p| Glob::new(&p.node)).collect()),
                Matcher::Host(v) => GMatcher::Host(
                    v.iter()
                        .map(|p| DomainPattern::parse(&p.node).map_err(Inconsistency::from))
                        .collect::<Result<_, _>>()?,
                ),
                Matcher::Tool(v) => GMatcher::Tool(
                    v.iter()
                        .map(|t| {
                            t.node
                                .split_once('/')
                                .map(|(a, b)| (a.to_string(), b.to_string()))
                                .ok_or(Inconsistency::Table("a tool pattern without `/`"))
                        })
                        .collect::<Result<_, _>>()?,
                ),
            })
        };
        for st in stmts {
            match st {
                GuardianStmt::Risk {
                    level,
                    category,
                    matcher: m,
                    span,
                } => {
                    let rule = self.rule(*span);
                    g.risks.push(RiskRule {
                        level: level.node,
                        category: category.node,
                        matcher: matcher(m)?,
                        rule,
                    });
                }
                GuardianStmt::DenyCategory { category, span } => {
                    g.deny_categories.push((category.node, self.rule(*span)))
                }
                GuardianStmt::DenyAction { matcher: m, span } => {
                    let rule = self.rule(*span);
                    g.deny_actions.push((matcher(m)?, rule));
                }
                GuardianStmt::Allow { levels, span } => {
                    // Closed downwards (docs/language.md#guardian): `allow medium` lets low
                    // through too, so raising a level never turns a denial
                    // into an approval.
                    let top = levels.iter().map(|l| l.node).max();
                    g.allow = [RiskLevel::Low, RiskLevel::Medium]
                        .into_iter()
                        .filter(|l| top.is_some_and(|t| *l <= t))
                        .collect();
                    g.allow_rule = Some(self.rule(*span));
                }
                GuardianStmt::Authorize { with, span, .. } => {
                    g.authorize = with.node;
                    g.authorize_rule = Some(self.rule(*span));
                }
            }
        }
        guardian::build_regex(&patterns, self.limits.regex_bytes())
            .map_err(|e| Inconsistency::Regex(e.to_string()))?;
        g.regex = guardian::RegexSet::from(patterns);
        Ok(g)
    }
}
