//! Host mode's watch on its files (a child of `state`, which holds
//! [`Host`]): which files the reload thread watches, its poll of them
//! (the table, then each policy file once however many sandboxes name it),
//! and SIGHUP.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};

use crate::policy::Policies;

use crate::host::state::Host;
use crate::host::table::SandboxTable;
use crate::policy::{stat_key, stderr_line};
use crate::watch::{FileWatch, give_back_free_memory};

impl Host {
    /// Starts watching every sandbox's policy file as it is now.
    pub(super) fn watch_files(&mut self) {
        let table = self.table.load();
        self.files.clear();
        for s in table.sandboxes() {
            self.files
                .entry(s.policies().path.clone())
                .or_insert_with(|| (FileWatch::new(s.policies()), 0))
                .1 += 1;
        }
    }

    /// The watch on `policies`' file started afresh from what it read
    /// (how many sandboxes name the file unchanged).
    pub(super) fn rewatch(&mut self, policies: &Policies) {
        match self.files.get_mut(&policies.path) {
            Some(w) => w.0 = FileWatch::new(policies),
            None => {
                self.files
                    .insert(policies.path.clone(), (FileWatch::new(policies), 1));
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
            let w = self
                .files
                .entry(s.policies().path.clone())
                .or_insert_with(|| (FileWatch::new(s.policies()), 0));
            w.0 = FileWatch::new(s.policies());
            w.1 += 1;
        }
        if let Some(was) = old.get(id).map(|o| &o.policies().path)
            && let Some(w) = self.files.get_mut(was)
        {
            w.1 = w.1.saturating_sub(1);
            if w.1 == 0 {
                self.files.remove(was);
            }
        }
    }

    /// The files the reload thread watches: the table, and every
    /// sandbox's policy.
    pub(crate) fn watched_files(&self) -> Vec<PathBuf> {
        std::iter::once(self.path.clone())
            .chain(self.files.keys().cloned())
            .collect()
    }

    /// One poll of the reload thread: the table (a changed one is loaded
    /// and swapped in, or refused and the old one kept), then every
    /// sandbox's policy file.
    pub(crate) fn poll(&mut self) {
        let key = stat_key(&self.path);
        if key != self.key {
            self.key = key;
            if let Err(e) = self.reload() {
                stderr_line(format!(
                    "gatehouse-egress: sandbox table refused, the old one stays in force:\n{e}"
                ));
            }
        }
        let table = self.table.load();
        let mut reloaded = HashSet::new();
        // Each file is looked at once, through the first sandbox naming it;
        // when it changed, every other sandbox naming it takes the bytes
        // that one read (the compiled set is shared: one compile, one
        // read, one line on stderr).
        type Read = Option<(crate::policy::Seen, Option<Vec<u8>>)>;
        // Per file: what the first read, and how many more took it or
        // refused it (a policy name the new file lacks refuses it for
        // those sandboxes alone).
        let mut changed: HashMap<&Path, (Read, usize, usize)> = HashMap::new();
        for s in table.sandboxes() {
            let path = s.policies().path.as_path();
            let now = match changed.get_mut(path) {
                Some((Some((seen, bytes)), took, refused)) => {
                    s.policies().set_seen(seen.clone());
                    // A file that could not be read was refused, and said
                    // so, for the first: the others keep theirs too.
                    let ok = bytes
                        .as_ref()
                        .is_some_and(|b| s.policies().reload_quiet(b.clone()));
                    match ok {
                        true => *took += 1,
                        false => *refused += 1,
                    }
                    ok
                }
                Some((None, _, _)) => false,
                None => {
                    let read = self
                        .files
                        .get_mut(path)
                        .and_then(|file| file.0.poll_read(s.policies()));
                    let c = read.is_some();
                    changed.insert(path, (read, 0, 0));
                    c
                }
            };
            if now {
                reloaded.insert(s.id.clone());
            }
        }
        for (path, (_, took, refused)) in &changed {
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
