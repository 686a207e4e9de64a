//! `policyc prove --equivalent A B` and `--implies A B` (issue 57), on
//! [`gatehouse::diff`]: a diff with no region is a proof of equivalence
//! over the kinds it compares exactly; one with no region that A allows
//! and B does not is a proof that A implies B. A region that breaks the
//! claim gives the counterexample, its witness.

use gatehouse::Build;
use gatehouse::diff::{Diff, Kind, PropertyCase, Region, Verdict as PropVerdict};

use crate::Exit;
use crate::cli::{ProveArgs, ProveFailOn, ProveFormat};
use crate::diff::{coverage_line, decision};

/// What was claimed.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Claim {
    Equivalent,
    Implies,
}

/// One policy's verdict.
struct Verdict<'a> {
    policy: String,
    /// `None`: proved; else why not, and the counterexample region.
    refuted: Option<(String, Option<&'a Region>)>,
}

pub fn run(a: &ProveArgs) -> Exit {
    let (claim, paths) = match (&a.equivalent, &a.implies) {
        (Some(p), None) => (Claim::Equivalent, p),
        (None, Some(p)) => (Claim::Implies, p),
        (None, None) if !a.paths.is_empty() => return properties(a),
        _ => {
            return Exit::Usage(
                "give policy paths whose properties to prove, or one of --equivalent A B and --implies A B"
                    .into(),
            );
        }
    };
    let [pa, pb] = paths.as_slice() else {
        return Exit::Usage("give two paths, A and B".into());
    };
    let load = |p: &String| crate::load::sources(std::slice::from_ref(p), &[]);
    let (old, new) = match (load(pa), load(pb)) {
        (Ok(x), Ok(y)) => (x, y),
        (Err(e), _) | (_, Err(e)) => return e,
    };
    let (old, new, diff) = match crate::diff::compare(old, new, ["A", "B"]) {
        Ok(c) => c,
        Err(e) => return e,
    };
    let verdicts = verdicts(&diff, claim);
    let text = match a.format {
        ProveFormat::Text => text(&verdicts, claim, &old, &new),
        ProveFormat::Json => json(&verdicts, claim, &old, &new),
    };
    out!("{text}");
    let refuted = verdicts.iter().any(|v| v.refuted.is_some());
    // The sampled kinds are never proved exactly.
    let unproved = a.fail_on == Some(ProveFailOn::Unproved) && !Kind::SAMPLED.is_empty();
    if refuted || unproved {
        Exit::Failed
    } else {
        Exit::Ok
    }
}

fn allows(d: &gatehouse::Decision) -> bool {
    matches!(
        d.outcome,
        gatehouse::Outcome::Allow
            | gatehouse::Outcome::Approved
            | gatehouse::Outcome::Live
            | gatehouse::Outcome::Cached
    )
}

fn verdicts(diff: &Diff, claim: Claim) -> Vec<Verdict<'_>> {
    diff.policies
        .iter()
        .map(|p| {
            let refuted = match (p.old, p.new) {
                (true, false) => Some(("only A defines it".to_string(), None)),
                (false, true) if claim == Claim::Equivalent => {
                    Some(("only B defines it".to_string(), None))
                }
                (false, true) => None,
                _ => {
                    let breaks = |r: &&Region| match claim {
                        Claim::Equivalent => true,
                        Claim::Implies => allows(&r.old) && !allows(&r.new),
                    };
                    p.regions.iter().find(breaks).map(|r| {
                        let why = match claim {
                            Claim::Equivalent => "not equivalent",
                            Claim::Implies => "A allows what B does not",
                        };
                        (why.to_string(), Some(r))
                    })
                }
            };
            Verdict {
                policy: p.name.clone(),
                refuted,
            }
        })
        .collect()
}

fn kinds() -> String {
    Kind::EXACT
        .iter()
        .map(|k| k.as_str())
        .collect::<Vec<_>>()
        .join(", ")
}

fn text(verdicts: &[Verdict<'_>], claim: Claim, old: &Build, new: &Build) -> String {
    let what = match claim {
        Claim::Equivalent => "A and B are equivalent",
        Claim::Implies => "A implies B",
    };
    let mut s = String::new();
    for v in verdicts {
        match &v.refuted {
            None => s.push_str(&format!("policy {}: proved: {what} over {}\n", v.policy, kinds())),
            Some((why, None)) => s.push_str(&format!("policy {}: refuted: {why}\n", v.policy)),
            Some((why, Some(r))) => s.push_str(&format!(
                "policy {}: refuted: {why}\n  counterexample: {}\n  in A: {}\n  in B: {}\n  (the whole region: {})\n",
                v.policy,
                r.witness,
                decision(old, &v.policy, &r.old),
                decision(new, &v.policy, &r.new),
                r.description
            )),
        }
    }
    s.push_str(&format!("{}\n", coverage_line()));
    s
}

fn json(verdicts: &[Verdict<'_>], claim: Claim, old: &Build, new: &Build) -> String {
    let doc = serde_json::json!({
        "claim": match claim { Claim::Equivalent => "equivalent", Claim::Implies => "implies" },
        "policies": verdicts.iter().map(|v| serde_json::json!({
            "name": v.policy,
            "proved": v.refuted.is_none(),
            "why": v.refuted.as_ref().map(|(w, _)| w.clone()),
            "counterexample": v.refuted.as_ref().and_then(|(_, r)| *r).map(|r| serde_json::json!({
                "query": r.witness.to_string(),
                "a": decision(old, &v.policy, &r.old),
                "b": decision(new, &v.policy, &r.new),
                "region": r.description,
            })),
        })).collect::<Vec<_>>(),
        "compared": Kind::EXACT.iter().map(|k| k.as_str()).collect::<Vec<_>>(),
        "sampled": Kind::SAMPLED.iter().map(|k| k.as_str()).collect::<Vec<_>>(),
        "not_compared": Vec::<&str>::new(),
    });
    serde_json::to_string_pretty(&doc).unwrap_or_default() + "\n"
}

/// One claim proved for one policy.
pub(crate) struct Proof {
    pub(crate) case: PropertyCase,
    pub(crate) policy: String,
    pub(crate) verdict: PropVerdict,
}

impl Proof {
    pub(crate) fn refuted(&self) -> bool {
        matches!(self.verdict, PropVerdict::Refuted { .. })
    }

    pub(crate) fn sampled(&self) -> bool {
        matches!(self.verdict, PropVerdict::NotRefuted { .. })
    }

    /// The verdict in words, and for a counterexample the query and how it
    /// was decided.
    pub(crate) fn describe(&self, b: &Build) -> (String, Option<(String, String)>) {
        match &self.verdict {
            PropVerdict::Proved { cells } => (
                format!(
                    "proved ({} of queries, every query decided)",
                    crate::output::count(*cells, "class", "classes")
                ),
                None,
            ),
            PropVerdict::NotRefuted { sampled } => {
                (format!("not refuted (sampled {sampled})"), None)
            }
            PropVerdict::Refuted {
                counterexample,
                decision: d,
            } => (
                "refuted".into(),
                Some((counterexample.to_string(), decision(b, &self.policy, d))),
            ),
            _ => ("not proved".into(), None),
        }
    }
}

/// Every claim of the build proved for its policy, or for every policy of
/// the set when its block names none.
pub(crate) fn prove_all(b: &Build, set: &gatehouse::PolicySet) -> Vec<Proof> {
    let mut out = Vec::new();
    for case in b.properties() {
        let policies: Vec<&gatehouse::Policy> = match &case.policy {
            Some(name) => set.policy(name).into_iter().collect(),
            None => set.policies().collect(),
        };
        for p in policies {
            out.push(Proof {
                verdict: b.prove(&case, p),
                policy: p.name().to_string(),
                case: case.clone(),
            });
        }
    }
    out
}

/// `policyc prove PATH...`: the properties of the files.
fn properties(a: &ProveArgs) -> Exit {
    let sources = match crate::load::sources(&a.paths, &[]) {
        Ok(s) => s,
        Err(e) => return e,
    };
    let (b, set) = match crate::load::compiled(sources) {
        Ok(x) => x,
        Err(e) => return e,
    };
    let proofs = prove_all(&b, &set);
    let refuted = proofs.iter().filter(|p| p.refuted()).count();
    let sampled = proofs.iter().filter(|p| p.sampled()).count();
    let proved = proofs.len() - refuted - sampled;
    match a.format {
        ProveFormat::Text => {
            let mut last: Option<(&str, usize, usize)> = None;
            for p in &proofs {
                let at = (p.case.file.as_str(), p.case.line, p.case.column);
                if last != Some(at) {
                    outln!("{}:{}:{}: {}", at.0, at.1, at.2, p.case.text);
                    last = Some(at);
                }
                let (verdict, counter) = p.describe(&b);
                outln!("  policy {}: {verdict}", p.policy);
                if let Some((q, d)) = counter {
                    outln!("    counterexample: {q}");
                    outln!("    decided: {d}");
                }
            }
            if proofs.is_empty() {
                errln!(
                    "warning: no `properties` block in {}: nothing was proved\n  = help: add `properties {{ never allow connect 169.254.169.254:* }}` next to the policy",
                    a.paths.join(", ")
                );
            }
            outln!("{proved} proved, {refuted} refuted, {sampled} not refuted (sampled)");
        }
        ProveFormat::Json => {
            let doc = serde_json::json!({
                "properties": proofs.iter().map(|p| {
                    let (verdict, counter) = p.describe(&b);
                    serde_json::json!({
                        "file": p.case.file,
                        "line": p.case.line,
                        "column": p.case.column,
                        "claim": p.case.text,
                        "policy": p.policy,
                        "verdict": match &p.verdict {
                            PropVerdict::Proved { .. } => "proved",
                            PropVerdict::Refuted { .. } => "refuted",
                            _ => "not_refuted",
                        },
                        "sampled": match &p.verdict {
                            PropVerdict::NotRefuted { sampled } => Some(*sampled),
                            _ => None,
                        },
                        "summary": verdict,
                        "counterexample": counter.map(|(q, d)| serde_json::json!({"query": q, "decided": d})),
                    })
                }).collect::<Vec<_>>(),
                "proved": proved,
                "refuted": refuted,
                "not_refuted": sampled,
            });
            out!(
                "{}",
                serde_json::to_string_pretty(&doc).unwrap_or_default() + "\n"
            );
        }
    }
    if refuted > 0 || (sampled > 0 && a.fail_on == Some(ProveFailOn::Unproved)) {
        Exit::Failed
    } else {
        Exit::Ok
    }
}
