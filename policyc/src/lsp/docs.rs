//! Hover text, taken from the language reference (docs/language.md, built
//! into the binary) so that the editor and the reference never disagree:
//! a section keyword shows its section's opening, a statement keyword the
//! rows of the tables that describe it (those of the enclosing block
//! first), a reason code its row of the reason-code table, a permission the
//! `permissions` section.

const REFERENCE: &str = include_str!("../../../docs/language.md");

/// A heading and the lines under it, up to the next heading.
struct Part {
    title: &'static str,
    lines: Vec<&'static str>,
}

fn parts() -> Vec<Part> {
    let mut parts = vec![Part {
        title: "",
        lines: Vec::new(),
    }];
    let mut fence = false;
    let mut comment = false;
    for line in REFERENCE.lines() {
        if line.starts_with("```") {
            fence = !fence;
        }
        // The reference's HTML — section anchors, comments — is for the
        // renderer, not for hover text (issue 37, item 7).
        if !fence && (comment || line.starts_with("<!--")) {
            comment = !line.contains("-->");
            continue;
        }
        if !fence && line.starts_with("<a id=") {
            continue;
        }
        if !fence && (line.starts_with("## ") || line.starts_with("### ")) {
            parts.push(Part {
                title: line.trim_start_matches('#').trim(),
                lines: Vec::new(),
            });
        } else if let Some(p) = parts.last_mut() {
            p.lines.push(line);
        }
    }
    parts
}

/// The words of a table cell: `allow|deny domain PATTERN` → allow, deny,
/// domain, PATTERN.
fn cell_words(cell: &str) -> impl Iterator<Item = &str> {
    cell.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '.'))
        .filter(|w| !w.is_empty())
}

fn cells(row: &str) -> Vec<&str> {
    row.trim()
        .trim_matches('|')
        .split(" | ")
        .map(str::trim)
        .collect()
}

/// The opening of a part: up to 24 lines, stopping before a second table
/// or subsection.
fn opening(p: &Part) -> String {
    let body: Vec<&str> = p
        .lines
        .iter()
        .copied()
        .skip_while(|l| l.trim().is_empty())
        .take(24)
        .collect();
    format!(
        "### {}\n\n{}\n\n*docs/language.md*",
        p.title,
        body.join("\n").trim_end()
    )
}

/// Hover markdown for `word`, written inside `block` (see
/// `gatehouse::outline::Context::block`).
pub fn hover(word: &str, block: &str) -> Option<String> {
    let parts = parts();
    let titled = |needle: &str| {
        parts
            .iter()
            .find(|p| p.title.contains(&format!("`{needle}`")))
    };
    // A reason code: its row.
    if gatehouse::Reason::ALL.iter().any(|r| r.as_str() == word) {
        let table = parts.iter().find(|p| p.title == "Reason codes")?;
        let row = table
            .lines
            .iter()
            .find(|l| l.starts_with(&format!("| `{word}` |")))?;
        let c = cells(row);
        return Some(format!(
            "**reason code** `{word}`\n\ndecision: {}\n\n{}\n\n*docs/language.md#reason-codes*",
            c.get(1).copied().unwrap_or(""),
            c.get(2).copied().unwrap_or("")
        ));
    }
    if gatehouse::vocab::Permission::ALL
        .iter()
        .any(|p| p.as_str() == word)
    {
        return titled("permissions").map(|p| format!("**permission** `{word}`\n\n{}", opening(p)));
    }
    let in_block = block != "file" && gatehouse::outline::section_keywords().contains(&word);
    if in_block || matches!(word, "policy" | "requirements" | "test") {
        let key = if word == "policy" { "test" } else { word };
        if word == "policy" && block == "file" {
            return Some(
                "**`policy NAME { ... }`**: a named policy, one block per agent or sandbox, holding sections (`network`, `permissions`, `sandbox`, ...). A `test` block runs queries against it.\n\n*docs/language.md*"
                    .into(),
            );
        }
        if word == "policy" {
            return Some(
                "**`policy NAME`** in a `test` block: the policy the following `expect` lines run against (needed when the set holds several).\n\n*docs/language.md#tests-and-queries*"
                    .into(),
            );
        }
        return titled(key).map(opening);
    }
    // A statement keyword or a value: the table rows that name it, those
    // under the enclosing block's heading first.
    let mut rows: Vec<(bool, &str, &str)> = Vec::new();
    for p in &parts {
        let here = p.title.contains(&format!("`{block}`"));
        for l in p.lines.iter().filter(|l| l.starts_with("| `")) {
            let c = cells(l);
            let (Some(first), Some(meaning)) = (c.first(), c.last()) else {
                continue;
            };
            if cell_words(first).any(|w| w == word) {
                rows.push((here, first, meaning));
            }
        }
    }
    rows.sort_by_key(|(here, _, _)| !here);
    if !rows.is_empty() {
        let text: Vec<String> = rows
            .iter()
            .take(6)
            .map(|(_, s, m)| format!("- {s}: {m}"))
            .collect();
        return Some(format!(
            "**`{word}`**\n\n{}\n\n*docs/language.md*",
            text.join("\n")
        ));
    }
    // Anything else the reference mentions: the first paragraph (or code
    // block) whose code names it, under the enclosing block's heading
    // first.
    let mut ordered: Vec<&Part> = parts.iter().collect();
    ordered.sort_by_key(|p| !p.title.contains(&format!("`{block}`")));
    for p in ordered {
        for para in paragraphs(&p.lines) {
            if names(&para, word) {
                let shown: Vec<&str> = para.iter().copied().take(14).collect();
                let mut body = shown.join("\n");
                if para.first().is_some_and(|l| l.starts_with("```"))
                    && !body.trim_end().ends_with("```")
                {
                    body.push_str("\n```");
                }
                return Some(format!(
                    "**`{word}`** ({})\n\n{body}\n\n*docs/language.md*",
                    p.title
                ));
            }
        }
    }
    None
}

/// Paragraphs and fenced code blocks, each whole.
fn paragraphs<'a>(lines: &[&'a str]) -> Vec<Vec<&'a str>> {
    let mut out: Vec<Vec<&'a str>> = Vec::new();
    let mut cur: Vec<&'a str> = Vec::new();
    let mut fence = false;
    for &l in lines {
        if l.starts_with("```") {
            if fence {
                cur.push(l);
                out.push(std::mem::take(&mut cur));
                fence = false;
                continue;
            }
            if !cur.is_empty() {
                out.push(std::mem::take(&mut cur));
            }
            fence = true;
        }
        if !fence && l.trim().is_empty() {
            if !cur.is_empty() {
                out.push(std::mem::take(&mut cur));
            }
        } else {
            cur.push(l);
        }
    }
    if !cur.is_empty() {
        out.push(cur);
    }
    out
}

/// Whether a paragraph's code names `word`: a word of an inline code span,
/// or of a line of a fenced block.
fn names(para: &[&str], word: &str) -> bool {
    if para.first().is_some_and(|l| l.starts_with("```")) {
        return para
            .iter()
            .skip(1)
            .any(|l| cell_words(l.split('#').next().unwrap_or("")).any(|w| w == word));
    }
    let text = para.join(" ");
    text.split('`')
        .skip(1)
        .step_by(2)
        .any(|code| cell_words(code).any(|w| w == word))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every keyword of the grammar, every permission and every reason code
    /// has hover text.
    #[test]
    fn everything_has_hover_text() {
        let grammar = include_str!("../../../grammar/policy.pest");
        let mut missing = Vec::new();
        for line in grammar.lines() {
            let Some(rest) = line.strip_prefix("kw_") else {
                continue;
            };
            let Some(word) = rest.split('"').nth(1) else {
                continue;
            };
            if hover(word, "file").is_none() && hover(word, "policy").is_none() {
                missing.push(word.to_string());
            }
        }
        for r in gatehouse::Reason::ALL {
            if hover(r.as_str(), "test").is_none() {
                missing.push(r.as_str().to_string());
            }
        }
        for p in gatehouse::vocab::Permission::ALL {
            if hover(p.as_str(), "permissions").is_none() {
                missing.push(p.as_str().to_string());
            }
        }
        assert!(missing.is_empty(), "no hover text for {missing:?}");
    }

    /// Hover text is markdown without the reference's HTML (its anchors
    /// and comments), for every word of the grammar, every permission and
    /// reason code, and every word of the reference's code spans.
    #[test]
    fn hover_text_shows_no_raw_html() {
        let grammar = include_str!("../../../grammar/policy.pest");
        let mut words: Vec<String> = grammar
            .lines()
            .filter_map(|l| Some(l.strip_prefix("kw_")?.split('"').nth(1)?.to_string()))
            .collect();
        words.extend(
            gatehouse::Reason::ALL
                .iter()
                .map(|r| r.as_str().to_string()),
        );
        words.extend(
            gatehouse::vocab::Permission::ALL
                .iter()
                .map(|p| p.as_str().to_string()),
        );
        for span in REFERENCE.split('`').skip(1).step_by(2) {
            words.extend(cell_words(span).map(str::to_string));
        }
        words.extend(["id", "a", "Section", "anchors"].map(String::from));
        let blocks = [
            "file",
            "policy",
            "network",
            "permissions",
            "test",
            "sandbox",
            "commands",
        ];
        for w in &words {
            for b in blocks {
                let h = hover(w, b).unwrap_or_default();
                assert!(
                    !h.contains("<a id") && !h.contains("<!--") && !h.contains("</a>"),
                    "hover of `{w}` in `{b}` shows HTML:\n{h}"
                );
            }
        }
    }

    #[test]
    fn statements_prefer_their_block() {
        let h = hover("allow", "network").unwrap_or_default();
        assert!(h.contains("domain PATTERN"), "{h}");
        let h = hover("network", "policy").unwrap_or_default();
        assert!(h.starts_with("### `network`"), "{h}");
        let h = hover("not_allowed", "test").unwrap_or_default();
        assert!(h.contains("decision: deny"), "{h}");
    }

    #[test]
    fn file_rules_have_hover_text() {
        for word in ["read", "none", "writable"] {
            let h = hover(word, "sandbox").unwrap_or_default();
            assert!(h.contains("file rule"), "{word}: {h}");
        }
        let h = hover("home", "test").unwrap_or_default();
        assert!(h.contains("binds `~`"), "{h}");
        let h = hover("no_access", "test").unwrap_or_default();
        assert!(h.contains("decision: ask"), "{h}");
    }
}
