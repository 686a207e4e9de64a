//! `app PROGRAM` in a diff. A program is refused when any component of
//! its path, compared as an app name (case-insensitively, without one
//! trailing `.app` or `.exe`), is a name the policy denies; else allowed.
//! So on each side only whether its path holds a denied name matters, and
//! a program's decision changes exactly when it holds a name one side
//! denies and none the other denies. The names each side denies are read
//! by asking each policy about every name either build mentions (no name
//! outside them can be denied): exact, like the other kinds.

use std::collections::BTreeSet;

use super::{Cell, Key, Kind, Region, change};
use crate::compile::Policy;
use crate::query::Query;

/// The app names each side of one policy denies.
#[derive(Clone, Debug, Default)]
pub struct Denied {
    pub(crate) old: BTreeSet<String>,
    pub(crate) new: BTreeSet<String>,
}

/// A program that is just this name, as the engine reads it back: the
/// name itself, or with `.exe` when the name would lose a suffix.
fn program(name: &str) -> String {
    if crate::compile::app_key(name) == name {
        name.to_string()
    } else {
        format!("{name}.exe")
    }
}

/// The app names (keys) of a program's path components.
pub(crate) fn components(program: &str) -> BTreeSet<String> {
    program
        .split(['/', '\\'])
        .filter(|c| !c.is_empty())
        .map(crate::compile::app_key)
        .collect()
}

/// Whether the engine refuses the program before any name is read.
pub(crate) fn invalid(program: &str) -> bool {
    program.trim().is_empty() || program.contains('\0')
}

/// The cell of a program for one policy: which sides' denied names its
/// path holds (`2 * old + new`).
pub(crate) fn cell(denied: &Denied, program: &str) -> Option<Cell> {
    if invalid(program) {
        return None;
    }
    let c = components(program);
    let old = c.iter().any(|n| denied.old.contains(n));
    let new = c.iter().any(|n| denied.new.contains(n));
    Some(Cell::item(
        Kind::App,
        2 * usize::from(old) + usize::from(new),
    ))
}

/// The names each side denies, and the regions whose decision changed.
pub(crate) fn regions(names: &[String], a: &Policy, b: &Policy) -> (Denied, Vec<Region>) {
    let denies = |p: &Policy, n: &str| !p.app(&program(n)).is_allow();
    let denied = Denied {
        old: names.iter().filter(|n| denies(a, n)).cloned().collect(),
        new: names.iter().filter(|n| denies(b, n)).cloned().collect(),
    };
    let mut out = Vec::new();
    // Denied on one side only: a program named so (and named nothing the
    // other side denies) changed.
    for (only, other, code) in [
        (&denied.old, &denied.new, 2usize),
        (&denied.new, &denied.old, 1usize),
    ] {
        let names: Vec<&String> = only.difference(other).collect();
        let Some(first) = names.first() else { continue };
        let witness = Query::App {
            program: program(first),
        };
        let (x, y) = (a.decide(&witness), b.decide(&witness));
        let Some(ch) = change(&Key::of(&x), &Key::of(&y)) else {
            continue;
        };
        let list = |v: &[&String]| match v.len() {
            n if n <= 4 => v.iter().map(|s| s.as_str()).collect::<Vec<_>>().join(", "),
            n => format!(
                "{} and {} more",
                v.iter()
                    .take(3)
                    .map(|s| s.as_str())
                    .collect::<Vec<_>>()
                    .join(", "),
                n - 3
            ),
        };
        let others: Vec<&String> = other.iter().collect();
        let mut description = format!("app named {}", list(&names));
        if !others.is_empty() {
            description.push_str(&format!(
                " (unless another part of its path is named {})",
                list(&others)
            ));
        }
        out.push(Region {
            kind: Kind::App,
            change: ch,
            description,
            witness,
            old: x,
            new: y,
            sampled: false,
            cells: vec![Cell::item(Kind::App, code)],
        });
    }
    (denied, out)
}
