//! `review` compared for every action but a shell wrapper's script, when
//! neither guardian has a regular expression (docs/diff.md#review).
//!
//! A verdict looks at the assessment and at which `risk` and `deny` rules
//! match the action; and of those only at the highest matching risk rule,
//! the first in order, the set of their categories and the first
//! matching deny rule — a *summary*, and the summary of two sets of rules
//! together is a function of the two summaries. What matches:
//!
//! - a `connect`/`dns` target: the host patterns, one name or address of
//!   each class the patterns tell apart (`cells.rs`);
//! - an MCP call: its server and tool, each named or not;
//! - a `write`: its path, one of each class of words (`words.rs`);
//! - a command line (not shaped `PROGRAM -c|-lc SCRIPT`): the prefix
//!   rules, on its first words, and the path rules, on each path-like
//!   word. The first words are walked on a trie of both sides' prefix
//!   rules (a program also by its basename, one word of each class that
//!   ends in a rule's program); past the longest rule, any path-like word
//!   may follow, so the summaries reachable by adding words are closed
//!   under adding each class's word.
//!
//! Every pair of summaries an action can make is made by one of these
//! actions; each is reviewed under every assessment the guardian tells
//! apart, on both sides. A region is every review whose two decisions
//! have the same outcome, reason and escalation on each side (as for
//! `resolved`). A wrapper's script is an infinite language: those reviews
//! are [`Kind::ReviewScript`], sampled.

use std::collections::{BTreeSet, HashMap, VecDeque};

use crate::compile::Policy;
use crate::compile::guardian::GMatcher;
use crate::decision::RuleId;
use crate::query::{Annotations, Query, Via};
use crate::vocab::RiskCategory;

use super::cells::Atoms;
use super::prove::{SAMPLE_HOME, SAMPLE_WORKSPACE};
use super::{Cell, Key, Kind, Region, change};

/// At most this many prefixes of command lines are walked...
const MAX_PREFIXES: usize = 20_000;
/// ...and this many pairs of summaries.
const MAX_SUMMARIES: usize = 20_000;

/// The pairs of decisions of the regions, by cell item.
pub(crate) type Pairs = Vec<(Key, Key)>;

/// What a verdict looks at in the rules an action matches.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
struct Summary {
    /// The matching risk rule of the highest level (the earliest of it).
    top: Option<usize>,
    /// The first matching risk rule.
    first: Option<usize>,
    /// The matching risk rules' categories, one bit each.
    categories: u8,
    /// The first matching deny rule.
    deny: Option<RuleId>,
}

fn summary(p: &Policy, action: &Query) -> Summary {
    let g = &p.agent.guardian;
    let (risks, denies) = p.guardian_hits(action);
    let hits: Vec<usize> = risks
        .iter()
        .enumerate()
        .filter(|(_, h)| **h)
        .map(|(i, _)| i)
        .collect();
    let top = hits
        .iter()
        .copied()
        .filter_map(|i| g.risks.get(i).map(|r| (i, r)))
        .max_by_key(|(_, r)| (r.level, std::cmp::Reverse(r.rule)))
        .map(|(i, _)| i);
    let categories = hits
        .iter()
        .filter_map(|i| g.risks.get(*i))
        .filter_map(|r| RiskCategory::ALL.iter().position(|c| *c == r.category))
        .fold(0u8, |acc, i| acc | (1u8 << (i % 8)));
    let deny = g
        .deny_actions
        .iter()
        .zip(&denies)
        .filter(|(_, h)| **h)
        .map(|((_, r), _)| *r)
        .min();
    Summary {
        top,
        first: hits.first().copied(),
        categories,
        deny,
    }
}

/// Both guardians' matchers, gathered.
#[derive(Default)]
struct Matchers {
    prefixes: Vec<Vec<Vec<String>>>,
    globs: BTreeSet<Vec<String>>,
    hosts: BTreeSet<String>,
    servers: BTreeSet<String>,
    tools: BTreeSet<String>,
}

impl Matchers {
    /// `None` when a guardian has a regular expression.
    fn of(sides: [&Policy; 2]) -> Option<Matchers> {
        let mut m = Matchers::default();
        for p in sides {
            let g = &p.agent.guardian;
            let all = g
                .risks
                .iter()
                .map(|r| &r.matcher)
                .chain(g.deny_actions.iter().map(|(m, _)| m));
            for matcher in all {
                match matcher {
                    GMatcher::Regex(_) => return None,
                    GMatcher::Prefix(words) => m.prefixes.push(words.clone()),
                    GMatcher::Path(globs) => {
                        m.globs.extend(globs.iter().map(|g| g.segments().to_vec()));
                    }
                    GMatcher::Host(pats) => m.hosts.extend(pats.iter().map(|p| p.text())),
                    GMatcher::Tool(pairs) => {
                        for (s, t) in pairs {
                            m.servers.insert(s.clone());
                            m.tools.insert(t.clone());
                        }
                    }
                }
            }
        }
        m.prefixes.retain(|p| !p.is_empty());
        Some(m)
    }
}

/// The `review` regions of two policies and, per region (its cell's
/// item), the pair of decisions it holds; `None` when reviews are
/// sampled (a regular expression, or past the bounds).
pub(crate) fn regions(a: &Policy, b: &Policy) -> Option<(Vec<Region>, Pairs)> {
    let actions = actions(a, b)?;
    let mut found: Vec<(Key, Key)> = Vec::new();
    let mut out = Vec::new();
    for action in actions {
        for assessment in super::sampled::assessments() {
            let witness = Query::Review {
                action: Box::new(action.clone()),
                assessment,
            };
            let (old, new) = (a.decide(&witness), b.decide(&witness));
            let key = (Key::of(&old), Key::of(&new));
            let Some(ch) = change(&key.0, &key.1) else {
                continue;
            };
            if found.contains(&key) {
                continue;
            }
            out.push(Region {
                kind: Kind::Review,
                change: ch,
                description: format!("{witness} and every review decided alike"),
                witness,
                old,
                new,
                sampled: false,
                cells: vec![Cell::item(Kind::Review, found.len())],
            });
            found.push(key);
        }
    }
    Some((out, found))
}

/// One action of each pair of summaries an action (but a wrapper) can
/// make on the two sides.
fn actions(a: &Policy, b: &Policy) -> Option<Vec<Query>> {
    let m = Matchers::of([a, b])?;
    let globs: Vec<Vec<String>> = m.globs.iter().cloned().collect();
    let names: Vec<String> = m
        .prefixes
        .iter()
        .filter_map(|p| p.first())
        .flatten()
        .cloned()
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    let words = super::words::classes(&globs, &names)?;
    let mut actions: Vec<Query> = Vec::new();
    actions.extend(host_actions(&m));
    actions.extend(tool_actions(&m));
    let mut by_globs = BTreeSet::new();
    for w in &words {
        if by_globs.insert(w.globs.clone()) {
            actions.push(Query::Write {
                path: w.text.clone(),
                workspace: Some(SAMPLE_WORKSPACE.into()),
                home: Some(SAMPLE_HOME.into()),
            });
        }
    }
    actions.extend(command_lines(&m, &words, a, b)?);
    // One action per pair of summaries.
    let mut seen = std::collections::HashSet::new();
    actions.retain(|q| seen.insert((summary(a, q), summary(b, q))));
    Some(actions)
}

/// One target of each class of names and addresses the host patterns
/// tell apart.
fn host_actions(m: &Matchers) -> Vec<Query> {
    let rules: Vec<String> = m
        .hosts
        .iter()
        .map(|h| format!("allow domain {}", crate::query::quote_string(h)))
        .collect();
    let text = format!(
        "policy gh-review {{\n  network {{\n    {}\n  }}\n}}\n",
        rules.join("\n    ")
    );
    let (file, diags) = crate::syntax::parse_file(crate::source::FileId(0), &text);
    let hosts: Vec<String> = if diags.is_empty() && !rules.is_empty() {
        let atoms = Atoms::of(&[std::slice::from_ref(&file)]);
        atoms.host_classes().into_iter().map(|(_, h)| h).collect()
    } else {
        vec!["example.com".into()]
    };
    hosts
        .into_iter()
        .map(|host| Query::Connect {
            host,
            port: 443,
            via: Via::Https,
        })
        .collect()
}

/// A name none of `taken` is.
fn fresh(stem: &str, taken: &BTreeSet<String>) -> String {
    (0..)
        .map(|k| {
            if k == 0 {
                stem.to_string()
            } else {
                format!("{stem}{k}")
            }
        })
        .find(|n| !taken.contains(n))
        .unwrap_or_else(|| stem.to_string())
}

/// Each server named and one not, with each tool named and one not.
fn tool_actions(m: &Matchers) -> Vec<Query> {
    let servers: Vec<String> = m
        .servers
        .iter()
        .filter(|s| *s != "*")
        .cloned()
        .chain([fresh("gh-server", &m.servers)])
        .collect();
    let tools: Vec<String> = m
        .tools
        .iter()
        .filter(|t| *t != "*")
        .cloned()
        .chain([fresh("gh-tool", &m.tools)])
        .collect();
    let mut out = Vec::new();
    for s in &servers {
        for t in &tools {
            out.push(Query::Mcp {
                server: s.clone(),
                tool: t.clone(),
                annotations: Annotations::default(),
            });
        }
    }
    out
}

/// Command lines making every pair of summaries a command line (not a
/// wrapper) can make.
fn command_lines(
    m: &Matchers,
    words: &[super::words::Word],
    a: &Policy,
    b: &Policy,
) -> Option<Vec<Query>> {
    let taken: BTreeSet<String> = m.prefixes.iter().flatten().flatten().cloned().collect();
    let pad = fresh("gh-word", &taken);
    let longest = m.prefixes.iter().map(Vec::len).max().unwrap_or(0);
    // Past every rule's words, and never a wrapper's shape.
    let width = longest.max(3) + 1;
    // The trie: each prefix of words the rules' words can make.
    let programs: BTreeSet<String> = m
        .prefixes
        .iter()
        .filter_map(|p| p.first())
        .flatten()
        .cloned()
        .chain(words.iter().filter(|w| w.program).map(|w| w.text.clone()))
        .collect();
    let mut starts: Vec<Vec<String>> = vec![Vec::new()];
    let mut stack: Vec<(Vec<String>, Vec<usize>)> = Vec::new();
    for w in programs {
        let base = crate::normalize::path::basename(&w);
        let alive: Vec<usize> = (0..m.prefixes.len())
            .filter(|&i| {
                m.prefixes
                    .get(i)
                    .and_then(|p| p.first())
                    .is_some_and(|alts| alts.iter().any(|x| *x == w || x == base))
            })
            .collect();
        stack.push((vec![w], alive));
    }
    while let Some((argv, alive)) = stack.pop() {
        let d = argv.len();
        let next: BTreeSet<&String> = alive
            .iter()
            .filter_map(|&i| m.prefixes.get(i).and_then(|p| p.get(d)))
            .flatten()
            .collect();
        for c in next {
            let alive2 = alive
                .iter()
                .copied()
                .filter(|&i| {
                    m.prefixes
                        .get(i)
                        .and_then(|p| p.get(d))
                        .is_some_and(|alts| alts.contains(c))
                })
                .collect();
            let mut longer = argv.clone();
            longer.push(c.clone());
            stack.push((longer, alive2));
        }
        starts.push(argv);
        if starts.len() > MAX_PREFIXES {
            return None;
        }
    }
    // Every union of the start's rules with the path rules of words that
    // follow: closed under adding each class's word.
    let mut tails: Vec<&str> = Vec::new();
    let mut tail_globs = BTreeSet::new();
    for w in words {
        if w.pathlike && w.globs.iter().any(|g| *g) && tail_globs.insert(w.globs.clone()) {
            tails.push(&w.text);
        }
    }
    let exec = |argv: Vec<String>| Query::Exec {
        argv,
        escalate: false,
    };
    let mut seen: HashMap<(Summary, Summary), ()> = HashMap::new();
    let mut queue: VecDeque<Vec<String>> = VecDeque::new();
    let mut out = Vec::new();
    for mut argv in starts {
        while argv.len() < width {
            argv.push(pad.clone());
        }
        let q = exec(argv.clone());
        if seen.insert((summary(a, &q), summary(b, &q)), ()).is_none() {
            queue.push_back(argv);
            out.push(q);
        }
    }
    while let Some(argv) = queue.pop_front() {
        for t in &tails {
            let mut longer = argv.clone();
            longer.push((*t).to_string());
            let q = exec(longer.clone());
            if seen.insert((summary(a, &q), summary(b, &q)), ()).is_none() {
                if seen.len() > MAX_SUMMARIES {
                    return None;
                }
                queue.push_back(longer);
                out.push(q);
            }
        }
    }
    Some(out)
}

/// The region item a review's pair of decisions lies in, if any.
pub(crate) fn item_of(
    found: &[(Key, Key)],
    old: &crate::decision::Decision,
    new: &crate::decision::Decision,
) -> Option<usize> {
    let key = (Key::of(old), Key::of(new));
    found.iter().position(|k| *k == key)
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]
mod tests {
    use super::*;
    use crate::PolicySet;

    fn policy(rules: &str) -> PolicySet {
        PolicySet::from_source(
            "p.policy",
            &format!("policy p {{\n  guardian {{\n{rules}\n  }}\n}}\n"),
        )
        .unwrap()
    }

    /// Every command line of words around the rules makes a pair of
    /// summaries some action found makes: where one side's prefix rule
    /// and the other's path rule both match, the pair is made only by a
    /// line with both (the closure under adding words).
    #[test]
    fn every_pair_of_summaries_is_made() {
        let a = policy(
            "    risk high destructive command deploy [prod staging]\n    risk low credential_probing path \"**/.ssh/**\"\n    deny command /usr/bin/rm -rf",
        );
        let b = policy(
            "    risk critical exfiltration path \"~/.aws/*\" \"*.pem\"\n    deny path \"/etc/*\"\n    risk medium destructive command rm",
        );
        let (a, b) = (a.single().unwrap(), b.single().unwrap());
        let found: std::collections::HashSet<(Summary, Summary)> = actions(a, b)
            .unwrap()
            .iter()
            .map(|q| (summary(a, q), summary(b, q)))
            .collect();
        let words = [
            "deploy",
            "prod",
            "staging",
            "rm",
            "/usr/bin/rm",
            "/bin/rm",
            "./rm",
            "-rf",
            "x",
            "~/.ssh/id",
            "~/.aws/k",
            "~/.aws/x/..",
            "k.pem",
            "/etc/passwd",
            "/etc/x/../y",
            "~/.ssh/../.aws/c",
            "/usr/bin/deploy",
        ];
        // Every command line of one to four of these words.
        let mut argvs: Vec<Vec<String>> = Vec::new();
        let mut layer: Vec<Vec<String>> = vec![Vec::new()];
        for _ in 0..4 {
            layer = layer
                .iter()
                .flat_map(|argv| {
                    words.iter().map(move |w| {
                        let mut longer = argv.clone();
                        longer.push(w.to_string());
                        longer
                    })
                })
                .collect();
            argvs.extend(layer.iter().cloned());
        }
        let mut checked = 0;
        for argv in argvs {
            let q = Query::Exec {
                argv,
                escalate: false,
            };
            if Kind::of(&Query::Review {
                action: Box::new(q.clone()),
                assessment: Default::default(),
            }) != Kind::Review
            {
                continue;
            }
            checked += 1;
            assert!(found.contains(&(summary(a, &q), summary(b, &q))), "{q}");
        }
        assert!(checked > 50_000, "{checked}");
    }
}
