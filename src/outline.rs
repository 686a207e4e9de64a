//! The shape of a policy file, for editors: its policies, requirements and
//! test blocks with their sections, and every place a test names a policy.
//! The language server builds document symbols, go-to-definition and its
//! "run test" lenses from it; it reads whatever the parser could recover, so
//! a file with errors still has an outline.
//!
//! ```
//! use gatehouse::outline::{ItemKind, outline};
//!
//! let text = "policy ci {\n  network off\n}\ntest \"offline\" {\n  policy ci\n  expect deny connect x.example:443\n}\n";
//! let o = outline(text);
//! assert_eq!(o.items[0].kind, ItemKind::Policy);
//! assert_eq!(o.items[0].name, "ci");
//! assert_eq!(o.items[0].children[0].name, "network");
//! assert_eq!(o.items[1].kind, ItemKind::Test);
//! assert_eq!(o.references[0].name, "ci");
//! assert_eq!(&text[o.references[0].start..o.references[0].end], "ci");
//! ```

use crate::source::FileId;
use crate::syntax::ast::{Item, PropStmt, TestStmt};

/// What a top-level item is.
#[derive(Clone, Copy, Debug, Eq, PartialEq)]
#[non_exhaustive]
pub enum ItemKind {
    /// `policy NAME { ... }`
    Policy,
    /// `requirements NAME { ... }`
    Requirements,
    /// `test "DESCRIPTION" { ... }`
    Test,
}

/// A policy, requirements or test block, or a section of one. Offsets are
/// bytes into the text.
#[derive(Clone, Debug, Eq, PartialEq)]
#[non_exhaustive]
pub struct Symbol {
    /// What it is (sections inherit their block's kind).
    pub kind: ItemKind,
    /// The name, the test's description, or the section's keyword.
    pub name: String,
    /// The whole block or section.
    pub start: usize,
    /// One past its last byte.
    pub end: usize,
    /// The name (or keyword) alone.
    pub name_start: usize,
    /// One past the name's last byte.
    pub name_end: usize,
    /// Sections of a policy or requirements block; `expect` lines are not
    /// symbols.
    pub children: Vec<Symbol>,
}

/// A `policy NAME` line in a test block: a use of the policy `name`.
#[derive(Clone, Debug, Eq, PartialEq)]
#[non_exhaustive]
pub struct Reference {
    /// The policy named.
    pub name: String,
    /// Where the name is written.
    pub start: usize,
    /// One past its last byte.
    pub end: usize,
}

/// A file's outline.
#[derive(Clone, Debug, Default, Eq, PartialEq)]
#[non_exhaustive]
pub struct Outline {
    /// Top-level items in source order.
    pub items: Vec<Symbol>,
    /// Every `policy NAME` of every test block.
    pub references: Vec<Reference>,
}

/// The outline of one file's text.
pub fn outline(text: &str) -> Outline {
    let (file, _) = crate::syntax::parse_file(FileId(0), text);
    let mut out = Outline::default();
    for item in &file.items {
        match item {
            Item::Policy(b) | Item::Requirements(b) => {
                let kind = match item {
                    Item::Policy(_) => ItemKind::Policy,
                    _ => ItemKind::Requirements,
                };
                let children = b
                    .sections
                    .iter()
                    .map(|s| Symbol {
                        kind,
                        name: s.kind.keyword().to_string(),
                        start: s.span.start as usize,
                        end: s.span.end as usize,
                        name_start: s.keyword.start as usize,
                        name_end: s.keyword.end as usize,
                        children: Vec::new(),
                    })
                    .collect();
                out.items.push(Symbol {
                    kind,
                    name: b.name.node.clone(),
                    start: b.span.start as usize,
                    end: b.span.end as usize,
                    name_start: b.name.span.start as usize,
                    name_end: b.name.span.end as usize,
                    children,
                });
            }
            Item::Test(t) => {
                for s in &t.stmts {
                    if let TestStmt::Policy(p) = s {
                        out.references.push(Reference {
                            name: p.node.clone(),
                            start: p.span.start as usize,
                            end: p.span.end as usize,
                        });
                    }
                }
                out.items.push(Symbol {
                    kind: ItemKind::Test,
                    name: t.description.value.clone(),
                    start: t.span.start as usize,
                    end: t.span.end as usize,
                    name_start: t.description.span.start as usize,
                    name_end: t.description.span.end as usize,
                    children: Vec::new(),
                });
            }
            Item::Properties(t) => {
                for s in &t.stmts {
                    if let PropStmt::Policy(p) = s {
                        out.references.push(Reference {
                            name: p.node.clone(),
                            start: p.span.start as usize,
                            end: p.span.end as usize,
                        });
                    }
                }
                // Named by its description, else by its keyword.
                let (name, name_start, name_end) = match &t.description {
                    Some(d) => (d.value.clone(), d.span.start, d.span.end),
                    None => (
                        "properties".to_string(),
                        t.span.start,
                        t.span.start + "properties".len() as u32,
                    ),
                };
                out.items.push(Symbol {
                    kind: ItemKind::Test,
                    name,
                    start: t.span.start as usize,
                    end: t.span.end as usize,
                    name_start: name_start as usize,
                    name_end: name_end as usize,
                    children: Vec::new(),
                });
            }
        }
    }
    out
}

/// Where a cursor is, for completion: the block it is in and the words
/// already written on its statement.
#[derive(Clone, Debug, Default, Eq, PartialEq)]
#[non_exhaustive]
pub struct Context {
    /// The keyword of the innermost open block (`"network"`, `"test"`,
    /// `"policy"`, ... — `"approvals"` for its `granular` block), or
    /// `"file"` at the top level.
    pub block: &'static str,
    /// The complete words of the statement before the cursor.
    pub words: Vec<String>,
    /// The word being typed (empty after a blank).
    pub partial: String,
}

/// The completion context at byte `offset` of `text`. Strings and comments
/// are skipped as the grammar skips them; a cursor inside one has no
/// statement words.
pub fn context_at(text: &str, offset: usize) -> Context {
    let mut offset = offset.min(text.len());
    while !text.is_char_boundary(offset) {
        offset -= 1;
    }
    let before = text.get(..offset).unwrap_or("");
    let mut opens: Vec<usize> = Vec::new();
    let mut statement_start = 0;
    crate::syntax::scan(before, crate::syntax::Raw::AtTokenStart, &mut |l| match l {
        crate::syntax::Lexeme::Open(i) => {
            opens.push(i);
            statement_start = i + 1;
        }
        crate::syntax::Lexeme::Close(i) => {
            opens.pop();
            statement_start = i + 1;
        }
        _ => {}
    });
    let block = opens.last().map_or("file", |&i| {
        // The block's keyword: the first word of the statement that opens
        // it (`approvals on-request granular {` is `approvals`).
        let head = before.get(..i).unwrap_or("");
        let start = head.rfind(['\n', ';', '{', '}']).map_or(0, |p| p + 1);
        let word = head
            .get(start..)
            .unwrap_or("")
            .split_whitespace()
            .next()
            .unwrap_or("");
        ["file", "policy", "requirements", "test"]
            .into_iter()
            .chain(crate::syntax::ast::SECTION_KEYWORDS.iter().copied())
            .find(|k| *k == word)
            .unwrap_or("unknown")
    });
    let line_start = before.rfind(['\n', ';']).map_or(0, |p| p + 1);
    let stmt = before.get(line_start.max(statement_start)..).unwrap_or("");
    if stmt.contains('#') || stmt.matches('"').count() % 2 == 1 {
        return Context {
            block,
            ..Context::default()
        };
    }
    let mut words: Vec<String> = stmt.split_whitespace().map(str::to_string).collect();
    let partial = if stmt.ends_with(char::is_whitespace) || stmt.is_empty() {
        String::new()
    } else {
        words.pop().unwrap_or_default()
    };
    Context {
        block,
        words,
        partial,
    }
}

/// The section keywords of a policy block (`network`, `proxy`, ...).
pub fn section_keywords() -> &'static [&'static str] {
    crate::syntax::ast::SECTION_KEYWORDS
}

/// The words that may start a statement in `block` (see [`Context::block`]).
pub fn statement_keywords(block: &str) -> &'static [&'static str] {
    crate::syntax::block_keywords(block)
}

/// The query kinds of the text form (`connect`, `dns`, ...).
pub fn query_kinds() -> &'static [&'static str] {
    crate::syntax::QUERY_KINDS
}

/// The decision words an `expect` may name (`allow`, `deny`, `ask`, ...).
pub fn decision_words() -> &'static [&'static str] {
    crate::syntax::DECISION_WORDS
}
