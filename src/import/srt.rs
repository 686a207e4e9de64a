//! `policyc import srt`: sandbox-runtime settings (`~/.srt-settings.json`,
//! npm package `@anthropic-ai/sandbox-runtime`) as gatehouse policy text.
//!
//! What maps (docs/importing.md has the table): `network.allowedDomains`
//! and `deniedDomains` (names, `*.x` subdomains, `:PORT` suffixes, IP
//! literals), `deniedResolvedAddresses`, `allowUnixSockets`,
//! `allowAllUnixSockets`, `allowLocalBinding`, and every list of
//! `filesystem` (`allowWrite`, `denyWrite`, `denyRead`, `allowRead`) as
//! file rules; the other keys configure the sandbox itself and are listed as
//! skipped. sandbox-runtime has no approvals: what it does not allow fails,
//! so the policy says `approvals never`.

use std::fmt::Write as _;

use serde_json::Value;

use super::{Import, Input, Note, Severity};

/// Top-level keys that decide nothing here.
const SKIPPED: &[&str] = &[
    "ignoreViolations",
    "enableWeakerNestedSandbox",
    "enableWeakerNetworkIsolation",
    "allowAppleEvents",
    "mandatoryDenySearchDepth",
    "allowPty",
    "ripgrep",
    "windows",
    "seccomp",
    "credentials",
    "javaAgentJarPath",
];

const NETWORK: &[&str] = &[
    "allowedDomains",
    "deniedDomains",
    "deniedDomainReasons",
    "deniedResolvedAddresses",
    "allowUnixSockets",
    "allowAllUnixSockets",
    "allowLocalBinding",
    "httpProxyPort",
    "socksProxyPort",
    "parentProxy",
    "mitmProxy",
    "tlsTerminate",
    "filterRequest",
];

const FILESYSTEM: &[&str] = &["denyRead", "allowRead", "allowWrite", "denyWrite"];

struct Doc<'t> {
    text: &'t str,
    notes: Vec<Note>,
}

impl Doc<'_> {
    /// The line of the first `"needle"` at or after line `from` (best
    /// effort: JSON values keep no positions).
    fn line_of(&self, needle: &str, from: usize) -> usize {
        super::json_line_of(self.text, needle, from)
    }
    fn note(&mut self, severity: Severity, line: usize, message: String) {
        self.notes
            .push(Note::new(severity, Input::Config, line, message));
    }
    fn strings(&mut self, v: Option<&Value>, key: &str, from: usize) -> Vec<(String, usize)> {
        match v {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::Array(items)) => {
                let mut out = Vec::new();
                let mut at = from;
                for i in items {
                    match i {
                        Value::String(s) => {
                            at = self.line_of(s, at);
                            out.push((s.clone(), at));
                        }
                        _ => self.note(
                            Severity::Error,
                            at,
                            format!("`{key}` entries must be strings"),
                        ),
                    }
                }
                out
            }
            Some(_) => {
                self.note(
                    Severity::Error,
                    from,
                    format!("`{key}` must be a list of strings"),
                );
                Vec::new()
            }
        }
    }
    fn boolean(&mut self, v: Option<&Value>, key: &str, line: usize) -> bool {
        match v {
            None | Some(Value::Null) => false,
            Some(Value::Bool(b)) => *b,
            Some(_) => {
                self.note(
                    Severity::Error,
                    line,
                    format!("`{key}` must be true or false"),
                );
                false
            }
        }
    }
    fn unknown(&mut self, key: &str, line: usize, known: &[&str]) {
        let last = key.rsplit('.').next().unwrap_or(key);
        let hint = crate::diag::did_you_mean(last, known.iter().copied())
            .map(|h| format!(" ({h})"))
            .unwrap_or_default();
        self.note(
            Severity::Warning,
            line,
            format!("unknown key `{key}` ignored{hint}"),
        );
    }
}

/// Imports sandbox-runtime settings (JSON).
pub fn import(text: &str) -> Import {
    let mut doc = Doc {
        text,
        notes: Vec::new(),
    };
    let root: serde_json::Map<String, Value> = match serde_json::from_str(text) {
        Ok(Value::Object(m)) => m,
        Ok(_) => {
            doc.note(
                Severity::Error,
                1,
                "not sandbox-runtime settings: expected a JSON object".into(),
            );
            return Import {
                text: String::new(),
                notes: doc.notes,
            };
        }
        Err(e) => {
            doc.note(Severity::Error, e.line(), format!("not valid JSON: {e}"));
            return Import {
                text: String::new(),
                notes: doc.notes,
            };
        }
    };
    let empty = serde_json::Map::new();
    let section = |doc: &mut Doc<'_>, key: &str| -> (&serde_json::Map<String, Value>, usize) {
        let line = doc.line_of(key, 1);
        match root.get(key) {
            Some(Value::Object(m)) => (m, line),
            None | Some(Value::Null) => (&empty, line),
            Some(_) => {
                doc.note(Severity::Error, line, format!("`{key}` must be an object"));
                (&empty, line)
            }
        }
    };
    let (net, net_line) = section(&mut doc, "network");
    let (fs, fs_line) = section(&mut doc, "filesystem");
    let skipped = known_keys(&mut doc, &root, (net, net_line), (fs, fs_line));
    let lists = NetLists::read(&mut doc, net, net_line);
    let fs_lists = FsLists::read(&mut doc, fs, fs_line);

    let mut out = String::new();
    out.push_str("# Imported from sandbox-runtime settings by `policyc import srt`.\n");
    if !skipped.is_empty() {
        let _ = writeln!(
            out,
            "# Skipped (they decide nothing here): {}.",
            skipped.join(", ")
        );
    }
    out.push_str("policy srt {\n");
    fs_sandbox(&mut doc, &mut out, &fs_lists);
    out.push_str(
        "  approvals never  # sandbox-runtime has no approvals: what it does not allow fails\n",
    );
    network_block(&mut doc, &mut out, &lists, net_line);
    out.push_str("}\n");
    super::validated(out, doc.notes)
}

type Section<'a> = (&'a serde_json::Map<String, Value>, usize);

/// Warns of every unknown key (with a did-you-mean) and returns the known
/// keys that decide nothing here, for the header.
fn known_keys(
    doc: &mut Doc<'_>,
    root: &serde_json::Map<String, Value>,
    (net, net_line): Section<'_>,
    (fs, fs_line): Section<'_>,
) -> Vec<String> {
    let mut skipped = Vec::new();
    for k in root.keys() {
        let line = doc.line_of(k, 1);
        match k.as_str() {
            "network" | "filesystem" => {}
            k if SKIPPED.contains(&k) => skipped.push(k.to_string()),
            other => {
                let known: Vec<&str> = ["network", "filesystem"]
                    .iter()
                    .chain(SKIPPED)
                    .copied()
                    .collect();
                doc.unknown(other, line, &known);
            }
        }
    }
    for k in net.keys() {
        if !NETWORK.contains(&k.as_str()) {
            let line = doc.line_of(k, net_line);
            doc.unknown(&format!("network.{k}"), line, NETWORK);
        } else if !matches!(
            k.as_str(),
            "allowedDomains"
                | "deniedDomains"
                | "deniedResolvedAddresses"
                | "allowUnixSockets"
                | "allowAllUnixSockets"
                | "allowLocalBinding"
        ) {
            skipped.push(format!("network.{k}"));
        }
    }
    for k in fs.keys() {
        let line = doc.line_of(k, fs_line);
        match k.as_str() {
            "allowWrite" | "denyWrite" | "denyRead" | "allowRead" => {}
            other => doc.unknown(&format!("filesystem.{other}"), line, FILESYSTEM),
        }
    }
    skipped
}

/// The `network` lists and switches gatehouse reads, each entry with its
/// line.
struct NetLists {
    allowed: Vec<(String, usize)>,
    denied: Vec<(String, usize)>,
    resolved_denied: Vec<(String, usize)>,
    sockets: Vec<(String, usize)>,
    /// `allowAllUnixSockets: true`, at this line.
    all_sockets: Option<usize>,
    /// `allowLocalBinding: true`, at this line.
    local: Option<usize>,
}

impl NetLists {
    fn read(doc: &mut Doc<'_>, net: &serde_json::Map<String, Value>, net_line: usize) -> Self {
        let list = |doc: &mut Doc<'_>, key: &str| {
            let l = doc.line_of(key, net_line);
            doc.strings(net.get(key), &format!("network.{key}"), l)
        };
        let allowed = list(doc, "allowedDomains");
        let denied = list(doc, "deniedDomains");
        let resolved_denied = list(doc, "deniedResolvedAddresses");
        let sockets = list(doc, "allowUnixSockets");
        let switch = |doc: &mut Doc<'_>, key: &str| {
            let l = doc.line_of(key, net_line);
            doc.boolean(net.get(key), &format!("network.{key}"), l)
                .then_some(l)
        };
        let all_sockets = switch(doc, "allowAllUnixSockets");
        let local = switch(doc, "allowLocalBinding");
        NetLists {
            allowed,
            denied,
            resolved_denied,
            sockets,
            all_sockets,
            local,
        }
    }
}

/// The `network { … }` block: allow-only, local deny, the lists as rules.
fn network_block(doc: &mut Doc<'_>, out: &mut String, lists: &NetLists, net_line: usize) {
    let deny_all = lists.denied.iter().find(|(d, _)| d == "*").map(|(_, l)| *l);
    if let Some((d, l)) = lists.denied.iter().find(|(d, _)| d.starts_with("*:")) {
        doc.note(
            Severity::Error,
            *l,
            format!("`network.deniedDomains` entry \"{d}\" (every host on one port) cannot be expressed: gatehouse denies names on a port only one pattern at a time"),
        );
    }
    let _ = writeln!(
        out,
        "  network {{  # network (line {net_line}): allow-only, everything else denied"
    );
    out.push_str("    default deny\n");
    out.push_str("    local deny  # loopback, link-local, metadata and private addresses need an exact `allow ip`\n");
    // allowLocalBinding lets the sandboxed process bind local ports. On
    // Linux sandbox-runtime ignores it: the command's network namespace has
    // a loopback of its own, and the host's stays closed to it (its proxy
    // refuses 127.0.0.1 unless a list names it). On macOS it also opens
    // connections to the host's loopback. gatehouse takes the Linux
    // reading, the stricter: nothing opens (tests/srt/compare.sh holds it).
    if let Some(l) = lists.local {
        let _ = writeln!(
            out,
            "    # network.allowLocalBinding (line {l}): binding inside the sandbox needs no rule; the host's loopback stays closed, as under sandbox-runtime on Linux (for a local server, `allow ip 127.0.0.1 port N`)"
        );
    }
    for (d, l) in &lists.denied {
        if d == "*" || d.starts_with("*:") {
            continue;
        }
        if let Some(rule) = super::zerocode::domain_rule(d, false) {
            let _ = writeln!(out, "    {rule}  # network.deniedDomains (line {l})");
        }
    }
    for (a, l) in &lists.resolved_denied {
        let target = if a.contains('/') { "cidr" } else { "ip" };
        let _ = writeln!(
            out,
            "    deny {target} {a}  # network.deniedResolvedAddresses (line {l})"
        );
    }
    for (d, l) in &lists.allowed {
        if let Some(at) = deny_all {
            doc.note(
                Severity::Warning,
                *l,
                format!("`network.allowedDomains` entry \"{d}\" is left out: \"*\" in deniedDomains (line {at}) denies every host"),
            );
            continue;
        }
        if let Some(rule) = super::zerocode::domain_rule(d, true) {
            let _ = writeln!(out, "    {rule}  # network.allowedDomains (line {l})");
        }
    }
    for (s, l) in &lists.sockets {
        // sandbox-runtime expands `~` when it starts; a policy's socket path
        // is absolute and fixed, and the home is not known here. Left out
        // (the socket stays refused: the stricter reading), never an error.
        if s.starts_with('~') {
            doc.note(
                Severity::Warning,
                *l,
                format!("`network.allowUnixSockets` entry \"{s}\" is left out: a socket path in a policy is absolute, and `~` is the home of whoever runs srt; write the absolute path to allow it"),
            );
            continue;
        }
        let _ = writeln!(
            out,
            "    allow socket {}  # network.allowUnixSockets (line {l})",
            crate::query::quote_string(s)
        );
    }
    if let Some(l) = lists.all_sockets {
        let _ = writeln!(
            out,
            "    allow socket *  # network.allowAllUnixSockets (line {l})"
        );
    }
    out.push_str("  }\n");
}

/// The four `filesystem` lists, each entry with its line.
struct FsLists {
    allow_write: Vec<(String, usize)>,
    deny_write: Vec<(String, usize)>,
    deny_read: Vec<(String, usize)>,
    allow_read: Vec<(String, usize)>,
}

impl FsLists {
    fn read(doc: &mut Doc<'_>, fs: &serde_json::Map<String, Value>, fs_line: usize) -> Self {
        let list = |doc: &mut Doc<'_>, key: &str| {
            let l = doc.line_of(key, fs_line);
            doc.strings(fs.get(key), &format!("filesystem.{key}"), l)
        };
        FsLists {
            allow_write: list(doc, "allowWrite"),
            deny_write: list(doc, "denyWrite"),
            deny_read: list(doc, "denyRead"),
            allow_read: list(doc, "allowRead"),
        }
    }
}

/// An entry as a gatehouse path: `./` and a trailing `/` or `/**` dropped
/// (sandbox-runtime reads `dir/**` as the directory); relative entries are
/// in the workspace (the directory the command runs in), `~` in the home.
fn clean(entry: &str) -> String {
    let p = entry.strip_prefix("./").unwrap_or(entry);
    let p = p.strip_suffix("/**").unwrap_or(p);
    let p = p.trim_end_matches('/');
    match p {
        "" if entry.starts_with('/') => "/".into(),
        "" => ".".into(),
        _ => p.to_string(),
    }
}

fn is_glob(p: &str) -> bool {
    p.contains(['*', '?', '['])
}

/// `p` is `root` or lies beneath it (both cleaned, neither a glob).
fn under(p: &str, root: &str) -> bool {
    root == "." && !p.starts_with(['/', '~'])
        || p == root
        || p.strip_prefix(root).is_some_and(|r| r.starts_with('/'))
        || root == "/" && p.starts_with('/')
}

/// `sandbox workspace-write { ... }` from the four lists, as
/// sandbox-runtime on Linux enforces them: reads are open except
/// `denyRead` (`none`; `allowRead` inside a denied directory reads again),
/// writes only under `allowWrite` and `/tmp/claude` (`writable`; without
/// `.` the workspace is `read`), `denyWrite` inside them (`read`). A glob in
/// `denyWrite` takes write away everywhere it matches (sandbox-runtime on
/// Linux skips it: stricter); a glob in `allowWrite` cannot grant and is
/// left out with a warning, as sandbox-runtime on Linux leaves it out.
/// The files and folders sandbox-runtime 0.0.83 never lets a command write in
/// its working directory (`.git/hooks` and `.git/config` are covered by
/// gatehouse's own protection of all of `.git`).
const SRT_PROTECTED_NAMES: [&str; 11] = [
    ".gitconfig",
    ".gitmodules",
    ".bashrc",
    ".bash_profile",
    ".zshrc",
    ".zprofile",
    ".profile",
    ".ripgreprc",
    ".mcp.json",
    ".vscode",
    ".idea",
];
/// The deeper folders among sandbox-runtime's fixed write protections.
const SRT_PROTECTED_PATHS: [&str; 2] = [".claude/commands", ".claude/agents"];

/// The `allowRead` entry that sandbox-runtime on Linux binds read-only over
/// the write path `c`: a literal folder strictly above `c`, itself strictly
/// inside a literal `denyRead` folder (its read-only bind comes after the
/// write binds that the denied folder's tmpfs made it restore).
fn shadowed_write(c: &str, fs: &FsLists) -> Option<String> {
    let literal = |p: &String| {
        let p = clean(p);
        (crate::normalize::FilePattern::parse(&p).is_ok() && !is_glob(&p)).then_some(p)
    };
    let denied: Vec<String> = fs
        .deny_read
        .iter()
        .filter_map(|(p, _)| literal(p))
        .collect();
    fs.allow_read
        .iter()
        .filter_map(|(p, _)| literal(p))
        .find(|r| r != c && r != "." && under(c, r) && denied.iter().any(|h| h != r && under(r, h)))
}

fn fs_sandbox(doc: &mut Doc<'_>, out: &mut String, fs: &FsLists) {
    let q = crate::query::quote_string;
    let mut lines: Vec<String> = Vec::new();
    let workspace = fs.allow_write.iter().any(|(p, _)| clean(p) == ".");
    let mut roots: Vec<String> = vec!["/tmp/claude".into()];
    if workspace {
        roots.push(".".into());
    }
    let mut tmp = false;
    for (p, l) in &fs.allow_write {
        let c = clean(p);
        if c == "." {
            continue;
        }
        if let Err(e) = crate::normalize::FilePattern::parse(&c) {
            doc.note(Severity::Warning, *l, format!("`filesystem.allowWrite` entry \"{p}\" is not a path gatehouse can name ({e}); writes there are denied"));
        } else if is_glob(&c) {
            doc.note(Severity::Warning, *l, format!("`filesystem.allowWrite` entry \"{p}\" is a glob: a glob cannot make paths writable (sandbox-runtime on Linux skips it too); writes there are denied"));
        } else if let Some(r) = shadowed_write(&c, fs) {
            // sandbox-runtime 0.0.83 on Linux binds an allowRead folder
            // inside a denyRead one read-only after the write binds, so a
            // write path beneath it is read-only there.
            doc.note(Severity::Warning, *l, format!("`filesystem.allowWrite` entry \"{p}\" lies in `filesystem.allowRead` entry \"{r}\" inside a denied folder: sandbox-runtime on Linux binds that folder read-only over it, so writes there are denied"));
            lines.push(format!(
                "    # filesystem.allowWrite (line {l}): {} is read-only under sandbox-runtime on Linux (inside allowRead {})",
                q(&c),
                q(&r)
            ));
        } else if c == "/tmp" {
            tmp = true;
        } else if workspace && under(&c, ".") {
            // Already writable: the workspace is.
        } else {
            lines.push(format!(
                "    writable {}  # filesystem.allowWrite (line {l})",
                q(&c)
            ));
            roots.push(c);
        }
    }
    if tmp {
        roots.push("/tmp".into());
    } else {
        lines.insert(
            0,
            "    exclude \"/tmp\"  # filesystem.allowWrite does not list /tmp".into(),
        );
        lines.insert(
            1,
            "    writable \"/tmp/claude\"  # writable under sandbox-runtime without being listed"
                .into(),
        );
    }
    if workspace {
        // sandbox-runtime (sandbox-utils.js DANGEROUS_FILES and
        // getDangerousDirectories, linux-sandbox-utils.js
        // linuxGetCwdMandatoryDenyPaths) always denies writes to these in the
        // working directory, whatever the settings say.
        lines.push(format!(
            "    protect {}  # sandbox-runtime's fixed write protections",
            SRT_PROTECTED_NAMES.map(q).join(" ")
        ));
        lines.push(format!(
            "    read {}  # sandbox-runtime's fixed write protections",
            SRT_PROTECTED_PATHS.map(q).join(" ")
        ));
    } else {
        lines.push("    read \".\"  # filesystem.allowWrite does not list \".\": the workspace is not writable".into());
    }
    let writable = |c: &str| roots.iter().any(|r| under(c, r));
    for (p, l) in &fs.deny_write {
        let c = clean(p);
        if let Err(e) = crate::normalize::FilePattern::parse(&c) {
            doc.note(Severity::Warning, *l, format!("`filesystem.denyWrite` entry \"{p}\" is not a path gatehouse can name ({e}); left out"));
        } else if is_glob(&c) || writable(&c) {
            lines.push(format!(
                "    read {}  # filesystem.denyWrite (line {l})",
                q(&c)
            ));
        } else {
            lines.push(format!(
                "    # filesystem.denyWrite (line {l}): {} is not writable anyway",
                q(&c)
            ));
        }
    }
    let mut hidden: Vec<String> = Vec::new();
    for (p, l) in &fs.deny_read {
        let c = clean(p);
        if let Err(e) = crate::normalize::FilePattern::parse(&c) {
            doc.note(Severity::Warning, *l, format!("`filesystem.denyRead` entry \"{p}\" is not a path gatehouse can name ({e}); left out"));
            continue;
        }
        lines.push(format!(
            "    none {}  # filesystem.denyRead (line {l})",
            q(&c)
        ));
        if !is_glob(&c) {
            hidden.push(c);
        }
    }
    for (p, l) in &fs.allow_read {
        let c = clean(p);
        if crate::normalize::FilePattern::parse(&c).is_err() || is_glob(&c) {
            doc.note(Severity::Warning, *l, format!("`filesystem.allowRead` entry \"{p}\": only a literal path inside a denied directory can be read again; left out"));
        } else if c != "." && hidden.iter().any(|h| under(&c, h) && &c != h) {
            lines.push(format!(
                "    read {}  # filesystem.allowRead (line {l})",
                q(&c)
            ));
        } else {
            lines.push(format!(
                "    # filesystem.allowRead (line {l}): {} is readable already",
                q(&c)
            ));
        }
    }
    if lines.is_empty() {
        out.push_str(
            "  sandbox workspace-write  # filesystem.allowWrite: the workspace and /tmp\n",
        );
        return;
    }
    out.push_str("  sandbox workspace-write {  # filesystem\n");
    for l in lines {
        out.push_str(&l);
        out.push('\n');
    }
    out.push_str("  }\n");
}
