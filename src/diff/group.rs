//! Changed cells grouped into regions, and regions in the language's
//! words.

use std::collections::HashMap;

use super::cells::{Atoms, HostClass};
use super::describe::{describe, shape};
use super::{Cell, Changed, Key, Kind, Region, change};
use crate::decision::Decision;
use crate::query::{Query, Via};

/// A name a region leaves out: one name, or a name and all below it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum Except {
    Exact(usize),
    Tree(usize),
}

/// What cells share to be one region before merging: kind, host class,
/// item, and both decisions.
type GroupKey = (Kind, Option<HostClass>, Option<usize>, Key, Key);

/// A region before it is written out.
pub(super) struct Draft {
    pub(super) kind: Kind,
    pub(super) host: Option<HostClass>,
    pub(super) item: Option<usize>,
    pub(super) old_key: Key,
    pub(super) new_key: Key,
    /// For `connect`: each port list with its transports (`""`: all).
    pub(super) shape: Vec<(String, String)>,
    pub(super) except: Vec<Except>,
    pub(super) cells: Vec<Cell>,
    pub(super) witness: Query,
    pub(super) old: Decision,
    pub(super) new: Decision,
    pub(super) absorbed: bool,
    /// A name region that took in its base itself: `**.B`.
    pub(super) self_too: bool,
    /// Address intervals a family region holds (merged regions of one
    /// family), inclusive.
    pub(super) v4: Vec<(u32, u32)>,
    pub(super) v6: Vec<(u128, u128)>,
    /// The annotation combinations an MCP region holds (indexes as
    /// [`super::cells::annotation_index`]).
    pub(super) anns: Vec<usize>,
}

/// Cells of one kind and host class whose two decisions are the same
/// pair make one region; then a region of the names below a base takes in
/// the same change below a deeper base (`*.amazonaws.com` and
/// `*.s3.amazonaws.com` opened alike read `*.amazonaws.com (except
/// s3.amazonaws.com)`), and that base itself when it moved alike too.
pub(super) fn group(atoms: &Atoms, changed: Vec<Changed>) -> Vec<Region> {
    let mut by: HashMap<GroupKey, Vec<Changed>> = HashMap::new();
    for c in changed {
        by.entry((
            c.cell.kind,
            c.cell.host,
            c.cell.item,
            Key::of(&c.old),
            Key::of(&c.new),
        ))
        .or_default()
        .push(c);
    }
    let mut drafts: Vec<Draft> = Vec::new();
    for ((kind, host, item, old_key, new_key), cs) in by {
        // The witness a reader would pick: over https, on 443 or 80 when
        // the region holds them.
        let score = |c: &&Changed| match &c.witness {
            Query::Connect { port, via, .. } => (
                *via != Via::Https,
                match *port {
                    443 => 0,
                    80 => 1,
                    _ => 2,
                },
                *port,
            ),
            _ => (false, 0, 0),
        };
        let Some(first) = cs.iter().min_by_key(score) else {
            continue;
        };
        drafts.push(Draft {
            kind,
            host,
            item,
            old_key,
            new_key,
            shape: shape(atoms, kind, &cs),
            except: host.map(|h| excepted(atoms, h)).unwrap_or_default(),
            cells: cs.iter().map(|c| c.cell).collect(),
            witness: first.witness.clone(),
            old: first.old,
            new: first.new,
            absorbed: false,
            self_too: false,
            v4: match host {
                Some(HostClass::V4(i)) => atoms.v4_range(i).into_iter().collect(),
                _ => Vec::new(),
            },
            v6: match host {
                Some(HostClass::V6(i)) => atoms.v6_range(i).into_iter().collect(),
                _ => Vec::new(),
            },
            anns: match (kind, item) {
                (Kind::Mcp, Some(i)) => vec![i % 27],
                _ => Vec::new(),
            },
        });
    }
    // A stable order first: merges keep the first draft's witness.
    drafts.sort_by_key(|d| (d.kind, d.host, d.item));
    merge_below(atoms, &mut drafts);
    merge_self(&mut drafts);
    merge_family(&mut drafts);
    merge_annotations(&mut drafts);
    let mut out: Vec<Region> = drafts
        .into_iter()
        .filter(|d| !d.absorbed)
        .filter_map(|d| {
            Some(Region {
                kind: d.kind,
                change: change(&d.old_key, &d.new_key)?,
                description: describe(atoms, &d),
                witness: d.witness,
                old: d.old,
                new: d.new,
                sampled: false,
                cells: d.cells,
            })
        })
        .collect();
    out.sort_by(|x, y| (x.change, x.kind, &x.description).cmp(&(y.change, y.kind, &y.description)));
    out
}

fn merge_below(atoms: &Atoms, drafts: &mut [Draft]) {
    // Deepest bases first, so that a chain folds into its top.
    let mut order: Vec<usize> = (0..drafts.len())
        .filter(|&k| {
            matches!(
                drafts.get(k).and_then(|d| d.host),
                Some(HostClass::Name {
                    base: Some(_),
                    below: true
                })
            )
        })
        .collect();
    let depth = |d: &Draft| match d.host {
        Some(HostClass::Name { base: Some(i), .. }) => {
            atoms.bases.get(i).map_or(0, |b| b.matches('.').count())
        }
        _ => 0,
    };
    order.sort_by_key(|&k| std::cmp::Reverse(drafts.get(k).map_or(0, depth)));
    for k in order {
        let Some(d) = drafts.get(k) else { continue };
        let Some(HostClass::Name { base: Some(i), .. }) = d.host else {
            continue;
        };
        let parent = atoms.parent(i);
        let same =
            |x: &Draft, host: Option<HostClass>| !x.absorbed && x.host == host && alike(x, d);
        let parent_host = Some(HostClass::Name {
            base: parent,
            below: true,
        });
        let Some(pk) = drafts.iter().position(|x| same(x, parent_host)) else {
            continue;
        };
        let exact_host = Some(HostClass::Name {
            base: Some(i),
            below: false,
        });
        let ek = drafts.iter().position(|x| same(x, exact_host));
        let (cells, except) = (d.cells.clone(), d.except.clone());
        let mut exact_cells = Vec::new();
        if let Some(e) = ek.and_then(|e| drafts.get_mut(e)) {
            e.absorbed = true;
            exact_cells = e.cells.clone();
        }
        if let Some(me) = drafts.get_mut(k) {
            me.absorbed = true;
        }
        if let Some(p) = drafts.get_mut(pk) {
            p.cells.extend(cells);
            p.cells.extend(exact_cells);
            p.except.retain(|x| *x != Except::Tree(i));
            if ek.is_none() {
                p.except.push(Except::Exact(i));
            }
            p.except.extend(except);
        }
    }
}

/// Whether two drafts moved alike (kind, both decisions, ports and
/// transports).
fn alike(x: &Draft, y: &Draft) -> bool {
    x.kind == y.kind && x.old_key == y.old_key && x.new_key == y.new_key && x.shape == y.shape
}

/// A base and the names below it that moved alike read as one: `**.B`.
fn merge_self(drafts: &mut [Draft]) {
    for k in 0..drafts.len() {
        let Some(d) = drafts.get(k) else { continue };
        let Some(HostClass::Name {
            base: Some(i),
            below: false,
        }) = d.host
        else {
            continue;
        };
        if d.absorbed {
            continue;
        }
        let below = Some(HostClass::Name {
            base: Some(i),
            below: true,
        });
        let Some(bk) = drafts
            .iter()
            .position(|x| !x.absorbed && x.host == below && alike(x, d))
        else {
            continue;
        };
        let cells = d.cells.clone();
        if let Some(me) = drafts.get_mut(k) {
            me.absorbed = true;
        }
        if let Some(b) = drafts.get_mut(bk) {
            b.cells.extend(cells);
            b.self_too = true;
        }
    }
}

/// The address regions of one family that moved alike are one region.
fn merge_family(drafts: &mut [Draft]) {
    let family = |d: &Draft| match d.host {
        Some(HostClass::V4(_)) => Some(4),
        Some(HostClass::V6(_)) => Some(6),
        _ => None,
    };
    absorb_alike(drafts, |x, d| family(d).is_some() && family(x) == family(d));
}

/// The MCP regions of one server and tool that moved alike are one,
/// whatever the annotations.
fn merge_annotations(drafts: &mut [Draft]) {
    let call = |d: &Draft| d.item.map(|i| i / 27);
    absorb_alike(drafts, |x, d| {
        d.kind == Kind::Mcp && x.kind == Kind::Mcp && call(x) == call(d)
    });
}

/// Each draft `d` not yet absorbed takes in every later draft `x` that
/// moved alike and that `with(x, d)` accepts: its cells, address
/// intervals and annotation combinations.
fn absorb_alike(drafts: &mut [Draft], with: impl Fn(&Draft, &Draft) -> bool) {
    for k in 0..drafts.len() {
        let Some(d) = drafts.get(k) else { continue };
        if d.absorbed {
            continue;
        }
        let into: Vec<usize> = (k + 1..drafts.len())
            .filter(|&j| {
                drafts
                    .get(j)
                    .is_some_and(|x| !x.absorbed && alike(x, d) && with(x, d))
            })
            .collect();
        for j in into {
            let Some(x) = drafts.get_mut(j) else { continue };
            x.absorbed = true;
            let (cells, a, b, anns) = (
                std::mem::take(&mut x.cells),
                std::mem::take(&mut x.v4),
                std::mem::take(&mut x.v6),
                std::mem::take(&mut x.anns),
            );
            if let Some(me) = drafts.get_mut(k) {
                me.cells.extend(cells);
                me.v4.extend(a);
                me.v6.extend(b);
                me.anns.extend(anns);
            }
        }
    }
}

/// What a name class leaves out: the outermost bases below its base.
fn excepted(atoms: &Atoms, host: HostClass) -> Vec<Except> {
    let HostClass::Name { base, below: true } = host else {
        return Vec::new();
    };
    atoms
        .children(base)
        .iter()
        .map(|&j| Except::Tree(j))
        .collect()
}
