//! Host mode's watch on its files (a child of `state`, which holds
//! [`Host`]): which files the reload thread watches, its poll of them
//! (the table, then each policy file once however many sandboxes name it),
//! and SIGHUP.

use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::sync::Arc;

use crate::policy::Policies;

use crate::host::state::Host;
use crate::host::table::SandboxTable;
use crate::policy::{stat_key, stderr_line};
use crate::watch::{FileWatch, give_back_free_memory};

/// What a poll found of one moved policy file.
enum Look {
    /// It changed: what the sandbox it is watched for read (`first`,
    /// reloaded already), for the others naming it; how many took it and
    /// how many refused it (a policy name the new file lacks refuses it for
    /// those sandboxes alone).
    Changed {
        path: PathBuf,
        seen: crate::policy::Seen,
        bytes: Option<Vec<u8>>,
        first: Arc<Policies>,
        took: usize,
        refused: usize,
    },
    /// Read, the same as in force.
    Unchanged,
    /// Not read yet: the sandbox it was watched for left the table.
    Unread,
}

impl Host {
    /// Starts watching every sandbox's policy file as it is now.
    pub(super) fn watch_files(&mut self) {
        let table = self.table.load();
        self.files.clear();
        for s in table.sandboxes() {
            self.files
                .entry(s.policies().path.clone())
                .or_insert_with(|| (FileWatch::new(s.policies()), 0, Some(s.policies().clone())))
                .1 += 1;
        }
        // Every path is for the notifier to resolve again.
        self.unwatched = std::iter::once(self.path.clone())
            .chain(self.files.keys().cloned())
            .collect();
    }

    /// The watch on `policies`' file started afresh from what it read
    /// (how many sandboxes name the file unchanged).
    pub(super) fn rewatch(&mut self, policies: &Arc<Policies>) {
        match self.files.get_mut(&policies.path) {
            Some(w) => {
                w.0 = FileWatch::new(policies);
                w.2 = Some(policies.clone());
            }
            None => {
                self.files.insert(
                    policies.path.clone(),
                    (FileWatch::new(policies), 1, Some(policies.clone())),
                );
                self.unwatched.push(policies.path.clone());
            }
        }
    }

    /// [`Host::watch_files`] after sandbox `id` alone changed (`old`: the
    /// table before): its file watched from what its policy read, the
    /// file it left unwatched when no other sandbox names it (the count
    /// says so: no look at the other sandboxes).
    pub(super) fn watch_edited(&mut self, old: &SandboxTable, id: &str) {
        let table = self.table.load();
        if let Some(s) = table.get(id) {
            let path = &s.policies().path;
            if !self.files.contains_key(path) {
                self.unwatched.push(path.clone());
            }
            let w = self
                .files
                .entry(path.clone())
                .or_insert_with(|| (FileWatch::new(s.policies()), 0, None));
            w.0 = FileWatch::new(s.policies());
            w.1 += 1;
            w.2 = Some(s.policies().clone());
        }
        if let Some(was) = old.get(id).map(|o| o.policies())
            && let Some(w) = self.files.get_mut(&was.path)
        {
            w.1 = w.1.saturating_sub(1);
            if w.1 == 0 {
                self.files.remove(&was.path);
            } else if w.2.as_ref().is_some_and(|f| Arc::ptr_eq(f, was))
                && table
                    .get(id)
                    .is_none_or(|s| !Arc::ptr_eq(s.policies(), was))
            {
                // Never read through a sandbox that left (its policy is
                // retired): the next poll finds another naming the file.
                w.2 = None;
            }
        }
    }

    /// The files for the reload thread to watch (resolve and watch their
    /// directories) that it has not been handed yet: every one after the
    /// table was built whole, else the policy files changes brought in.
    /// A file already watched is handed again when it moves
    /// ([`Host::poll`]): a link pointing elsewhere has a new target's
    /// directory to watch.
    pub(crate) fn take_unwatched(&mut self) -> Vec<PathBuf> {
        std::mem::take(&mut self.unwatched)
    }

    /// One poll of the reload thread: the table (a changed one is loaded
    /// and swapped in, or refused and the old one kept), then every
    /// policy file — a `stat` each, and only when one moved, the
    /// sandboxes naming it (10 000 sandboxes are not walked for a look
    /// that finds nothing). The files that moved, the table among them.
    pub(crate) fn poll(&mut self) -> Vec<PathBuf> {
        let mut moved_files = Vec::new();
        let key = stat_key(&self.path);
        if key != self.key {
            self.key = key;
            moved_files.push(self.path.clone());
            if let Err(e) = self.reload() {
                stderr_line(format!(
                    "gatehouse-egress: sandbox table refused, the old one stays in force:\n{e}"
                ));
            }
        }
        // Each moved file is read once, through the sandbox it was first
        // watched for; only when it changed (or that sandbox left) are the
        // sandboxes walked, the others naming it taking the bytes it read
        // (the compiled set is shared: one compile, one read, one line on
        // stderr). Paths compared as bytes: `Path`'s own hash walks
        // components.
        let mut looks: HashMap<Vec<u8>, Look> = HashMap::new();
        for (path, w) in self.files.iter_mut() {
            if !w.0.moved(path) {
                continue;
            }
            moved_files.push(path.clone());
            let look = match &w.2 {
                Some(first) => match w.0.poll_read(first) {
                    Some((seen, bytes)) => Look::Changed {
                        path: path.clone(),
                        seen,
                        bytes,
                        first: first.clone(),
                        took: 0,
                        refused: 0,
                    },
                    None => continue,
                },
                None => Look::Unread,
            };
            looks.insert(path.as_os_str().as_encoded_bytes().to_vec(), look);
        }
        if !looks.is_empty() {
            self.poll_moved(looks);
        }
        moved_files
    }

    /// The rest of [`Host::poll`]: each sandbox naming a file of `looks`
    /// takes what it holds now.
    fn poll_moved(&mut self, mut looks: HashMap<Vec<u8>, Look>) {
        let table = self.table.load();
        let mut reloaded = HashSet::new();
        for s in table.sandboxes() {
            let p = s.policies();
            let Some(look) = looks.get_mut(p.path.as_os_str().as_encoded_bytes()) else {
                continue;
            };
            let now = match look {
                Look::Changed {
                    seen,
                    bytes,
                    first,
                    took,
                    refused,
                    ..
                } => {
                    if Arc::ptr_eq(first, p) {
                        true
                    } else {
                        p.set_seen(seen.clone());
                        // A file that could not be read was refused, and
                        // said so, for the first: the others keep theirs.
                        let ok = bytes.as_ref().is_some_and(|b| p.reload_quiet(b.clone()));
                        match ok {
                            true => *took += 1,
                            false => *refused += 1,
                        }
                        ok
                    }
                }
                Look::Unchanged => false,
                Look::Unread => {
                    // The sandbox the file was first watched for left: this
                    // one reads it, and is the one from now on.
                    let read = self.files.get_mut(&p.path).and_then(|w| {
                        w.2 = Some(p.clone());
                        w.0.poll_read(p)
                    });
                    *look = match read {
                        Some((seen, bytes)) => Look::Changed {
                            path: p.path.clone(),
                            seen,
                            bytes,
                            first: p.clone(),
                            took: 0,
                            refused: 0,
                        },
                        None => Look::Unchanged,
                    };
                    matches!(look, Look::Changed { .. })
                }
            };
            if now {
                reloaded.insert(s.id.clone());
            }
        }
        for look in looks.values() {
            let Look::Changed {
                path,
                took,
                refused,
                ..
            } = look
            else {
                continue;
            };
            if *took > 0 {
                stderr_line(format!(
                    "gatehouse-egress: {took} more sandboxes naming {} took the same reload",
                    path.display()
                ));
            }
            if *refused > 0 {
                stderr_line(format!(
                    "gatehouse-egress: {refused} more sandboxes naming {} refused it; theirs stay in force",
                    path.display()
                ));
            }
        }
        if !reloaded.is_empty() {
            self.refresh_layer(Some(&reloaded));
            give_back_free_memory();
        }
    }

    /// SIGHUP: the table read again (a changed one put in force, or refused
    /// with the old one kept) and every sandbox's policy file read again.
    pub(crate) fn reload_all(&mut self) {
        match self.reload() {
            Ok(n) => stderr_line(format!(
                "gatehouse-egress: SIGHUP: sandbox table and {n} policies read again"
            )),
            Err(e) => stderr_line(format!(
                "gatehouse-egress: SIGHUP: sandbox table refused, the old one stays in force:\n{e}"
            )),
        }
        let table = self.table.load();
        for s in table.sandboxes() {
            s.policies().reload();
            self.rewatch(s.policies());
        }
        self.refresh_layer(None);
    }
}
