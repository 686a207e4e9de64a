//! Host mode's state, which the one reload thread and the control API
//! change: the sandbox table file (the one source of truth, so that a
//! restarted daemon adopts every change), the policies the API wrote (in
//! the state directory), and the table in force with its nftables sets.

use std::collections::{HashMap, HashSet};
use std::net::IpAddr;
use std::path::PathBuf;
use std::sync::Arc;

use arc_swap::ArcSwap;

use super::layout::Installed;
use super::nft::{self, NftError, Ports};
use super::table::{Entry, File, HostError, Sandbox, SandboxTable, Shared, valid_id};
use crate::policy::stat_key;
use crate::policy::{PolicyError, stderr_line};
use crate::watch::FileWatch;

/// Host mode's watch on its files: the reload thread's poll, SIGHUP.
#[path = "state_files.rs"]
mod files;

/// How a change is written to the table file and put in force.
#[path = "state_write.rs"]
mod write;
pub(crate) use write::write_whole;

/// Why a change through the control API was refused; nothing of it was
/// put in force.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ChangeError {
    /// No sandbox has this id.
    #[error("no sandbox `{0}`")]
    NotFound(String),
    /// The request is not what the endpoint takes.
    #[error("{0}")]
    Invalid(String),
    /// A sandbox with this id exists already.
    #[error("sandbox `{0}` exists already")]
    Exists(String),
    /// An address asked for is another sandbox's.
    #[error("`{address}` is already sandbox `{by}`'s")]
    Taken {
        /// The address.
        address: String,
        /// The sandbox that has it.
        by: String,
    },
    /// Removing the sandbox would release an address no `networks` entry
    /// covers: its traffic would leave host mode's control.
    #[error(
        "sandbox `{0}` has addresses outside the table's `networks`: removed, they would leave host mode; add a `networks` entry covering them first"
    )]
    Uncovered(String),
    /// The policy does not build: every diagnostic, rendered.
    #[error(transparent)]
    Policy(#[from] PolicyError),
    /// The table as changed does not load (an address of another sandbox).
    #[error(transparent)]
    Table(#[from] HostError),
    /// The nftables sets for the changed table could not be installed.
    #[error(transparent)]
    Nft(#[from] NftError),
    /// A file could not be written.
    #[error("{path}: {source}")]
    Write {
        /// The file.
        path: PathBuf,
        /// The error.
        source: std::io::Error,
    },
}

impl ChangeError {
    /// The HTTP status the control API answers it with.
    pub fn status(&self) -> u16 {
        match self {
            ChangeError::NotFound(_) => 404,
            ChangeError::Exists(_) | ChangeError::Taken { .. } | ChangeError::Uncovered(_) => 409,
            ChangeError::Write { .. } | ChangeError::Nft(_) => 500,
            _ => 422,
        }
    }
}

/// The state behind one lock.
pub(crate) struct Host {
    pub(crate) path: PathBuf,
    pub(crate) state_dir: PathBuf,
    pub(crate) shared: Shared,
    pub(crate) table: Arc<ArcSwap<SandboxTable>>,
    pub(crate) nftables: bool,
    /// The daemon's ports, for the rules that name them.
    pub(crate) ports: Ports,
    /// The DNS-fed passes: revised after every change in force.
    pub(crate) kernel: Arc<super::kernel::Kernel>,
    key: Option<[i128; 5]>,
    /// One watch a policy file, however many sandboxes name it; how many
    /// do; and
    /// The sandbox's policy it is read through (`None`: that sandbox
    /// left; the next poll takes another).
    files: HashMap<PathBuf, (FileWatch, usize, Option<Arc<crate::policy::Policies>>)>,
    /// What the nftables table holds, as last written.
    installed: Installed,
    /// The `stat` key of the table file the table in force was built
    /// from. While the file's key is this, the table in force is what the
    /// file says, and a change through the API starts from the table
    /// ([`Host::write_edit`]) rather than reading and parsing the file again; a
    /// file that moved since (an edit by hand, refused or not yet seen)
    /// is read.
    built: Option<[i128; 5]>,
    /// The `stat` key of the table file as this daemon last wrote it
    /// whole or added to it (its own spelling: `[[sandbox]]` entries
    /// only). While the file is that, a sandbox added through the API is
    /// added at its end ([`Host::append`]) instead of the file rewritten.
    written: Option<[i128; 5]>,
    /// Files the reload thread has not been handed to watch yet
    /// ([`Host::take_unwatched`]).
    unwatched: Vec<PathBuf>,
}

/// A sandbox's place in the kernel layer, from its policy in force
/// (fail closed: a sandbox without its policy passes nothing). Equal
/// layers are shared (`seen`), as their chain is.
fn sandbox_layer(s: &Sandbox, seen: &mut Vec<Arc<nft::Layer>>) -> nft::SandboxLayer {
    let set = s.policies().store.load();
    let layer = match set.select(s.policies().name.as_deref()) {
        Ok(p) => super::kernel::layer_for(p),
        Err(_) => nft::Layer::drop_all(),
    };
    let layer = match seen.iter().find(|l| ***l == layer) {
        Some(l) => l.clone(),
        None => {
            let l = Arc::new(layer);
            if seen.len() < 64 {
                seen.push(l.clone());
            }
            l
        }
    };
    nft::SandboxLayer {
        id: s.id.clone(),
        sources: s.addresses.clone(),
        layer,
    }
}

/// What the nftables table holds for `sandboxes` of `table`: their sources
/// and the kernel layer of each one's policy in force.
fn contents<'a>(
    table: &'a SandboxTable,
    sandboxes: impl Iterator<Item = &'a Arc<Sandbox>>,
) -> nft::Contents<'a> {
    let mut seen = Vec::new();
    let layer: Vec<nft::SandboxLayer> = sandboxes.map(|s| sandbox_layer(s, &mut seen)).collect();
    nft::Contents {
        sources: layer
            .iter()
            .flat_map(|s| s.sources.iter().copied())
            .collect(),
        networks: table.networks(),
        layer,
        interfaces: table.interfaces(),
    }
}

/// The whole nftables table for `table`'s sandboxes, in one transaction
/// (`keep_established`: see [`nft::ruleset`]); the record of what it holds.
pub(crate) fn install(
    table: &SandboxTable,
    ports: Ports,
    keep_established: bool,
) -> Result<Installed, NftError> {
    let c = contents(table, table.sandboxes());
    let installed = Installed::of(&c)?;
    nft::apply(&nft::ruleset(&c, ports, keep_established))?;
    Ok(installed)
}

impl Host {
    pub(crate) fn new(
        path: PathBuf,
        state_dir: PathBuf,
        shared: Shared,
        table: Arc<ArcSwap<SandboxTable>>,
        nftables: bool,
        ports: Ports,
        kernel: Arc<super::kernel::Kernel>,
    ) -> Host {
        let mut h = Host {
            installed: Installed::default(),
            built: None,
            written: None,
            unwatched: Vec::new(),
            kernel,
            ports,
            key: stat_key(&path),
            path,
            state_dir,
            shared,
            table,
            nftables,
            files: HashMap::new(),
        };
        h.watch_files();
        h
    }

    /// The `stat` key of the table file the table in force was built from,
    /// taken before it was read.
    pub(crate) fn with_key(mut self, key: Option<[i128; 5]>) -> Host {
        self.key = key;
        self.built = key;
        self.adopt_written();
        self
    }

    /// The record of what the nftables table holds, as [`install`] wrote it.
    pub(crate) fn with_installed(mut self, installed: Installed) -> Host {
        self.installed = installed;
        self
    }

    /// Puts the kernel layer of the policies in force now in the table.
    /// `changed`: the sandboxes whose policy changed (`None`: any may have).
    fn refresh_layer(&mut self, changed: Option<&HashSet<String>>) {
        if !self.nftables {
            return;
        }
        let table = self.table.load();
        if let Err(e) = self.write_layer(&table, changed, &[]) {
            stderr_line(format!(
                "gatehouse-egress: the kernel layer of a changed policy was not written ({e}); the proxy still decides every connection with it"
            ));
        }
        // In the same step: the passes and flows the changed policy no
        // longer allows go.
        self.kernel.revise(&[], changed);
    }

    /// Writes the kernel layer of `changed` sandboxes of `table` (`None`:
    /// every one) and takes `gone` out: only what changed, in one
    /// transaction ([`Installed`]). A refused transaction changed nothing;
    /// the table is then written whole (its DNS-fed passes start afresh).
    fn write_layer(
        &mut self,
        table: &SandboxTable,
        changed: Option<&HashSet<String>>,
        gone: &[String],
    ) -> Result<(), NftError> {
        let all = changed.is_none()
            || self
                .installed
                .needs_all(table.networks(), table.interfaces());
        let c = match (all, changed) {
            (false, Some(ids)) => contents(table, ids.iter().filter_map(|id| table.get(id))),
            _ => contents(table, table.sandboxes()),
        };
        let mut gone = gone.to_vec();
        if all {
            let now: HashSet<&str> = c.layer.iter().map(|s| s.id.as_str()).collect();
            gone.extend(
                self.installed
                    .ids()
                    .filter(|id| !now.contains(id.as_str()))
                    .cloned(),
            );
        }
        match self.installed.apply(&c, &gone, self.ports) {
            Ok(()) => Ok(()),
            Err(NftError::Collision(chain)) => Err(NftError::Collision(chain)),
            Err(e) => {
                stderr_line(format!(
                    "gatehouse-egress: a change to the nftables table was refused ({e}); writing the table whole"
                ));
                self.installed = install(table, self.ports, self.kernel.conntrack())?;
                Ok(())
            }
        }
    }

    /// Loads the table file again, keeping the sandboxes that did not
    /// change; installs its nftables sets; swaps it in; retires the
    /// sandboxes that left (their open connections close).
    pub(crate) fn reload(&mut self) -> Result<usize, ChangeError> {
        self.key = stat_key(&self.path);
        self.built = None;
        let file = File::read(&self.path)?;
        let n = self.reload_file(file)?;
        self.adopt_written();
        Ok(n)
    }

    /// Whether the table in force is what the table file says (it has
    /// not moved since the table was built from it or written): a change
    /// through the API then edits the table in force and writes the file
    /// from it ([`Host::write_edit`]); else the file is read and the
    /// change made to what it says ([`Host::write_table`]).
    fn in_force(&self) -> bool {
        self.built.is_some() && stat_key(&self.path) == self.built
    }

    /// [`Host::reload`] of the table file as read (or just written).
    fn reload_file(&mut self, file: File) -> Result<usize, ChangeError> {
        let old = self.table.load_full();
        let table = SandboxTable::build(&self.path, &file, &self.shared, Some(&old))?;
        self.put_in_force(&old, table, None)
    }

    /// Puts `table` in force in place of `old` (the table in force): its
    /// nftables sets, the swap, the passes and flows of what changed
    /// revised, the sandboxes that left retired, the watches. With `edit`,
    /// `table` is `old` with only that sandbox changed
    /// ([`SandboxTable::edit`]), and only it is looked at.
    fn put_in_force(
        &mut self,
        old: &Arc<SandboxTable>,
        table: SandboxTable,
        edit: Option<&str>,
    ) -> Result<usize, ChangeError> {
        // A sandbox that left or changed keeps only what the table in force
        // allows it: its passes and flows are revised; the others' (the
        // same `Sandbox`, kept as it was) are not looked at.
        // The sandboxes of `a` that `b` does not hold as they are (only the
        // edited one can be, after an edit).
        let differing = |a: &SandboxTable, b: &SandboxTable| -> HashSet<String> {
            let differs = |id: &str| {
                a.get(id)
                    .is_some_and(|x| !b.get(id).is_some_and(|y| Arc::ptr_eq(x, y)))
            };
            match edit {
                Some(id) => std::iter::once(id.to_string())
                    .filter(|id| differs(id))
                    .collect(),
                None => a
                    .sandboxes()
                    .filter(|s| differs(&s.id))
                    .map(|s| s.id.clone())
                    .collect(),
            }
        };
        let changed = differing(old, &table);
        if self.nftables {
            if table.interfaces().is_empty() {
                return Err(ChangeError::Invalid(super::table::NO_INTERFACES.into()));
            }
            // Written: the sandboxes new or changed; taken out: those gone.
            let touched = differing(&table, old);
            let gone: Vec<String> = changed
                .iter()
                .filter(|id| table.get(id).is_none())
                .cloned()
                .collect();
            self.write_layer(&table, Some(&touched), &gone)?;
        }
        let n = table.len();
        self.table.store(Arc::new(table));
        self.built = self.key;
        let now = self.table.load();
        let before: Vec<IpAddr> = changed
            .iter()
            .filter_map(|id| old.get(id))
            .flat_map(|s| s.addresses.iter().copied())
            .collect();
        self.kernel.revise(&before, Some(&changed));
        for gone in changed.iter().filter_map(|id| old.get(id)) {
            if now.get(&gone.id).is_none_or(|s| !Arc::ptr_eq(s, gone)) {
                gone.policies().retire();
                let released: Vec<String> = gone
                    .addresses
                    .iter()
                    .filter(|ip| now.lookup(**ip).is_none() && !now.covers(**ip))
                    .map(IpAddr::to_string)
                    .collect();
                if !released.is_empty() {
                    stderr_line(format!(
                        "gatehouse-egress: sandbox `{}` left the table; {} no longer held by host mode (no `networks` entry covers them)",
                        gone.id,
                        released.join(", ")
                    ));
                }
            }
        }
        match edit {
            Some(id) => self.watch_edited(old, id),
            None => self.watch_files(),
        }
        stderr_line(format!(
            "gatehouse-egress: sandbox table in force ({n} sandboxes) from {}",
            self.path.display()
        ));
        Ok(n)
    }

    /// Where the API keeps a sandbox's policy.
    fn policy_file(&self, id: &str) -> PathBuf {
        self.state_dir.join(format!("{id}.policy"))
    }

    /// Where the API keeps a sandbox's Zoo calls.
    fn zoo_file(&self, id: &str) -> PathBuf {
        self.state_dir.join(format!("{id}.zoo.json"))
    }

    /// Compiles `text` as it would be put in force (the whole set, and the
    /// policy named, or the only one).
    fn check(&self, text: &str, name: Option<&str>) -> Result<(), ChangeError> {
        let path = PathBuf::from("<control API>");
        crate::policy::load_bytes(
            &path,
            text.as_bytes().to_vec(),
            name,
            &self.shared.options.trusted,
        )?;
        Ok(())
    }

    /// Adds a sandbox with its policy text.
    pub(crate) fn add(
        &mut self,
        id: &str,
        addresses: Vec<String>,
        text: &str,
        name: Option<String>,
    ) -> Result<(), ChangeError> {
        if !valid_id(id) {
            return Err(ChangeError::Invalid(format!(
                "`{id}`: an id is 1 to {} letters, digits, `-` and `_`",
                super::table::MAX_ID
            )));
        }
        let in_force = self.in_force();
        let table = self.table.load();
        let file = if in_force {
            if table.get(id).is_some() {
                return Err(ChangeError::Exists(id.into()));
            }
            None
        } else {
            let file = File::read(&self.path)?;
            if file.sandbox.iter().any(|e| e.id == id) {
                return Err(ChangeError::Exists(id.into()));
            }
            Some(file)
        };
        // Another sandbox's address is a conflict (409), as a taken id is.
        for text in &addresses {
            if let Some(other) = text.parse().ok().and_then(|ip| table.lookup(ip)) {
                return Err(ChangeError::Taken {
                    address: text.clone(),
                    by: other.id.clone(),
                });
            }
        }
        self.check(text, name.as_deref())?;
        self.make_state_dir()?;
        let policy = self.policy_file(id);
        write_whole(&policy, text.as_bytes())?;
        let _ = std::fs::remove_file(self.zoo_file(id));
        let entry = Entry {
            id: id.into(),
            addresses,
            policy: policy.clone(),
            policy_name: name,
        };
        let done = match file {
            None => self.write_edit(id, Some(entry)),
            Some(mut file) => {
                file.sandbox.push(entry);
                self.write_table(file)
            }
        };
        if done.is_err() {
            // Refused: nothing of it stays behind.
            let _ = std::fs::remove_file(&policy);
        }
        done
    }

    /// Removes a sandbox; its open connections close.
    pub(crate) fn remove(&mut self, id: &str) -> Result<(), ChangeError> {
        let table = self.table.load();
        if let Some(s) = table.get(id)
            && !s.addresses.iter().all(|ip| table.covers(*ip))
        {
            return Err(ChangeError::Uncovered(id.into()));
        }
        if self.in_force() {
            if table.get(id).is_none() {
                return Err(ChangeError::NotFound(id.into()));
            }
            drop(table);
            self.write_edit(id, None)?;
        } else {
            let mut file = File::read(&self.path)?;
            let before = file.sandbox.len();
            file.sandbox.retain(|e| e.id != id);
            if file.sandbox.len() == before {
                return Err(ChangeError::NotFound(id.into()));
            }
            drop(table);
            self.write_table(file)?;
        }
        let _ = std::fs::remove_file(self.policy_file(id));
        let _ = std::fs::remove_file(self.zoo_file(id));
        Ok(())
    }

    fn make_state_dir(&self) -> Result<(), ChangeError> {
        std::fs::create_dir_all(&self.state_dir).map_err(|source| ChangeError::Write {
            path: self.state_dir.clone(),
            source,
        })
    }

    /// Puts policy text in force for a sandbox (kept in the state
    /// directory; the table entry is pointed at it when it named another
    /// file). In force for the next connection when this returns; open
    /// connections the new policy denies close.
    pub(crate) fn put_policy(
        &mut self,
        id: &str,
        text: &str,
        name: Option<String>,
    ) -> Result<String, ChangeError> {
        // The table in force says where the sandbox's policy is: the file
        // is read (and rewritten) only when the entry must point elsewhere,
        // so a change costs the same whatever the number of sandboxes.
        let (pointed, addresses) = {
            let table = self.table.load();
            let s = table
                .get(id)
                .ok_or_else(|| ChangeError::NotFound(id.into()))?;
            (
                (s.policies().path.clone(), s.policies().name.clone()),
                s.addresses.iter().map(IpAddr::to_string).collect(),
            )
        };
        self.check(text, name.as_deref())?;
        self.make_state_dir()?;
        let policy = self.policy_file(id);
        let repoint = pointed != (policy.clone(), name.clone());
        let mut file = None;
        if repoint && !self.in_force() {
            let read = File::read(&self.path)?;
            if read.sandbox.iter().all(|e| e.id != id) {
                return Err(ChangeError::NotFound(id.into()));
            }
            file = Some(read);
        }
        write_whole(&policy, text.as_bytes())?;
        // A policy put whole starts the Zoo document afresh: the next Zoo
        // call builds on nothing a PUT replaced (`zoo` writes its document
        // back after this returns).
        let _ = std::fs::remove_file(self.zoo_file(id));
        if let Some(mut file) = file {
            if let Some(entry) = file.sandbox.iter_mut().find(|e| e.id == id) {
                entry.policy = policy;
                entry.policy_name = name;
            }
            self.write_table(file)?;
        } else if repoint {
            let entry = Entry {
                id: id.into(),
                addresses,
                policy,
                policy_name: name,
            };
            self.write_edit(id, Some(entry))?;
        } else {
            let table = self.table.load();
            let s = table
                .get(id)
                .ok_or_else(|| ChangeError::NotFound(id.into()))?;
            s.policies().reload();
            self.rewatch(s.policies());
            self.refresh_layer(Some(&HashSet::from([id.to_string()])));
        }
        let table = self.table.load();
        let s = table
            .get(id)
            .ok_or_else(|| ChangeError::NotFound(id.into()))?;
        Ok(s.policies().store.load().revision().to_string())
    }

    /// Applies one Zoo call (`set_network`, `add_rule`, `set_permission`,
    /// `set_app_policy`, as `policyc import zoo` reads them) to the
    /// sandbox's Zoo document, and puts the policy it imports to in force.
    /// The first Zoo call starts the document: from then on the sandbox's
    /// policy is what its Zoo calls say, as a Zoo sandbox's is.
    pub(crate) fn zoo(&mut self, id: &str, call: serde_json::Value) -> Result<String, ChangeError> {
        if self.table.load().get(id).is_none() {
            return Err(ChangeError::NotFound(id.into()));
        }
        let mut doc: serde_json::Value = std::fs::read(self.zoo_file(id))
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok())
            .unwrap_or_else(|| serde_json::json!({ "sandbox": id, "calls": [] }));
        if let Some(calls) = doc.get_mut("calls").and_then(|c| c.as_array_mut()) {
            calls.push(call);
        }
        let text = serde_json::to_string_pretty(&doc).unwrap_or_default();
        let imported = gatehouse::import::zoo::import(&text);
        if imported.has_errors() {
            let notes: Vec<String> = imported.notes.iter().map(|n| n.message.clone()).collect();
            return Err(ChangeError::Invalid(notes.join("; ")));
        }
        let revision = self.put_policy(id, &imported.text, None)?;
        write_whole(&self.zoo_file(id), text.as_bytes())?;
        Ok(revision)
    }
}
