//! `policyc diff OLD NEW` and `policyc diff --base REV PATH...`: what a
//! change of policy lets through or refuses (docs/diff.md), from
//! [`gatehouse::diff`].

use gatehouse::diff::{Change, Diff, Region};
use gatehouse::source::SourceMap;
use gatehouse::{Build, Policy, PolicySet};

use crate::Exit;
use crate::cli::{DiffArgs, DiffFormat, FailOn};

/// The query kinds the diff does not compare yet: said in every output,
/// never left out silently.
/// The kinds compared on drawn queries only, in words.
pub(crate) fn sampled_kinds() -> String {
    gatehouse::diff::Kind::SAMPLED
        .iter()
        .map(|k| k.as_str())
        .collect::<Vec<_>>()
        .join(", ")
}

/// The closing line that says what was compared how.
pub(crate) fn coverage_line() -> String {
    format!(
        "sampled (drawn queries, not every one): {}",
        sampled_kinds()
    )
}

pub fn run(a: &DiffArgs) -> Exit {
    let (old, new) = match sides(a) {
        Ok(s) => s,
        Err(e) => return e,
    };
    let (old, new, diff) = match compare(old, new, ["the old side", "the new side"]) {
        Ok(c) => c,
        Err(e) => return e,
    };
    let text = match a.format {
        DiffFormat::Text => text(&diff, &old, &new),
        DiffFormat::Json => json(&diff, &old, &new),
        DiffFormat::Markdown => markdown(&diff, &old, &new),
    };
    out!("{text}");
    let failed = match a.fail_on {
        None => false,
        Some(FailOn::Opened) => diff.opens(),
        Some(FailOn::Changed) => diff
            .policies
            .iter()
            .any(|p| p.old != p.new || !p.regions.is_empty()),
    };
    if failed { Exit::Failed } else { Exit::Ok }
}

/// Both sides built and compared; a side that does not build prints its
/// diagnostics and fails (`names`: how the messages call the sides).
pub(crate) fn compare(
    old: SourceMap,
    new: SourceMap,
    names: [&str; 2],
) -> Result<(Build, Build, Diff), Exit> {
    let (old, new) = (gatehouse::build(old), gatehouse::build(new));
    for (side, b) in names.iter().zip([&old, &new]) {
        if b.has_errors() {
            err!("{}", b.render());
            errln!("error: {side} does not build: nothing compared");
            return Err(Exit::Failed);
        }
    }
    match gatehouse::diff::diff(&old, &new) {
        Ok(d) => Ok((old, new, d)),
        Err(e) => {
            errln!("error: {e}");
            Err(Exit::Failed)
        }
    }
}

/// The two sides' sources.
fn sides(a: &DiffArgs) -> Result<(SourceMap, SourceMap), Exit> {
    match &a.base {
        Some(rev) => {
            let old = at_revision(rev, &a.paths)?;
            let new = crate::load::sources(&a.paths, &[])?;
            Ok((old, new))
        }
        None => match a.paths.as_slice() {
            [old, new] => Ok((
                crate::load::sources(std::slice::from_ref(old), &[])?,
                crate::load::sources(std::slice::from_ref(new), &[])?,
            )),
            _ => Err(Exit::Usage(
                "give OLD and NEW (two paths), or --base REV and the paths".into(),
            )),
        },
    }
}

/// The `.policy` files under `paths` as git holds them at `rev`; a path
/// with none there (a new policy folder) contributes nothing.
fn at_revision(rev: &str, paths: &[String]) -> Result<SourceMap, Exit> {
    let git = |args: &[&str]| -> Result<Vec<u8>, Exit> {
        let o = std::process::Command::new("git")
            .args(args)
            .output()
            .map_err(|e| Exit::Usage(format!("--base needs git: {e}")))?;
        if !o.status.success() {
            return Err(Exit::Usage(format!(
                "git {}: {}",
                args.join(" "),
                String::from_utf8_lossy(&o.stderr).trim()
            )));
        }
        Ok(o.stdout)
    };
    if rev.starts_with('-') {
        return Err(Exit::Usage(format!("`{rev}` is not a revision")));
    }
    let mut args = vec!["ls-tree", "-r", "--name-only", "--full-name", rev, "--"];
    args.extend(paths.iter().map(String::as_str));
    let listed = git(&args)?;
    let mut map = SourceMap::new();
    for name in String::from_utf8_lossy(&listed).lines() {
        if !name.ends_with(".policy") {
            continue;
        }
        let spec = format!("{rev}:{name}");
        let bytes = git(&["show", &spec])?;
        let text = String::from_utf8(bytes)
            .map_err(|_| Exit::Usage(format!("`{spec}` is not UTF-8 text")))?;
        map.add(spec, text);
    }
    Ok(map)
}

fn set(b: &Build) -> Option<&PolicySet> {
    b.set.as_ref()
}

fn policy<'a>(b: &'a Build, name: &str) -> Option<&'a Policy> {
    set(b)?.policies().find(|p| p.name() == name)
}

/// A decision in words: `deny (not_allowed, a person may be asked)`,
/// `allow (allowed_by_rule, policies/a.policy:12:5)`.
pub(crate) fn decision(b: &Build, name: &str, d: &gatehouse::Decision) -> String {
    let (Some(s), Some(p)) = (set(b), policy(b, name)) else {
        return "?".into();
    };
    let r = s.report(p, d);
    let mut parts = vec![r.reason.to_string()];
    if let Some(e) = r.escalation {
        parts.push(
            match serde_json::to_value(e)
                .ok()
                .and_then(|v| v.as_str().map(str::to_string))
                .as_deref()
            {
                Some("ask") => "a person may be asked".into(),
                Some("review") => "the auto-reviewer may be asked".into(),
                Some("none") => "no one may override it".into(),
                Some(other) => format!("escalation {other}"),
                None => "escalation ?".into(),
            },
        );
    }
    if let Some(rule) = r.rule {
        parts.push(format!("{}:{}:{}", rule.file, rule.line, rule.column));
    }
    format!("{} ({})", r.decision, parts.join(", "))
}

fn verb(c: Change) -> &'static str {
    match c {
        Change::Opens => "opens",
        Change::Closes => "closes",
        Change::Reason => "reason",
    }
}

/// Counts for the closing line.
fn counts(diff: &Diff) -> (usize, usize, usize, usize, usize) {
    let regions = diff.policies.iter().flat_map(|p| &p.regions);
    let n = |c: Change| regions.clone().filter(|r| r.change == c).count();
    let added = diff.policies.iter().filter(|p| p.new && !p.old).count();
    let removed = diff.policies.iter().filter(|p| p.old && !p.new).count();
    (
        n(Change::Opens),
        n(Change::Closes),
        n(Change::Reason),
        added,
        removed,
    )
}

fn summary(diff: &Diff) -> String {
    let (o, c, r, added, removed) = counts(diff);
    format!(
        "{o} region{} opened, {c} closed, {r} changed reason; {added} polic{} added, {removed} removed",
        if o == 1 { "" } else { "s" },
        if added == 1 { "y" } else { "ies" }
    )
}

fn text(diff: &Diff, old: &Build, new: &Build) -> String {
    let mut s = String::new();
    for p in &diff.policies {
        match (p.old, p.new) {
            (false, true) => s.push_str(&format!("policy {}: added\n", p.name)),
            (true, false) => s.push_str(&format!("policy {}: removed\n", p.name)),
            _ if p.regions.is_empty() => {
                s.push_str(&format!("policy {}: no change\n", p.name));
            }
            _ => {
                s.push_str(&format!("policy {}\n", p.name));
                for r in &p.regions {
                    s.push_str(&region_text(r, &p.name, old, new));
                }
            }
        }
    }
    for p in diff.policies.iter().filter(|p| p.files_sampled()) {
        s.push_str(&format!(
            "policy {}: write and read sampled: its file rules are too many for the exact comparison\n",
            p.name
        ));
    }
    for p in diff.policies.iter().filter(|p| p.exec_sampled()) {
        s.push_str(&format!(
            "policy {}: exec sampled: its command rules make too many prefixes for the exact comparison\n",
            p.name
        ));
    }
    for p in diff.policies.iter().filter(|p| p.review_sampled()) {
        s.push_str(&format!(
            "policy {}: review sampled: a guardian has a regular expression (or more rules than the exact comparison takes)\n",
            p.name
        ));
    }

    s.push_str(&format!("{}\n{}\n", summary(diff), coverage_line()));
    s
}

fn region_text(r: &Region, name: &str, old: &Build, new: &Build) -> String {
    format!(
        "  {:<7}{}\n         e.g. {}\n         was {}\n         now {}\n",
        verb(r.change),
        r.description,
        r.witness,
        decision(old, name, &r.old),
        decision(new, name, &r.new),
    )
}

fn json(diff: &Diff, old: &Build, new: &Build) -> String {
    let report = |b: &Build, name: &str, d: &gatehouse::Decision| match (set(b), policy(b, name)) {
        (Some(s), Some(p)) => serde_json::to_value(s.report(p, d)).unwrap_or_default(),
        _ => serde_json::Value::Null,
    };
    let (o, c, r, added, removed) = counts(diff);
    let doc = serde_json::json!({
        "policies": diff.policies.iter().map(|p| serde_json::json!({
            "name": p.name,
            "old": p.old,
            "new": p.new,
            "regions": p.regions.iter().map(|r| serde_json::json!({
                "kind": r.kind,
                "change": r.change,
                "description": r.description,
                "witness": r.witness.to_string(),
                "old": report(old, &p.name, &r.old),
                "new": report(new, &p.name, &r.new),
                "sampled": r.sampled,
            })).collect::<Vec<_>>(),
        })).collect::<Vec<_>>(),
        "opens": diff.opens(),
        "summary": {"opened": o, "closed": c, "reason": r, "added": added, "removed": removed},
        "compared": gatehouse::diff::Kind::EXACT.iter().map(|k| k.as_str()).collect::<Vec<_>>(),
        "sampled": gatehouse::diff::Kind::SAMPLED.iter().map(|k| k.as_str()).collect::<Vec<_>>(),
        "files_sampled": diff.policies.iter().filter(|p| p.files_sampled()).map(|p| p.name.clone()).collect::<Vec<_>>(),
        "exec_sampled": diff.policies.iter().filter(|p| p.exec_sampled()).map(|p| p.name.clone()).collect::<Vec<_>>(),
        "review_sampled": diff.policies.iter().filter(|p| p.review_sampled()).map(|p| p.name.clone()).collect::<Vec<_>>(),
        "not_compared": Vec::<&str>::new(),
    });
    serde_json::to_string_pretty(&doc).unwrap_or_default() + "\n"
}

fn markdown(diff: &Diff, old: &Build, new: &Build) -> String {
    let esc = |s: &str| s.replace('|', "\\|").replace('`', "'");
    let mut s = String::from("### gatehouse: what this change lets through\n\n");
    if diff.opens() {
        s.push_str("**This change opens something.**\n\n");
    }
    for p in &diff.policies {
        match (p.old, p.new) {
            (false, true) => s.push_str(&format!("- policy `{}`: **added**\n", p.name)),
            (true, false) => s.push_str(&format!("- policy `{}`: removed\n", p.name)),
            _ if p.regions.is_empty() => {
                s.push_str(&format!("- policy `{}`: no change\n", p.name));
            }
            _ => {
                s.push_str(&format!(
                    "\n#### policy `{}`\n\n| change | region | for example | before | after |\n|---|---|---|---|---|\n",
                    p.name
                ));
                for r in &p.regions {
                    s.push_str(&format!(
                        "| {} | `{}` | `{}` | {} | {} |\n",
                        if r.change == Change::Opens {
                            "**opens**"
                        } else {
                            verb(r.change)
                        },
                        esc(&r.description),
                        esc(&r.witness.to_string()),
                        esc(&decision(old, &p.name, &r.old)),
                        esc(&decision(new, &p.name, &r.new)),
                    ));
                }
            }
        }
    }
    let exact: Vec<&str> = gatehouse::diff::Kind::EXACT
        .iter()
        .map(|k| k.as_str())
        .collect();
    s.push_str(&format!(
        "\n{}. Exact for {}; sampled (drawn queries, not every one) for {}.\n",
        summary(diff),
        exact.join(", "),
        sampled_kinds()
    ));
    for p in &diff.policies {
        for (sampled, what) in [
            (p.files_sampled(), "write and read"),
            (p.exec_sampled(), "exec"),
            (p.review_sampled(), "review"),
        ] {
            if sampled {
                s.push_str(&format!(
                    "\nPolicy `{}`: {what} sampled ({}).\n",
                    p.name,
                    if what == "review" {
                        "a guardian has a regular expression, or too many rules for the exact comparison"
                    } else {
                        "too many rules for the exact comparison"
                    }
                ));
            }
        }
    }
    s
}
