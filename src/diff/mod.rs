//! What a change of policy changes (`policyc diff`, docs/diff.md): for
//! each policy on both sides, every region of queries whose decision,
//! reason or escalation differs, with a witness query inside it and both
//! sides' decisions.
//!
//! Exact for the kinds it covers (`connect`, `dns`, and the finite ones:
//! `socket`, `upstream`, `tool`, `prompt`, `web_search`, `mcp`, and `app`,
//! apps.rs): the query space is
//! cut into cells that every rule of both sides and every built-in test
//! of the engine treats alike (`cells.rs`); one witness per cell is decided
//! by both compiled policies, and the cells whose decisions differ are
//! grouped into regions. So no query whose decision changed lies outside
//! a region (complete), and every query inside a region changed, witness
//! included (sound). `tests/diff.rs` checks both against brute force, with
//! the compiled engine and the reference evaluator.

mod apps;
mod cells;
mod commands;
mod covers;
mod describe;
mod exec;
#[cfg(feature = "exact-files")]
mod files;
mod group;
mod kind;
mod prove;
mod resolved;
#[cfg(feature = "exact-files")]
mod review;
mod sampled;
#[cfg(feature = "exact-files")]
mod words;

use serde::Serialize;

use crate::build::Build;
use crate::compile::{Policy, PolicySet};
use crate::decision::{Decision, Escalation, Outcome, Reason};
use crate::query::{Query, Via};
use cells::Atoms;
pub use cells::{HostClass, annotation_index, annotations};
pub use kind::Kind;
pub use prove::{PropertyCase, SAMPLE_HOME, SAMPLE_WORKSPACE, Verdict, outcome_class};

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
    /// The item of a finite kind: a socket path's index among the paths
    /// the rules name (their count: any other path), a permission's or a
    /// prompt category's index in its vocabulary, an MCP call's server,
    /// tool and annotations.
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
    /// The app names each side of this policy denies (what an `app`
    /// query's cell depends on).
    denied_apps: apps::Denied,
    /// The classes of paths both sides' file rules tell apart (what a
    /// `write` or `read` query's cell depends on); `None` when files were
    /// sampled.
    #[cfg(feature = "exact-files")]
    files: Option<std::sync::Arc<files::FileClasses>>,
    /// The classes of direct command lines both sides' command rules and
    /// the built-in tests tell apart; `None` when `exec` was sampled.
    exec: Option<std::sync::Arc<exec::ExecClasses>>,
    /// The pairs of decisions of `resolved` regions (each region's cell
    /// item is its index).
    resolved: Vec<(resolved::Red, resolved::Red)>,
    /// The same for `review` regions; `None` when reviews were sampled.
    review: Option<Vec<(Key, Key)>>,
}

impl PolicyDiff {
    /// Whether this policy's `exec` was sampled: its command rules (with
    /// their alternatives) make more prefixes than the comparison takes,
    /// or the two sides were built under different query limits.
    pub fn exec_sampled(&self) -> bool {
        self.old && self.new && self.exec.is_none()
    }

    /// Whether this policy's reviews were sampled: a guardian has a
    /// regular expression (or its rules pass the comparison's bounds, or
    /// the build has no `exact-files`).
    pub fn review_sampled(&self) -> bool {
        self.old && self.new && self.review.is_none()
    }

    /// Whether this policy's `write` and `read` were sampled although the
    /// build compares them exactly: its file rules did not fit the
    /// comparison's size limit.
    pub fn files_sampled(&self) -> bool {
        #[cfg(feature = "exact-files")]
        {
            self.old && self.new && self.files.is_none()
        }
        #[cfg(not(feature = "exact-files"))]
        {
            false
        }
    }
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
    /// Both sides' sets, which `resolved` queries are decided by to find
    /// their region.
    sets: (PolicySet, PolicySet),
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
            Query::Listen { addr } => {
                let (ip, _) = crate::eval::listen_addr(addr).ok()?;
                let local = crate::normalize::addr::is_loopback(ip);
                Some(Cell::item(Kind::Listen, usize::from(!local)))
            }
            Query::WebSearch => Some(Cell::item(Kind::WebSearch, 0)),
            Query::Tool { permission } => crate::vocab::Permission::parse(permission)
                .map(|p| Cell::item(Kind::Tool, p.index())),
            Query::Prompt { category } => Some(Cell::item(Kind::Prompt, category.index())),
            Query::Mcp {
                server,
                tool,
                annotations,
            } => Some(Cell::item(
                Kind::Mcp,
                self.atoms.mcp_item(server, tool, annotations),
            )),
            _ => None,
        }
    }

    /// The region of `policy` a query lies in, if its decision changed.
    pub fn region_of(&self, policy: &str, q: &Query) -> Option<&Region> {
        let p = self.policies.iter().find(|p| p.name == policy)?;
        let cell = match q {
            Query::App { program } => apps::cell(&p.denied_apps, program)?,
            #[cfg(feature = "exact-files")]
            Query::Write {
                path,
                workspace,
                home,
            }
            | Query::Read {
                path,
                workspace,
                home,
            } => {
                // Exact for the workspace and home the diff binds.
                if workspace.as_deref() != Some(SAMPLE_WORKSPACE)
                    || home.as_deref() != Some(SAMPLE_HOME)
                {
                    return None;
                }
                let path = crate::normalize::normalize_absolute_path(path)?;
                let class = p.files.as_ref()?.class_of(&path)?;
                let kind = if matches!(q, Query::Write { .. }) {
                    Kind::Write
                } else {
                    Kind::Read
                };
                Cell::item(kind, class)
            }
            Query::Exec { argv, escalate } => {
                Cell::item(Kind::Exec, p.exec.as_ref()?.class_of(argv, *escalate)?)
            }
            #[cfg(feature = "exact-files")]
            Query::Review { .. } => {
                if Kind::of(q) != Kind::Review {
                    return None;
                }
                let pairs = p.review.as_ref()?;
                let (x, y) = (
                    find(&self.sets.0, policy)?.decide(q),
                    find(&self.sets.1, policy)?.decide(q),
                );
                Cell::item(Kind::Review, review::item_of(pairs, &x, &y)?)
            }
            Query::Resolved { .. } => {
                let (x, y) = (
                    find(&self.sets.0, policy)?.decide(q),
                    find(&self.sets.1, policy)?.decide(q),
                );
                if Key::of(&x) == Key::of(&y) {
                    return None;
                }
                Cell::item(Kind::Resolved, resolved::item_of(&p.resolved, &x, &y)?)
            }
            _ => self.cell_of(q)?,
        };
        p.regions.iter().find(|r| r.cells.contains(&cell))
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
        #[cfg(feature = "exact-files")]
        let file_classes = match (a, b) {
            (Some(a), Some(b)) => files::FileClasses::of(a, b).map(std::sync::Arc::new),
            _ => None,
        };
        #[cfg(feature = "exact-files")]
        let files_exact = file_classes.is_some();
        #[cfg(not(feature = "exact-files"))]
        let files_exact = false;
        let exec_classes = match (a, b) {
            (Some(a), Some(b)) => exec::ExecClasses::of(a, b).map(std::sync::Arc::new),
            _ => None,
        };
        let mut resolved_pairs = Vec::new();
        let mut review_pairs = None;
        let (regions, denied_apps) = match (a, b) {
            (Some(a), Some(b)) => {
                let (denied, mut app_regions) = apps::regions(&atoms.apps, a, b);
                let mut r = regions(&atoms, &hosts, a, b);
                r.append(&mut app_regions);
                #[cfg(feature = "exact-files")]
                if let Some(fc) = &file_classes {
                    r.append(&mut fc.regions(a, b));
                }
                if let Some(ec) = &exec_classes {
                    r.append(&mut ec.regions(a, b));
                }
                let (mut rs, pairs) = resolved::regions(&atoms, &hosts, a, b);
                r.append(&mut rs);
                resolved_pairs = pairs;
                #[cfg(feature = "exact-files")]
                if let Some((mut rs, pairs)) = review::regions(a, b) {
                    r.append(&mut rs);
                    review_pairs = Some(pairs);
                }
                r.append(&mut sampled::regions(
                    &[&old.files, &new.files],
                    a,
                    b,
                    sampled::Exact {
                        files: files_exact,
                        exec: exec_classes.is_some(),
                        review: review_pairs.is_some(),
                    },
                ));
                // Opened first, then closed, then reasons; by kind within.
                r.sort_by(|x, y| {
                    (x.change, x.kind, &x.description).cmp(&(y.change, y.kind, &y.description))
                });
                (r, denied)
            }
            _ => (Vec::new(), apps::Denied::default()),
        };
        policies.push(PolicyDiff {
            name: name.to_string(),
            old: a.is_some(),
            new: b.is_some(),
            regions,
            denied_apps,
            #[cfg(feature = "exact-files")]
            files: file_classes,
            exec: exec_classes,
            resolved: resolved_pairs,
            review: review_pairs,
        });
    }
    Ok(Diff {
        atoms_bases: atoms.bases.len(),
        policies,
        atoms,
        sets: (old_set.clone(), new_set.clone()),
    })
}

fn find<'a>(set: &'a PolicySet, name: &str) -> Option<&'a Policy> {
    set.policies().find(|p| p.name() == name)
}

/// One changed cell, before grouping.
pub(crate) struct Changed {
    pub(crate) cell: Cell,
    pub(crate) witness: Query,
    pub(crate) old: Decision,
    pub(crate) new: Decision,
}

fn regions(atoms: &Atoms, hosts: &[(HostClass, String)], a: &Policy, b: &Policy) -> Vec<Region> {
    let mut changed = Vec::new();
    // The port a reader would pick in an interval: 443 or 80 when it
    // holds them.
    let pick = |lo: u16, hi: u16| {
        [443u16, 80]
            .into_iter()
            .find(|p| (lo..=hi).contains(p))
            .unwrap_or(lo)
    };
    for (class, host) in hosts {
        // Decided once per interval of this class's own ports; a change
        // marks every global port cell inside the interval.
        let local = atoms.ports_for(*class);
        for via in cells::VIAS {
            for &(lo, hi) in &local {
                let port = pick(lo, hi);
                let (x, y) = (a.connect(host, port, via), b.connect(host, port, via));
                if Key::of(&x) == Key::of(&y) {
                    continue;
                }
                for pi in atoms.port_class(lo)..=atoms.port_class(hi) {
                    let Some((glo, ghi)) = atoms.port_range(pi) else {
                        continue;
                    };
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
                            port: i64::from(if (glo..=ghi).contains(&port) {
                                port
                            } else {
                                pick(glo, ghi)
                            }),
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
    // A listener's decision looks only at whether its address is loopback.
    for (i, addr) in ["127.0.0.1:3128", "10.0.0.1:3128"].into_iter().enumerate() {
        finite.push((
            Cell::item(Kind::Listen, i),
            Query::Listen {
                addr: addr.to_string(),
            },
        ));
    }
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
    for item in atoms.mcp_items() {
        if let Some((server, tool, annotations)) = atoms.mcp_query(item) {
            finite.push((
                Cell::item(Kind::Mcp, item),
                Query::Mcp {
                    server,
                    tool,
                    annotations,
                },
            ));
        }
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
    group::group(atoms, changed)
}
