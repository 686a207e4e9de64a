//! What a change of policy changes (`policyc diff`, docs/diff.md): for
//! each policy on both sides, every region of queries whose decision,
//! reason or escalation differs, with a witness query inside it and both
//! sides' decisions.
//!
//! Exact for the kinds it covers (`connect`, `dns`, and the finite ones:
//! `socket`, `upstream`, `tool`, `prompt`, `web_search`): the query space is
//! cut into cells that every rule of both sides and every built-in test
//! of the engine treats alike ([`cells`]); one witness per cell is decided
//! by both compiled policies, and the cells whose decisions differ are
//! grouped into regions. So no query whose decision changed lies outside
//! a region (complete), and every query inside a region changed, witness
//! included (sound). `tests/diff.rs` checks both against brute force, with
//! the compiled engine and the reference evaluator.

pub mod cells;

use std::collections::{BTreeMap, HashMap};

use serde::Serialize;

use crate::build::Build;
use crate::compile::{Policy, PolicySet};
use crate::decision::{Decision, Escalation, Outcome, Reason};
use crate::query::{Query, Via};
pub use cells::{Atoms, HostClass};

/// Which way a region's decision moved.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Change {
    /// Refused (or asked) before, allowed now; or refused before, asked now.
    Opens,
    /// The reverse.
    Closes,
    /// The same outcome for another reason, or another escalation: a deny
    /// a person could be asked about becoming one nobody can override, or
    /// the reverse.
    Reason,
}

/// One side's decision, as a diff compares it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Key {
    /// What was decided.
    pub outcome: Outcome,
    /// Why.
    pub reason: Reason,
    /// Who could override a deny (`connect`'s `not_allowed`).
    pub escalation: Option<Escalation>,
}

impl Key {
    /// The parts of a decision a diff compares (not the deciding rule,
    /// whose place moves with every edit).
    pub fn of(d: &Decision) -> Key {
        Key {
            outcome: d.outcome,
            reason: d.reason,
            escalation: d.escalation,
        }
    }
}

/// How permissive an outcome is: refused, asked, allowed.
fn rank(o: Outcome) -> u8 {
    match o {
        Outcome::Allow | Outcome::Approved | Outcome::Live | Outcome::Cached => 2,
        Outcome::Ask | Outcome::Review => 1,
        _ => 0,
    }
}

/// The change from `old` to `new`, when there is one.
pub fn change(old: &Key, new: &Key) -> Option<Change> {
    if old == new {
        return None;
    }
    Some(match rank(new.outcome).cmp(&rank(old.outcome)) {
        std::cmp::Ordering::Greater => Change::Opens,
        std::cmp::Ordering::Less => Change::Closes,
        std::cmp::Ordering::Equal => Change::Reason,
    })
}

/// The query kinds a diff covers.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    /// `connect HOST:PORT via V`.
    Connect,
    /// `dns NAME`.
    Dns,
    /// `socket PATH`.
    Socket,
    /// `upstream`.
    Upstream,
    /// `tool PERMISSION`.
    Tool,
    /// `prompt CATEGORY`.
    Prompt,
    /// `web_search`.
    WebSearch,
}

impl Kind {
    /// Every kind a diff compares.
    pub const ALL: [Kind; 7] = [
        Kind::Connect,
        Kind::Dns,
        Kind::Socket,
        Kind::Upstream,
        Kind::Tool,
        Kind::Prompt,
        Kind::WebSearch,
    ];

    /// The query keyword.
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Connect => "connect",
            Kind::Dns => "dns",
            Kind::Socket => "socket",
            Kind::Upstream => "upstream",
            Kind::Tool => "tool",
            Kind::Prompt => "prompt",
            Kind::WebSearch => "web_search",
        }
    }
}

/// A cell: a host class, and for `connect` a port interval and transport.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Cell {
    /// The query kind.
    pub kind: Kind,
    /// The host class (`connect`, `dns`).
    pub host: Option<HostClass>,
    /// The port interval (`connect`).
    pub port: Option<usize>,
    /// The transport (`connect`).
    pub via: Option<Via>,
    /// The item of a finite kind: a socket path's index in
    /// [`Atoms::sockets`] (its length: any other path), a permission's
    /// or a prompt category's index in its vocabulary.
    pub item: Option<usize>,
}

impl Cell {
    fn host(kind: Kind, h: HostClass) -> Cell {
        Cell {
            kind,
            host: Some(h),
            port: None,
            via: None,
            item: None,
        }
    }

    fn item(kind: Kind, i: usize) -> Cell {
        Cell {
            kind,
            host: None,
            port: None,
            via: None,
            item: Some(i),
        }
    }
}

/// A region: cells of one host class whose decisions moved alike.
#[derive(Clone, Debug)]
pub struct Region {
    /// The query kind.
    pub kind: Kind,
    /// Which way it moved.
    pub change: Change,
    /// What it covers, in the language's words.
    pub description: String,
    /// A query inside it.
    pub witness: Query,
    /// The old side's decision of the witness.
    pub old: Decision,
    /// The new side's.
    pub new: Decision,
    /// Whether the region was found by sampling rather than decided
    /// exactly (never, for the kinds covered so far).
    pub sampled: bool,
    /// The cells it is made of.
    pub cells: Vec<Cell>,
}

/// A policy's part of a diff.
#[derive(Clone, Debug)]
pub struct PolicyDiff {
    /// The policy's name.
    pub name: String,
    /// Whether the old side has it.
    pub old: bool,
    /// Whether the new side has it.
    pub new: bool,
    /// What changed, when both sides have it.
    pub regions: Vec<Region>,
}

/// Why two builds cannot be compared.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[non_exhaustive]
pub enum DiffError {
    /// One side has errors (and so no compiled set).
    #[error("the {0} side does not build")]
    DoesNotBuild(&'static str),
}

/// The whole diff of two builds.
#[derive(Clone, Debug)]
pub struct Diff {
    /// How many domain base names cut the name space (for reports).
    pub atoms_bases: usize,
    /// Every policy of either side, by name.
    pub policies: Vec<PolicyDiff>,
    atoms: std::sync::Arc<Atoms>,
}

impl Diff {
    /// The cell a query falls in; `None` for a query both sides refuse
    /// before any rule (an invalid host or port) or a kind not covered.
    pub fn cell_of(&self, q: &Query) -> Option<Cell> {
        match q {
            Query::Connect { host, port, via } => {
                let port = u16::try_from(*port).ok().filter(|p| *p != 0)?;
                Some(Cell {
                    kind: Kind::Connect,
                    host: Some(self.atoms.host_class(host)?),
                    port: Some(self.atoms.port_class(port)),
                    via: Some(*via),
                    item: None,
                })
            }
            Query::Dns { name } => match self.atoms.host_class(name)? {
                h @ HostClass::Name { .. } => Some(Cell::host(Kind::Dns, h)),
                _ => None,
            },
            Query::Socket { path } => crate::normalize::is_normal_absolute_path(path).then(|| {
                let i = self
                    .atoms
                    .sockets
                    .binary_search(path)
                    .unwrap_or(self.atoms.sockets.len());
                Cell::item(Kind::Socket, i)
            }),
            Query::Upstream => Some(Cell::item(Kind::Upstream, 0)),
            Query::WebSearch => Some(Cell::item(Kind::WebSearch, 0)),
            Query::Tool { permission } => crate::vocab::Permission::parse(permission)
                .map(|p| Cell::item(Kind::Tool, p.index())),
            Query::Prompt { category } => Some(Cell::item(Kind::Prompt, category.index())),
            _ => None,
        }
    }

    /// The region of `policy` a query lies in, if its decision changed.
    pub fn region_of(&self, policy: &str, q: &Query) -> Option<&Region> {
        let cell = self.cell_of(q)?;
        self.policies
            .iter()
            .find(|p| p.name == policy)?
            .regions
            .iter()
            .find(|r| r.cells.contains(&cell))
    }

    /// Whether any region opens something (deny or ask to allow, deny to
    /// ask), or a policy was added.
    pub fn opens(&self) -> bool {
        self.policies
            .iter()
            .any(|p| (p.new && !p.old) || p.regions.iter().any(|r| r.change == Change::Opens))
    }
}

/// The diff of two builds: every policy of either side, and for those on
/// both, every region of `connect` and `dns` queries that changed.
pub fn diff(old: &Build, new: &Build) -> Result<Diff, DiffError> {
    let old_set = old.set.as_ref().ok_or(DiffError::DoesNotBuild("old"))?;
    let new_set = new.set.as_ref().ok_or(DiffError::DoesNotBuild("new"))?;
    let atoms = std::sync::Arc::new(Atoms::of(&[&old.files, &new.files]));
    let mut names: Vec<&str> = old_set
        .policies()
        .chain(new_set.policies())
        .map(Policy::name)
        .collect();
    names.sort_unstable();
    names.dedup();
    let hosts = atoms.host_classes();
    let mut policies = Vec::new();
    for name in names {
        let a = find(old_set, name);
        let b = find(new_set, name);
        let regions = match (a, b) {
            (Some(a), Some(b)) => regions(&atoms, &hosts, a, b),
            _ => Vec::new(),
        };
        policies.push(PolicyDiff {
            name: name.to_string(),
            old: a.is_some(),
            new: b.is_some(),
            regions,
        });
    }
    Ok(Diff {
        atoms_bases: atoms.bases.len(),
        policies,
        atoms,
    })
}

fn find<'a>(set: &'a PolicySet, name: &str) -> Option<&'a Policy> {
    set.policies().find(|p| p.name() == name)
}

/// One changed cell, before grouping.
struct Changed {
    cell: Cell,
    witness: Query,
    old: Decision,
    new: Decision,
}

fn regions(atoms: &Atoms, hosts: &[(HostClass, String)], a: &Policy, b: &Policy) -> Vec<Region> {
    let mut changed = Vec::new();
    // Each interval's witness port: 443 or 80 when it holds them.
    let ports: Vec<(usize, u16)> = (0..atoms.ports.len())
        .filter_map(|i| {
            atoms.port_range(i).map(|(lo, hi)| {
                let pick = [443u16, 80]
                    .into_iter()
                    .find(|p| (lo..=hi).contains(p))
                    .unwrap_or(lo);
                (i, pick)
            })
        })
        .collect();
    for (class, host) in hosts {
        for via in cells::VIAS {
            for &(pi, port) in &ports {
                let (x, y) = (a.connect(host, port, via), b.connect(host, port, via));
                if Key::of(&x) != Key::of(&y) {
                    changed.push(Changed {
                        cell: Cell {
                            kind: Kind::Connect,
                            host: Some(*class),
                            port: Some(pi),
                            via: Some(via),
                            item: None,
                        },
                        witness: Query::Connect {
                            host: host.clone(),
                            port: i64::from(port),
                            via,
                        },
                        old: x,
                        new: y,
                    });
                }
            }
        }
        if matches!(class, HostClass::Name { .. }) {
            let (x, y) = (a.dns(host), b.dns(host));
            if Key::of(&x) != Key::of(&y) {
                changed.push(Changed {
                    cell: Cell::host(Kind::Dns, *class),
                    witness: Query::Dns { name: host.clone() },
                    old: x,
                    new: y,
                });
            }
        }
    }
    // The finite kinds: every item of each, and for sockets a path no
    // rule names.
    let mut finite: Vec<(Cell, Query)> = Vec::new();
    for (i, path) in atoms
        .sockets
        .iter()
        .cloned()
        .chain(std::iter::once(atoms.fresh_socket()))
        .enumerate()
    {
        finite.push((Cell::item(Kind::Socket, i), Query::Socket { path }));
    }
    finite.push((Cell::item(Kind::Upstream, 0), Query::Upstream));
    finite.push((Cell::item(Kind::WebSearch, 0), Query::WebSearch));
    for p in crate::vocab::Permission::ALL {
        finite.push((
            Cell::item(Kind::Tool, p.index()),
            Query::Tool {
                permission: p.as_str().to_string(),
            },
        ));
    }
    for c in crate::vocab::PromptCategory::ALL {
        finite.push((
            Cell::item(Kind::Prompt, c.index()),
            Query::Prompt { category: *c },
        ));
    }
    for (cell, q) in finite {
        let (x, y) = (a.decide(&q), b.decide(&q));
        if Key::of(&x) != Key::of(&y) {
            changed.push(Changed {
                cell,
                witness: q,
                old: x,
                new: y,
            });
        }
    }
    group(atoms, changed)
}

/// A name a region leaves out: one name, or a name and all below it.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Except {
    Exact(usize),
    Tree(usize),
}

/// What cells share to be one region before merging: kind, host class,
/// item, and both decisions.
type GroupKey = (Kind, Option<HostClass>, Option<usize>, Key, Key);

/// A region before it is written out.
struct Draft {
    kind: Kind,
    host: Option<HostClass>,
    item: Option<usize>,
    old_key: Key,
    new_key: Key,
    /// For `connect`: each port list with its transports (`""`: all).
    shape: Vec<(String, String)>,
    except: Vec<Except>,
    cells: Vec<Cell>,
    witness: Query,
    old: Decision,
    new: Decision,
    absorbed: bool,
    /// A name region that took in its base itself: `**.B`.
    self_too: bool,
    /// Address intervals a family region holds (merged regions of one
    /// family), inclusive.
    v4: Vec<(u32, u32)>,
    v6: Vec<(u128, u128)>,
}

/// Cells of one kind and host class whose two decisions are the same
/// pair make one region; then a region of the names below a base takes in
/// the same change below a deeper base (`*.amazonaws.com` and
/// `*.s3.amazonaws.com` opened alike read `*.amazonaws.com (except
/// s3.amazonaws.com)`), and that base itself when it moved alike too.
fn group(atoms: &Atoms, changed: Vec<Changed>) -> Vec<Region> {
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
        });
    }
    // A stable order first: merges keep the first draft's witness.
    drafts.sort_by_key(|d| (d.kind, d.host, d.item));
    merge_below(atoms, &mut drafts);
    merge_self(&mut drafts);
    merge_family(&mut drafts);
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

/// The base a base lies strictly below, the deepest such (`None`: none).
fn parent_base(atoms: &Atoms, i: usize) -> Option<usize> {
    let name = atoms.bases.get(i)?;
    let mut rest = name.as_str();
    while let Some((_, r)) = rest.split_once('.') {
        if let Ok(j) = atoms.bases.binary_search_by(|b| b.as_str().cmp(r)) {
            return Some(j);
        }
        rest = r;
    }
    None
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
        let parent = parent_base(atoms, i);
        let same = |x: &Draft, host: Option<HostClass>| {
            !x.absorbed
                && x.host == host
                && x.kind == d.kind
                && x.old_key == d.old_key
                && x.new_key == d.new_key
                && x.shape == d.shape
        };
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
    for k in 0..drafts.len() {
        let Some(d) = drafts.get(k) else { continue };
        if d.absorbed || !matches!(d.host, Some(HostClass::V4(_) | HostClass::V6(_))) {
            continue;
        }
        let v4 = matches!(d.host, Some(HostClass::V4(_)));
        let into: Vec<usize> = (k + 1..drafts.len())
            .filter(|&j| {
                drafts.get(j).is_some_and(|x| {
                    !x.absorbed
                        && matches!(x.host, Some(HostClass::V4(_))) == v4
                        && matches!(x.host, Some(HostClass::V4(_) | HostClass::V6(_)))
                        && alike(x, d)
                })
            })
            .collect();
        for j in into {
            let Some(x) = drafts.get_mut(j) else { continue };
            x.absorbed = true;
            let (cells, a, b) = (
                std::mem::take(&mut x.cells),
                std::mem::take(&mut x.v4),
                std::mem::take(&mut x.v6),
            );
            if let Some(me) = drafts.get_mut(k) {
                me.cells.extend(cells);
                me.v4.extend(a);
                me.v6.extend(b);
            }
        }
    }
}

/// What a name class leaves out: the outermost bases below its base.
fn excepted(atoms: &Atoms, host: HostClass) -> Vec<Except> {
    let HostClass::Name { base, below: true } = host else {
        return Vec::new();
    };
    (0..atoms.bases.len())
        .filter(|&j| Some(j) != base && parent_base(atoms, j) == base)
        .map(Except::Tree)
        .collect()
}

/// For `connect`: the ports of the cells per transport, transports with
/// the same ports together.
fn shape(atoms: &Atoms, kind: Kind, cs: &[Changed]) -> Vec<(String, String)> {
    if kind != Kind::Connect {
        return Vec::new();
    }
    let mut per_via: BTreeMap<usize, (Via, Vec<usize>)> = BTreeMap::new();
    for c in cs {
        if let (Some(v), Some(p)) = (c.cell.via, c.cell.port) {
            let at = cells::VIAS.iter().position(|x| *x == v).unwrap_or(0);
            per_via
                .entry(at)
                .or_insert_with(|| (v, Vec::new()))
                .1
                .push(p);
        }
    }
    let mut by_ports: BTreeMap<String, Vec<Via>> = BTreeMap::new();
    for (v, ps) in per_via.into_values() {
        by_ports
            .entry(describe_ports(atoms, &ps))
            .or_default()
            .push(v);
    }
    by_ports
        .into_iter()
        .map(|(ports, vias)| {
            let via = if vias.len() == cells::VIAS.len() {
                String::new()
            } else {
                format!(
                    " via {}",
                    vias.iter()
                        .map(|v| v.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                )
            };
            (ports, via)
        })
        .collect()
}

/// The region in the language's words: `connect *.example.com:443,8443
/// via https (except api.example.com)`, `dns example.com`.
fn describe(atoms: &Atoms, d: &Draft) -> String {
    let host = match d.host {
        Some(HostClass::V4(_)) => {
            describe_ranges(&d.v4, describe_v4, atoms.v4_non_public(), "IPv4")
        }
        Some(HostClass::V6(_)) => {
            describe_ranges(&d.v6, describe_v6, atoms.v6_non_public(), "IPv6")
        }
        Some(HostClass::Name {
            base: Some(i),
            below: true,
        }) if d.self_too => format!("**.{}", atoms.bases.get(i).map_or("?", String::as_str)),
        Some(h) => describe_host(atoms, h),
        None => describe_item(atoms, d.kind, d.item),
    };
    let mut names: Vec<String> = d
        .except
        .iter()
        .filter_map(|e| match e {
            Except::Exact(i) => atoms.bases.get(*i).cloned(),
            Except::Tree(i) => atoms.bases.get(*i).map(|b| format!("**.{b}")),
        })
        .collect();
    names.sort();
    let except = match names.len() {
        0 => String::new(),
        n if n <= 4 => format!(" (except {})", names.join(", ")),
        n => format!(
            " (except {} and {} more)",
            names.iter().take(3).cloned().collect::<Vec<_>>().join(", "),
            n - 3
        ),
    };
    match d.kind {
        Kind::Dns => format!("dns {host}{except}"),
        Kind::Upstream | Kind::WebSearch => host,
        Kind::Socket | Kind::Tool | Kind::Prompt => format!("{} {host}", d.kind.as_str()),
        Kind::Connect => {
            let parts: Vec<String> = d
                .shape
                .iter()
                .map(|(ports, via)| {
                    if ports == "*" {
                        format!("connect {host}{via}")
                    } else {
                        format!("connect {host} port {ports}{via}")
                    }
                })
                .collect();
            format!("{}{except}", parts.join("; "))
        }
    }
}

fn describe_ports(atoms: &Atoms, idx: &[usize]) -> String {
    let mut ranges: Vec<(u16, u16)> = idx.iter().filter_map(|i| atoms.port_range(*i)).collect();
    ranges.sort_unstable();
    let mut merged: Vec<(u16, u16)> = Vec::new();
    for (lo, hi) in ranges {
        match merged.last_mut() {
            Some(last) if u32::from(last.1) + 1 == u32::from(lo) => last.1 = hi,
            _ => merged.push((lo, hi)),
        }
    }
    if merged == [(1, 65535)] {
        return "*".into();
    }
    merged
        .iter()
        .map(|(lo, hi)| {
            if lo == hi {
                lo.to_string()
            } else {
                format!("{lo}-{hi}")
            }
        })
        .collect::<Vec<_>>()
        .join(",")
}

/// An item of a finite kind in words.
fn describe_item(atoms: &Atoms, kind: Kind, item: Option<usize>) -> String {
    let i = item.unwrap_or(0);
    match kind {
        Kind::Socket => atoms
            .sockets
            .get(i)
            .cloned()
            .unwrap_or_else(|| "any other path".into()),
        Kind::Tool => crate::vocab::Permission::ALL
            .get(i)
            .map_or("?", |p| p.as_str())
            .to_string(),
        Kind::Prompt => crate::vocab::PromptCategory::ALL
            .get(i)
            .map_or("?", |p| p.as_str())
            .to_string(),
        k => k.as_str().to_string(),
    }
}

/// The host class in words (the names it leaves out are listed apart).
fn describe_host(atoms: &Atoms, h: HostClass) -> String {
    match h {
        HostClass::Name {
            base: Some(i),
            below,
        } => {
            let b = atoms.bases.get(i).map_or("?", String::as_str);
            if below {
                format!("*.{b}")
            } else {
                b.to_string()
            }
        }
        HostClass::Name { base: None, .. } => "any other name".into(),
        HostClass::V4(i) => match atoms.v4_range(i) {
            Some((lo, hi)) => describe_v4(lo, hi),
            None => "?".into(),
        },
        HostClass::V6(i) => match atoms.v6_range(i) {
            Some((lo, hi)) => describe_v6(lo, hi),
            None => "?".into(),
        },
    }
}

/// Address intervals in words: adjacent ones joined, each as a prefix or
/// a range; all the family's non-public addresses named as such.
fn describe_ranges<T: Copy + Ord + num_like::Step>(
    ranges: &[(T, T)],
    one: impl Fn(T, T) -> String,
    non_public: Vec<(T, T)>,
    family: &str,
) -> String {
    let mut r = ranges.to_vec();
    r.sort_unstable();
    let mut merged: Vec<(T, T)> = Vec::new();
    for (lo, hi) in r {
        match merged.last_mut() {
            Some(last) if num_like::Step::next(last.1) == Some(lo) => last.1 = hi,
            _ => merged.push((lo, hi)),
        }
    }
    let mut np = non_public;
    np.sort_unstable();
    let mut np_merged: Vec<(T, T)> = Vec::new();
    for (lo, hi) in np {
        match np_merged.last_mut() {
            Some(last) if num_like::Step::next(last.1) == Some(lo) => last.1 = hi,
            _ => np_merged.push((lo, hi)),
        }
    }
    if !np_merged.is_empty() && merged == np_merged {
        return format!("every non-public {family} address");
    }
    let parts: Vec<String> = merged.iter().map(|&(lo, hi)| one(lo, hi)).collect();
    match parts.len() {
        0 => "?".into(),
        n if n <= 4 => parts.join(", "),
        n => format!(
            "{} and {} more ranges",
            parts.iter().take(3).cloned().collect::<Vec<_>>().join(", "),
            n - 3
        ),
    }
}

/// The successor of an address, for joining adjacent intervals.
mod num_like {
    pub trait Step: Sized {
        fn next(self) -> Option<Self>;
    }
    impl Step for u32 {
        fn next(self) -> Option<u32> {
            self.checked_add(1)
        }
    }
    impl Step for u128 {
        fn next(self) -> Option<u128> {
            self.checked_add(1)
        }
    }
}

fn describe_v4(lo: u32, hi: u32) -> String {
    let a = std::net::Ipv4Addr::from(lo);
    if lo == hi {
        return a.to_string();
    }
    let span = u64::from(hi) - u64::from(lo) + 1;
    if span.is_power_of_two() && u64::from(lo).is_multiple_of(span) {
        return format!("cidr {a}/{}", 32 - span.trailing_zeros());
    }
    format!("{a}-{}", std::net::Ipv4Addr::from(hi))
}

fn describe_v6(lo: u128, hi: u128) -> String {
    let a = std::net::Ipv6Addr::from(lo);
    if lo == hi {
        return format!("[{a}]");
    }
    let span = hi.wrapping_sub(lo).wrapping_add(1);
    if span == 0 {
        return "cidr ::/0".into();
    }
    if span.is_power_of_two() && lo.is_multiple_of(span) {
        return format!("cidr {a}/{}", 128 - span.trailing_zeros());
    }
    format!("[{a}]-[{}]", std::net::Ipv6Addr::from(hi))
}
