//! `policyc test`: run every `test` block; report as text, JSON or JUnit
//! XML, and with `--coverage` the rules that no test decided.

use std::collections::BTreeMap;

use gatehouse::{Policy, PolicySet, RuleId, TestCase};
use serde_json::{Value, json};

use crate::Exit;
use crate::cli::{TestArgs, TestFormat};
use crate::output::count;
use crate::prove::Proof;

/// One case, run.
struct Ran {
    case: TestCase,
    /// `None` when it passed; otherwise what was decided instead.
    failure: Option<String>,
    actual: Value,
}

pub fn run(a: &TestArgs) -> Exit {
    let sources = match crate::load::paths(&a.paths) {
        Ok(s) => s,
        Err(e) => return e,
    };
    let (b, set) = match crate::load::compiled(sources) {
        Ok(x) => x,
        Err(e) => return e,
    };
    let set = &set;
    let mut workspaces = crate::load::Workspaces::new(None, None);
    let mut decided: Vec<RuleId> = Vec::new();
    let mut ran = Vec::new();
    for case in b.tests() {
        // `check` has refused a case without a policy already.
        let Some(p) = case.policy_in(set) else {
            continue;
        };
        let d = p.decide_in(&case.query, Some(workspaces.for_query(&case.query)));
        decided.extend(d.rule);
        let failure = (!case.passes(&d)).then(|| failure(set, p, &d));
        let actual = serde_json::to_value(set.report(p, &d)).unwrap_or(Value::Null);
        ran.push(Ran {
            case,
            failure,
            actual,
        });
    }
    let proofs = crate::prove::prove_all(&b, set);
    if ran.is_empty() && proofs.is_empty() {
        errln!(
            "warning: no `test` block in {}: nothing was tested\n  = help: add `test \"what it shows\" {{ expect allow connect github.com:443 }}` next to the policy",
            a.paths.paths.join(", ")
        );
    }
    let coverage = a.coverage.then(|| Coverage::of(set, &decided));
    let failed = ran.iter().filter(|r| r.failure.is_some()).count();
    let passed = ran.len() - failed;
    let refuted = proofs.iter().filter(|p| p.refuted()).count();
    match a.format {
        TestFormat::Human => {
            properties_failed(&b, &proofs);
            human(&ran, passed, failed, coverage.as_ref());
            properties_summary(&proofs);
        }
        TestFormat::Json => {
            let mut v = json!({
                "passed": passed,
                "failed": failed,
                "cases": ran.iter().map(case_json).collect::<Vec<_>>(),
                "coverage": coverage.as_ref().map(Coverage::json),
            });
            if !proofs.is_empty()
                && let Some(o) = v.as_object_mut()
            {
                o.insert("properties".into(), properties_json(&b, &proofs));
            }
            outln!(
                "{}",
                serde_json::to_string_pretty(&v).unwrap_or_else(|_| "{}".into())
            );
        }
        TestFormat::Junit => out!("{}", junit(&ran, failed, &b, &proofs)),
    }
    let mut result = if failed + refuted > 0 {
        Exit::Failed
    } else {
        Exit::Ok
    };
    if let (Some(c), Some(min)) = (&coverage, a.fail_under) {
        if c.percent() < min {
            errln!(
                "error: rule coverage is {:.1}%, under --fail-under {min}%\n  = help: `policyc test --coverage` lists the rules that no test decided",
                c.percent()
            );
            result = Exit::Failed;
        }
    }
    result
}

fn failure(set: &PolicySet, p: &Policy, d: &gatehouse::Decision) -> String {
    let rule = match d.rule.and_then(|r| set.rule(r)) {
        Some(r) => format!("{}:{}:{} `{}`", r.file, r.line, r.column, r.source),
        None => "none (a default)".to_string(),
    };
    format!(
        "actual:   {} because {} (policy {}, rule: {rule})",
        d.outcome.as_str(),
        d.reason.as_str(),
        p.name()
    )
}

fn expected(case: &TestCase) -> String {
    format!(
        "{} {}{}",
        case.expected.outcome,
        case.query_text,
        case.expected
            .because
            .as_ref()
            .map(|b| format!(" because {b}"))
            .unwrap_or_default()
    )
}

fn human(ran: &[Ran], passed: usize, failed: usize, coverage: Option<&Coverage>) {
    for r in ran {
        if let Some(why) = &r.failure {
            let c = &r.case;
            outln!(
                "FAIL {}:{}:{} in test \"{}\"",
                c.file,
                c.line,
                c.column,
                c.test
            );
            outln!("  expected: {}", expected(c));
            outln!("  {why}\n");
        }
    }
    outln!("{passed} passed, {failed} failed");
    if let Some(c) = coverage {
        out!("{}", c.text());
    }
}

/// Each refuted claim with its counterexample.
fn properties_failed(b: &gatehouse::Build, proofs: &[Proof]) {
    for p in proofs.iter().filter(|p| p.refuted()) {
        let c = &p.case;
        outln!(
            "FAIL {}:{}:{} in properties{}",
            c.file,
            c.line,
            c.column,
            c.block
                .as_ref()
                .map(|d| format!(" \"{d}\""))
                .unwrap_or_default()
        );
        outln!("  claim:   {} (policy {})", c.text, p.policy);
        if let (_, Some((q, d))) = p.describe(b) {
            outln!("  counterexample: {q}");
            outln!("  actual:  {d}\n");
        }
    }
}

fn properties_summary(proofs: &[Proof]) {
    if proofs.is_empty() {
        return;
    }
    let refuted = proofs.iter().filter(|p| p.refuted()).count();
    let sampled = proofs.iter().filter(|p| p.sampled()).count();
    outln!(
        "properties: {} proved, {refuted} refuted, {sampled} not refuted (sampled)",
        proofs.len() - refuted - sampled
    );
}

fn properties_json(b: &gatehouse::Build, proofs: &[Proof]) -> Value {
    Value::Array(
        proofs
            .iter()
            .map(|p| {
                let (verdict, counter) = p.describe(b);
                json!({
                    "file": p.case.file,
                    "line": p.case.line,
                    "column": p.case.column,
                    "claim": p.case.text,
                    "policy": p.policy,
                    "proved": !p.refuted() && !p.sampled(),
                    "refuted": p.refuted(),
                    "summary": verdict,
                    "counterexample": counter.map(|(q, d)| json!({"query": q, "decided": d})),
                })
            })
            .collect(),
    )
}

fn case_json(r: &Ran) -> Value {
    let c = &r.case;
    json!({
        "file": c.file,
        "line": c.line,
        "column": c.column,
        "test": c.test,
        "policy": c.policy,
        "query": c.query_text,
        "expected": { "decision": c.expected.outcome, "because": c.expected.because },
        "actual": r.actual,
        "passed": r.failure.is_none(),
    })
}

/// JUnit XML: one `testsuite` per `test` block (in order of first
/// appearance), one `testcase` per `expect` line.
fn junit(ran: &[Ran], failed: usize, b: &gatehouse::Build, proofs: &[Proof]) -> String {
    let mut suites: Vec<(&str, &str, Vec<&Ran>)> = Vec::new();
    for r in ran {
        match suites
            .iter_mut()
            .find(|(f, t, _)| *f == r.case.file && *t == r.case.test)
        {
            Some((_, _, v)) => v.push(r),
            None => suites.push((&r.case.file, &r.case.test, vec![r])),
        }
    }
    let mut x = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    let refuted = proofs.iter().filter(|p| p.refuted()).count();
    x.push_str(&format!(
        "<testsuites name=\"policyc test\" tests=\"{}\" failures=\"{}\" errors=\"0\">\n",
        ran.len() + proofs.len(),
        failed + refuted
    ));
    for (file, test, cases) in suites {
        let fails = cases.iter().filter(|r| r.failure.is_some()).count();
        x.push_str(&format!(
            "  <testsuite name=\"{}\" tests=\"{}\" failures=\"{fails}\" errors=\"0\" skipped=\"0\" file=\"{}\">\n",
            xml(test),
            cases.len(),
            xml(file)
        ));
        for r in cases {
            let c = &r.case;
            let open = format!(
                "    <testcase name=\"{}\" classname=\"{}\" file=\"{}\" line=\"{}\"",
                xml(&format!("{}:{} expect {}", c.line, c.column, expected(c))),
                xml(&format!("{file}.{test}")),
                xml(file),
                c.line
            );
            match &r.failure {
                None => x.push_str(&format!("{open}/>\n")),
                Some(why) => x.push_str(&format!(
                    "{open}>\n      <failure message=\"{}\" type=\"decision\">{}:{}:{}\nexpected: {}\n{}</failure>\n    </testcase>\n",
                    xml(why.trim_start_matches("actual:").trim()),
                    xml(&c.file),
                    c.line,
                    c.column,
                    xml(&expected(c)),
                    xml(why)
                )),
            }
        }
        x.push_str("  </testsuite>\n");
    }
    if !proofs.is_empty() {
        x.push_str(&format!(
            "  <testsuite name=\"properties\" tests=\"{}\" failures=\"{refuted}\" errors=\"0\" skipped=\"0\">\n",
            proofs.len()
        ));
        for p in proofs {
            let c = &p.case;
            let open = format!(
                "    <testcase name=\"{}\" classname=\"{}\" file=\"{}\" line=\"{}\"",
                xml(&format!(
                    "{}:{} {} (policy {})",
                    c.line, c.column, c.text, p.policy
                )),
                xml(&format!("{}.properties", c.file)),
                xml(&c.file),
                c.line
            );
            let (verdict, counter) = p.describe(b);
            match counter {
                None => x.push_str(&format!(
                    "{open}>\n      <system-out>{}</system-out>\n    </testcase>\n",
                    xml(&verdict)
                )),
                Some((q, d)) => x.push_str(&format!(
                    "{open}>\n      <failure message=\"{}\" type=\"property\">{}:{}:{}\ncounterexample: {}\ndecided: {}</failure>\n    </testcase>\n",
                    xml(&format!("counterexample: {q}")),
                    xml(&c.file),
                    c.line,
                    c.column,
                    xml(&q),
                    xml(&d)
                )),
            }
        }
        x.push_str("  </testsuite>\n");
    }
    x.push_str("</testsuites>\n");
    x
}

/// Text for XML attributes and content: the five entities, and characters
/// XML 1.0 cannot hold replaced by U+FFFD.
fn xml(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for ch in s.chars() {
        match ch {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            '\t' | '\n' | '\r' => out.push(ch),
            c if (c as u32) < 0x20 || c == '\u{FFFE}' || c == '\u{FFFF}' => out.push('\u{FFFD}'),
            c => out.push(c),
        }
    }
    out
}

/// Which rules decided at least one test, by place (a statement shared by
/// several policies counts once).
struct Coverage {
    files: BTreeMap<String, FileRules>,
}

/// A file's rules: (line, column) → (source text, decided).
type FileRules = BTreeMap<(usize, usize), (String, bool)>;

impl Coverage {
    fn of(set: &PolicySet, decided: &[RuleId]) -> Coverage {
        let mut files: BTreeMap<String, FileRules> = BTreeMap::new();
        for (_, r) in set.rules() {
            files
                .entry(r.file.to_string())
                .or_default()
                .entry((r.line, r.column))
                .or_insert_with(|| (r.source.to_string(), false));
        }
        for r in decided.iter().filter_map(|&id| set.rule(id)) {
            if let Some(e) = files
                .get_mut(r.file)
                .and_then(|f| f.get_mut(&(r.line, r.column)))
            {
                e.1 = true;
            }
        }
        Coverage { files }
    }

    fn totals(&self) -> (usize, usize) {
        self.files
            .values()
            .flat_map(|f| f.values())
            .fold((0, 0), |(n, d), (_, hit)| (n + 1, d + usize::from(*hit)))
    }

    /// The share of rules decided, in percent (100 when there is none).
    fn percent(&self) -> f64 {
        match self.totals() {
            (0, _) => 100.0,
            (n, d) => d as f64 * 100.0 / n as f64,
        }
    }

    fn text(&self) -> String {
        let (n, d) = self.totals();
        let mut t = format!(
            "\ncoverage: {:.1}%, {} of {} decided a test\n",
            self.percent(),
            d,
            count(n, "rule", "rules")
        );
        for (file, rules) in &self.files {
            let fd = rules.values().filter(|(_, hit)| *hit).count();
            t.push_str(&format!("  {file}: {fd} of {}\n", rules.len()));
            for ((line, column), (source, hit)) in rules {
                if !hit {
                    t.push_str(&format!(
                        "    {file}:{line}:{column} never decided: `{source}`\n"
                    ));
                }
            }
        }
        t
    }

    fn json(&self) -> Value {
        let (n, d) = self.totals();
        json!({
            "rules": n,
            "decided": d,
            "percent": (self.percent() * 10.0).round() / 10.0,
            "files": self.files.iter().map(|(file, rules)| json!({
                "file": file,
                "rules": rules.len(),
                "decided": rules.values().filter(|(_, hit)| *hit).count(),
                "never_decided": rules.iter().filter(|(_, (_, hit))| !hit).map(|((line, column), (source, _))| json!({
                    "line": line, "column": column, "source": source,
                })).collect::<Vec<_>>(),
            })).collect::<Vec<_>>(),
        })
    }
}
