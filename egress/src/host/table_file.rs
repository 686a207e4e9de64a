//! The sandbox table's file: its shape (read with `toml`), and its text
//! as the control API writes it back (by hand: the shape is fixed, and
//! the `toml` crate's writer takes tens of milliseconds at 10 000
//! sandboxes).

use std::path::{Path, PathBuf};

use std::net::IpAddr;

use crate::host::table::{HostError, Sandbox, SandboxTable, valid_id};

/// The file's shape.
#[derive(Clone, Default, serde::Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct File {
    /// The prefixes sandboxes live in (`10.200.0.0/16`): a source in them
    /// that is no sandbox's is denied everything, so a sandbox removed
    /// from the table loses its network rather than leaving host mode.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(crate) networks: Vec<String>,
    /// The host-side interfaces sandbox traffic arrives on (`veth*`, a TAP,
    /// a bridge and its ports): whatever arrives on them is held as a
    /// sandbox's, whatever its source address says (docs/host.md).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(crate) interfaces: Vec<String>,
    #[serde(default)]
    pub(crate) sandbox: Vec<Entry>,
}

impl File {
    /// The file that builds `table` (whose file is at `path`), as the
    /// control API writes it back: each sandbox's entry in the table's
    /// order, its addresses in canonical form, its policy path relative
    /// to the table's folder when it is inside it, the networks as
    /// prefixes. The same table, spelled canonically (comments were never
    /// kept); [`SandboxTable::to_toml`] writes its text without it.
    #[cfg(test)]
    pub(crate) fn of(table: &SandboxTable, path: &Path) -> File {
        let base = path.parent().unwrap_or(Path::new("."));
        File {
            networks: table.networks().iter().map(ToString::to_string).collect(),
            interfaces: table.interfaces().to_vec(),
            sandbox: table
                .sandboxes()
                .map(|s| {
                    let p = &s.policies().path;
                    Entry {
                        id: s.id.clone(),
                        addresses: s.addresses.iter().map(ToString::to_string).collect(),
                        policy: p
                            .strip_prefix(base)
                            .map_or_else(|_| p.clone(), Path::to_path_buf),
                        policy_name: s.policies().name.clone(),
                    }
                })
                .collect(),
        }
    }
}

/// One sandbox as the file writes it.
#[derive(Clone, serde::Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Entry {
    pub(crate) id: String,
    pub(crate) addresses: Vec<String>,
    pub(crate) policy: PathBuf,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) policy_name: Option<String>,
}

/// `s` as a TOML basic string.
fn toml_string(out: &mut String, s: &str) {
    use std::fmt::Write as _;
    out.push('"');
    if !s
        .bytes()
        .any(|b| b == b'"' || b == b'\\' || b.is_ascii_control() || b >= 0x80)
    {
        out.push_str(s);
        out.push('"');
        return;
    }
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if c.is_control() => {
                let _ = write!(out, "\\u{:04X}", u32::from(c));
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

fn toml_array(out: &mut String, items: &[impl AsRef<str>]) {
    out.push('[');
    for (i, item) in items.iter().enumerate() {
        if i > 0 {
            out.push_str(", ");
        }
        toml_string(out, item.as_ref());
    }
    out.push(']');
}

impl File {
    /// The table as TOML, written by hand (its shape is fixed): the
    /// `toml` crate's writer takes tens of milliseconds at 10 000
    /// sandboxes, this one a millisecond. `None` for a policy path that is
    /// not UTF-8 (TOML cannot hold it).
    pub(crate) fn to_toml(&self) -> Option<String> {
        let mut out = String::with_capacity(64 + self.sandbox.len() * 96);
        head(&mut out, &self.networks, &self.interfaces);
        for e in &self.sandbox {
            entry(
                &mut out,
                &e.id,
                &e.addresses,
                e.policy.to_str()?,
                e.policy_name.as_deref(),
            );
        }
        Some(out)
    }

    /// Reads and parses the table at `path`, a file no user but root and
    /// the daemon's could change.
    pub(crate) fn read(path: &Path) -> Result<File, HostError> {
        match crate::policy::trusted_check(path) {
            Ok(()) => {}
            Err(crate::policy::Untrusted::Io { source, .. }) => {
                return Err(HostError::Read {
                    path: path.to_path_buf(),
                    source,
                });
            }
            Err(e) => return Err(HostError::Untrusted(Box::new(e))),
        }
        let text = std::fs::read_to_string(path).map_err(|source| HostError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        toml::from_str(&text).map_err(|e| HostError::Syntax {
            path: path.to_path_buf(),
            message: e.to_string(),
        })
    }
}

/// The table's networks and interfaces, as the file's first lines.
fn head(out: &mut String, networks: &[impl AsRef<str>], interfaces: &[String]) {
    if !networks.is_empty() {
        out.push_str("networks = ");
        toml_array(out, networks);
        out.push('\n');
    }
    if !interfaces.is_empty() {
        out.push_str("interfaces = ");
        toml_array(out, interfaces);
        out.push('\n');
    }
}

/// One sandbox's `[[sandbox]]` entry.
fn entry(
    out: &mut String,
    id: &str,
    addresses: &[impl AsRef<str>],
    policy: &str,
    name: Option<&str>,
) {
    out.push_str("\n[[sandbox]]\nid = ");
    toml_string(out, id);
    out.push_str("\naddresses = ");
    toml_array(out, addresses);
    out.push_str("\npolicy = ");
    toml_string(out, policy);
    if let Some(name) = name {
        out.push_str("\npolicy_name = ");
        toml_string(out, name);
    }
    out.push('\n');
}

/// `path` relative to the table's folder `base` (`base_text` its text)
/// when it is inside it, as text; `None` when it is not UTF-8. Compared
/// as bytes: `Path`'s own `strip_prefix` walks components, a large share
/// of writing 10 000 entries.
fn relative<'a>(
    path: &'a Path,
    base: &Path,
    base_text: Option<&str>,
) -> Option<std::borrow::Cow<'a, str>> {
    let text = path.to_str()?;
    let Some(base_text) = base_text else {
        // A folder whose name is not UTF-8: as `Path` reads it.
        return Some(match path.strip_prefix(base) {
            Ok(rest) => rest.to_str()?.to_owned().into(),
            Err(_) => text.into(),
        });
    };
    if base_text.is_empty() {
        return Some(text.into());
    }
    if let Some(rest) = text.strip_prefix(base_text)
        && let Some(rest) = rest.strip_prefix('/')
    {
        // Only a plain spelling: the components `Path` would find, one `/`
        // between each.
        let plain = !rest.is_empty()
            && rest != "."
            && !rest.starts_with('/')
            && !rest.starts_with("./")
            && !rest.ends_with('/')
            && !rest.ends_with("/.")
            && !rest.contains("//")
            && !rest.contains("/./");
        if plain {
            return Some(rest.into());
        }
    }
    if text.starts_with(base_text) {
        // A spelling bytes do not settle (`base/./x`, `base//x`, a
        // trailing `/`): as `Path` reads it.
        return Some(match path.strip_prefix(base) {
            Ok(rest) => rest.to_str()?.to_owned().into(),
            Err(_) => text.into(),
        });
    }
    Some(text.into())
}

/// `n` in decimal.
fn push_u8(out: &mut String, n: u8) {
    if n >= 100 {
        out.push(char::from(b'0' + n / 100));
    }
    if n >= 10 {
        out.push(char::from(b'0' + n / 10 % 10));
    }
    out.push(char::from(b'0' + n % 10));
}

/// `ip` as `IpAddr`'s `Display` writes it (IPv4 by hand: a tenth of the
/// formatter's time).
fn push_ip(out: &mut String, ip: &IpAddr) {
    use std::fmt::Write as _;
    match ip {
        IpAddr::V4(v4) => {
            for (i, o) in v4.octets().into_iter().enumerate() {
                if i > 0 {
                    out.push('.');
                }
                push_u8(out, o);
            }
        }
        IpAddr::V6(_) => {
            let _ = write!(out, "{ip}");
        }
    }
}

/// Sandbox `s`'s `[[sandbox]]` entry as [`SandboxTable::to_toml`] writes
/// it; `None` for a policy path that is not UTF-8.
fn sandbox_entry(
    out: &mut String,
    s: &Sandbox,
    base: &Path,
    base_text: Option<&str>,
) -> Option<()> {
    let policy = relative(&s.policies().path, base, base_text)?;
    out.push_str("\n[[sandbox]]\nid = ");
    toml_string(out, &s.id);
    out.push_str("\naddresses = [");
    for (i, ip) in s.addresses.iter().enumerate() {
        if i > 0 {
            out.push_str(", ");
        }
        out.push('"');
        push_ip(out, ip);
        out.push('"');
    }
    out.push_str("]\npolicy = ");
    toml_string(out, &policy);
    if let Some(name) = &s.policies().name {
        out.push_str("\npolicy_name = ");
        toml_string(out, name);
    }
    out.push('\n');
    Some(())
}

impl SandboxTable {
    /// The table file that builds this table (whose file is at `path`), as
    /// the control API writes it back: each sandbox's entry in the table's
    /// order, its addresses in canonical form, its policy path relative to
    /// the table's folder when it is inside it, the networks as prefixes;
    /// the same text [`File::to_toml`] writes for the same entries.
    /// Written straight from the table in force, no copy of its entries
    /// made. `None` for a policy path that is not UTF-8.
    pub(crate) fn to_toml(&self, path: &Path) -> Option<String> {
        let base = path.parent().unwrap_or(Path::new("."));
        let base_text = base.to_str();
        let mut out = String::with_capacity(64 + self.len() * 100);
        let networks: Vec<String> = self.networks().iter().map(ToString::to_string).collect();
        head(&mut out, &networks, self.interfaces());
        for s in self.sandboxes() {
            sandbox_entry(&mut out, s, base, base_text)?;
        }
        Some(out)
    }

    /// Sandbox `id`'s entry alone, as [`SandboxTable::to_toml`] writes it
    /// (what the file gains when it is added at the end); `None` when the
    /// table has no such sandbox or its policy path is not UTF-8.
    pub(crate) fn entry_toml(&self, id: &str, path: &Path) -> Option<String> {
        let base = path.parent().unwrap_or(Path::new("."));
        let mut out = String::with_capacity(128);
        sandbox_entry(&mut out, self.get(id)?, base, base.to_str())?;
        Some(out)
    }
}

/// `text`, a table file as [`SandboxTable::to_toml`] writes it, with
/// sandbox `id`'s entry replaced by `new` (an entry as
/// [`SandboxTable::entry_toml`] writes it; `None`: cut out). `None` when
/// the file has no entry for `id`. An entry starts with a line break and
/// `[[sandbox]]` and its `id` line, and ends where the next starts: no
/// string the writer writes holds a line break (it escapes them), and an
/// id holds no quote, so the lines found are the entry's own.
pub(crate) fn splice_entry(text: &str, id: &str, new: Option<&str>) -> Option<String> {
    const NEXT: &str = "\n[[sandbox]]\n";
    if !valid_id(id) {
        return None;
    }
    let find = |hay: &str, needle: &str| memchr::memmem::find(hay.as_bytes(), needle.as_bytes());
    let start = find(text, &format!("{NEXT}id = \"{id}\"\n"))?;
    let end = find(text.get(start + 1..)?, NEXT).map_or(text.len(), |e| start + 1 + e);
    let mut out = String::with_capacity(text.len() + new.map_or(0, str::len));
    out.push_str(text.get(..start)?);
    out.push_str(new.unwrap_or(""));
    out.push_str(text.get(end..)?);
    Some(out)
}
