//! How host mode writes a change to the sandbox table file and puts it
//! in force (a child of `state`, which holds [`Host`]): a file read by
//! hand since is changed and rewritten whole; the table in force is
//! edited in place and the file written from it, a sandbox added only
//! added at the file's end (issue 58: a change costs about the same at
//! 10 000 sandboxes as at one).

use std::path::Path;

use crate::host::state::{ChangeError, Host};
use crate::host::table::{Entry, File, SandboxTable, splice_entry};
use crate::policy::stat_key;

/// Writes `bytes` to `path` whole: a temporary file beside it, then a
/// rename, so a reader sees the old file or the new one. The file keeps
/// the mode it had; a new one is readable by its owner only (0600): the
/// table and the policies it stores are not for every user of the host.
pub(crate) fn write_whole(path: &Path, bytes: &[u8]) -> Result<(), ChangeError> {
    use std::io::Write as _;
    use std::os::unix::fs::{OpenOptionsExt as _, PermissionsExt as _};
    let write = |source| ChangeError::Write {
        path: path.to_path_buf(),
        source,
    };
    let mode = std::fs::metadata(path).map_or(0o600, |m| m.permissions().mode() & 0o7777);
    let tmp = path.with_extension(format!("tmp-{}", std::process::id()));
    let _ = std::fs::remove_file(&tmp);
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&tmp)
        .map_err(write)?;
    f.write_all(bytes).map_err(write)?;
    drop(f);
    std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(mode)).map_err(write)?;
    std::fs::rename(&tmp, path).map_err(write)
}

/// Why a table with a policy path that is not UTF-8 cannot be written.
fn not_utf8() -> ChangeError {
    ChangeError::Invalid("a policy path is not UTF-8: the table cannot hold it".into())
}

/// The table file's text: a line saying who writes it, then `text`.
fn with_header(text: &str) -> String {
    let header =
        "# The sandboxes of gatehouse-egress host mode; the control API rewrites this file.\n";
    let mut out = String::with_capacity(header.len() + text.len());
    out.push_str(header);
    out.push_str(text);
    out
}

impl Host {
    /// Rewrites the table file with `file` (the file as read, changed)
    /// and puts it in force; on a refusal the file is put back as it was.
    pub(super) fn write_table(&mut self, file: File) -> Result<(), ChangeError> {
        let before = std::fs::read(&self.path).unwrap_or_default();
        let text = file.to_toml().ok_or_else(not_utf8)?;
        write_whole(&self.path, with_header(&text).as_bytes())?;
        self.key = stat_key(&self.path);
        let done = self.reload_file(file);
        if let Err(e) = done {
            write_whole(&self.path, &before)?;
            self.key = stat_key(&self.path);
            self.built = None;
            return Err(e);
        }
        self.written = self.key;
        // The copies a rewrite makes (the file's entries, its text, the
        // table before) go back to the system: 3 MB at 10 000 sandboxes
        // otherwise stays with the daemon. Off the answer's path (8 ms at
        // 10 000), one at a time.
        crate::watch::give_back_free_memory_soon();
        Ok(())
    }

    /// Changes sandbox `id`'s entry to `entry` (`None`: removed) in the
    /// table in force ([`Host::in_force`]): the edited table is made
    /// first (a refusal writes nothing), the file written from it, then it
    /// is put in force; on a refusal there the file is put back as it was.
    /// Nothing here reads or copies every sandbox's entry but writing the
    /// file's text, so a change costs about the same at 10 000 sandboxes as
    /// at one.
    pub(super) fn write_edit(&mut self, id: &str, entry: Option<Entry>) -> Result<(), ChangeError> {
        let old = self.table.load_full();
        let table = old.edit(&self.path, id, entry.as_ref(), &self.shared)?;
        if self.nftables && table.interfaces().is_empty() {
            return Err(ChangeError::Invalid(
                crate::host::table::NO_INTERFACES.into(),
            ));
        }
        // A sandbox added goes at the end of the table and of the file:
        // the file gains its entry, nothing else is written.
        if old.get(id).is_none()
            && self.written.is_some()
            && self.written == self.built
            && let Some(text) = table.entry_toml(id, &self.path)
            && let Some((file, len)) = self.append(&text)?
        {
            self.key = stat_key(&self.path);
            if let Err(e) = self.put_in_force(&old, table, Some(id)) {
                let back = file.set_len(len).map_err(|source| ChangeError::Write {
                    path: self.path.clone(),
                    source,
                });
                self.key = stat_key(&self.path);
                self.built = None;
                self.written = None;
                back?;
                return Err(e);
            }
            self.written = self.key;
            return Ok(());
        }
        // A sandbox changed or removed: its entry cut out of the file as
        // this daemon wrote it (and the new one put in its place), else
        // the file written whole from the table.
        let text = match self.spliced(id, &table) {
            Some(text) => text,
            None => with_header(&table.to_toml(&self.path).ok_or_else(not_utf8)?),
        };
        // The file as it was stays under a second name until the change
        // is in force: a hard link, whatever the file's size.
        let kept = self
            .path
            .with_extension(format!("before-{}", std::process::id()));
        let _ = std::fs::remove_file(&kept);
        let linked = std::fs::hard_link(&self.path, &kept).is_ok();
        let before = if linked {
            Vec::new()
        } else {
            std::fs::read(&self.path).unwrap_or_default()
        };
        write_whole(&self.path, text.as_bytes())?;
        self.key = stat_key(&self.path);
        drop(text);
        if let Err(e) = self.put_in_force(&old, table, Some(id)) {
            let back = if linked {
                std::fs::rename(&kept, &self.path).map_err(|source| ChangeError::Write {
                    path: self.path.clone(),
                    source,
                })
            } else {
                write_whole(&self.path, &before)
            };
            self.key = stat_key(&self.path);
            self.built = None;
            back?;
            return Err(e);
        }
        if linked {
            let _ = std::fs::remove_file(&kept);
        }
        self.written = self.key;
        Ok(())
    }

    /// The table file as this daemon last wrote it, with sandbox `id`'s
    /// entry replaced by its entry in `table` (cut out when `table` has
    /// none): copies of the file's bytes, no sandbox's entry written
    /// again but the one changed. `None` when the file is not as it was
    /// written, or the entry is not found.
    fn spliced(&self, id: &str, table: &SandboxTable) -> Option<String> {
        use std::io::Read as _;
        if self.written.is_none() || self.written != self.built {
            return None;
        }
        let mut file = std::fs::File::open(&self.path).ok()?;
        let meta = file.metadata().ok()?;
        if Some(crate::policy::metadata_key(&meta)) != self.written {
            return None;
        }
        let mut text = String::with_capacity(usize::try_from(meta.len()).ok()? + 256);
        file.read_to_string(&mut text).ok()?;
        let new = match table.get(id) {
            Some(_) => Some(table.entry_toml(id, &self.path)?),
            None => None,
        };
        splice_entry(&text, id, new.as_deref())
    }

    /// Takes the table file as this daemon's own spelling when it is
    /// exactly what a rewrite of the table in force would write (a file
    /// the API wrote before a restart, or a SIGHUP of an unchanged file):
    /// the next change then adds to it or splices it instead of writing it
    /// whole. Read through the open file, whose `stat` must be the one the
    /// table was built from.
    pub(crate) fn adopt_written(&mut self) {
        use std::io::Read as _;
        let Some(built) = self.built else { return };
        let Ok(mut file) = std::fs::File::open(&self.path) else {
            return;
        };
        let same = file
            .metadata()
            .is_ok_and(|m| crate::policy::metadata_key(&m) == built);
        let mut text = String::new();
        if !same || file.read_to_string(&mut text).is_err() {
            return;
        }
        if self
            .table
            .load()
            .to_toml(&self.path)
            .is_some_and(|t| with_header(&t) == text)
        {
            self.written = Some(built);
        }
    }

    /// Adds `text` at the end of the table file when the file is as this
    /// daemon last wrote it (checked on the open file, so a file replaced
    /// since is never added to), in one write; the open file and its
    /// length before, to cut it back to. `None`: the file is not as it
    /// was written (it is then rewritten whole).
    fn append(&self, text: &str) -> Result<Option<(std::fs::File, u64)>, ChangeError> {
        use std::io::Write as _;
        let write = |source| ChangeError::Write {
            path: self.path.clone(),
            source,
        };
        let Ok(mut file) = std::fs::OpenOptions::new().append(true).open(&self.path) else {
            return Ok(None);
        };
        let meta = file.metadata().map_err(write)?;
        if Some(crate::policy::metadata_key(&meta)) != self.written {
            return Ok(None);
        }
        if let Err(e) = file.write_all(text.as_bytes()) {
            // Half an entry is never left behind.
            let _ = file.set_len(meta.len());
            return Err(write(e));
        }
        Ok(Some((file, meta.len())))
    }
}
