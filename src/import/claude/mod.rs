//! `policyc import claude-code`: Claude Code's settings files (user,
//! project, local and managed, layered as Claude Code layers them) as one
//! gatehouse policy — the tool permissions (`permissions.allow`, `ask`,
//! `deny`, `defaultMode`, ...) and the sandbox (`sandbox.*`, the keys of
//! sandbox-runtime). docs/importing.md has the table and the reasons.

mod emit;
mod rules;
mod sandbox;

use serde_json::Value;

use super::{Import, Input, Note, Severity};

/// Which settings file a file is, in Claude Code's precedence (lowest
/// first): the lists of every layer are joined, a single value comes from
/// the highest layer that sets it.
#[derive(Clone, Copy, Debug, Eq, PartialEq, Ord, PartialOrd)]
#[non_exhaustive]
pub enum Layer {
    /// `~/.claude/settings.json` (`$CLAUDE_CONFIG_DIR/settings.json`).
    User,
    /// `.claude/settings.json` in the project.
    Project,
    /// `.claude/settings.local.json` in the project.
    Local,
    /// `managed-settings.json` (or a file of `managed-settings.d`).
    Managed,
}

impl Layer {
    /// The layer of a settings file, from its name and place: `home` is
    /// the user's home and `config_dir` `$CLAUDE_CONFIG_DIR`, when set.
    pub fn of(
        path: &std::path::Path,
        home: Option<&std::path::Path>,
        config_dir: Option<&std::path::Path>,
    ) -> Layer {
        let name = path.file_name().map(|n| n.to_string_lossy().to_string());
        let parent = path.parent();
        let in_dir =
            |d: Option<&std::path::Path>| d.is_some_and(|d| parent.is_some_and(|p| p == d));
        let managed_dir = parent
            .and_then(|p| p.file_name())
            .is_some_and(|n| n == "managed-settings.d");
        match name.as_deref() {
            Some("managed-settings.json") => Layer::Managed,
            _ if managed_dir => Layer::Managed,
            Some("settings.local.json") => Layer::Local,
            _ if in_dir(config_dir) || in_dir(home.map(|h| h.join(".claude")).as_deref()) => {
                Layer::User
            }
            _ => Layer::Project,
        }
    }
    fn name(self) -> &'static str {
        match self {
            Layer::User => "user",
            Layer::Project => "project",
            Layer::Local => "local",
            Layer::Managed => "managed",
        }
    }
}

/// One settings file to import.
#[derive(Clone, Debug)]
pub struct Settings<'t> {
    /// How notes and the output's comments name it (its path as given).
    pub name: String,
    /// Its text.
    pub text: &'t str,
    /// Its layer.
    pub layer: Layer,
}

/// Keys of a settings file that decide nothing here (listed once in the
/// output's header).
const SKIPPED: &[&str] = &[
    "$schema",
    "env",
    "hooks",
    "disableAllHooks",
    "allowManagedHooksOnly",
    "model",
    "availableModels",
    "statusLine",
    "outputStyle",
    "includeCoAuthoredBy",
    "attribution",
    "cleanupPeriodDays",
    "enabledPlugins",
    "extraKnownMarketplaces",
    "strictKnownMarketplaces",
    "apiKeyHelper",
    "awsAuthRefresh",
    "awsCredentialExport",
    "otelHeadersHelper",
    "forceLoginMethod",
    "forceLoginOrgUUID",
    "companyAnnouncements",
    "theme",
    "spinnerTipsEnabled",
    "alwaysThinkingEnabled",
    "language",
    "autoUpdatesChannel",
    "respectGitignore",
    "fileSuggestion",
    "verbose",
    "feedbackSurveyRate",
    "enableAllProjectMcpServers",
    "enabledMcpjsonServers",
    "disabledMcpjsonServers",
    "allowedMcpServers",
    "deniedMcpServers",
    "skipWebFetchPreflight",
    "showTurnDuration",
    "terminalProgressBarEnabled",
    "prefersReducedMotion",
    "plansDirectory",
    "skipDangerousModePermissionPrompt",
    "autoMemoryEnabled",
    "fastMode",
    "minimumVersion",
];

const PERMISSIONS: &[&str] = &[
    "allow",
    "ask",
    "deny",
    "defaultMode",
    "disableBypassPermissionsMode",
    "additionalDirectories",
    "disableAutoMode",
    "skipDangerousModePermissionPrompt",
];

const SANDBOX: &[&str] = &[
    "enabled",
    "autoAllowBashIfSandboxed",
    "allowUnsandboxedCommands",
    "excludedCommands",
    "network",
    "filesystem",
    "ignoreViolations",
    "enableWeakerNestedSandbox",
    "enableWeakerNetworkIsolation",
    "failIfUnavailable",
];

const NETWORK: &[&str] = &[
    "allowedDomains",
    "deniedDomains",
    "allowUnixSockets",
    "allowAllUnixSockets",
    "allowLocalBinding",
    "httpProxyPort",
    "socksProxyPort",
    "allowManagedDomainsOnly",
];

const FILESYSTEM: &[&str] = &["allowWrite", "denyWrite", "denyRead", "allowRead"];

/// A value with the file and line it came from.
#[derive(Clone, Debug)]
pub(super) struct At<T> {
    pub(super) value: T,
    pub(super) file: usize,
    pub(super) line: usize,
}

/// Every file's settings, joined in Claude Code's precedence.
#[derive(Default)]
pub(super) struct Merged {
    pub(super) allow: Vec<At<String>>,
    pub(super) ask: Vec<At<String>>,
    pub(super) deny: Vec<At<String>>,
    pub(super) default_mode: Option<At<String>>,
    pub(super) additional: Vec<At<String>>,
    pub(super) sandbox_enabled: Option<At<bool>>,
    pub(super) auto_allow: Option<At<bool>>,
    pub(super) unsandboxed: Option<At<bool>>,
    pub(super) excluded: Vec<At<String>>,
    pub(super) allowed_domains: Vec<At<String>>,
    pub(super) denied_domains: Vec<At<String>>,
    pub(super) sockets: Vec<At<String>>,
    pub(super) all_sockets: Option<At<bool>>,
    pub(super) local_binding: Option<At<bool>>,
    pub(super) allow_write: Vec<At<String>>,
    pub(super) deny_write: Vec<At<String>>,
    pub(super) deny_read: Vec<At<String>>,
    pub(super) allow_read: Vec<At<String>>,
    /// `allowManagedPermissionRulesOnly: true` in managed settings.
    pub(super) managed_only: Option<At<bool>>,
    pub(super) skipped: Vec<String>,
}

impl Merged {
    /// A key that decides nothing here, for the header (once).
    fn skip(&mut self, key: String) {
        if !self.skipped.contains(&key) {
            self.skipped.push(key);
        }
    }
}

/// One file being read.
pub(super) struct Doc<'t> {
    pub(super) index: usize,
    pub(super) text: &'t str,
    pub(super) layer: Layer,
}

impl Doc<'_> {
    /// The line of the first `"needle"` at or after line `from` (best
    /// effort: JSON values keep no positions).
    fn line_of(&self, needle: &str, from: usize) -> usize {
        crate::import::json_line_of(self.text, needle, from)
    }
}

/// Notes, each about one file.
pub(super) struct Notes(pub(super) Vec<Note>);

impl Notes {
    pub(super) fn add(&mut self, severity: Severity, file: usize, line: usize, message: String) {
        let input = Input::Settings(u16::try_from(file).unwrap_or(u16::MAX));
        self.0.push(Note::new(severity, input, line, message));
    }
    fn unknown(&mut self, file: usize, key: &str, line: usize, known: &[&str]) {
        let last = key.rsplit('.').next().unwrap_or(key);
        let hint = crate::diag::did_you_mean(last, known.iter().copied())
            .map(|h| format!(" ({h})"))
            .unwrap_or_default();
        self.add(
            Severity::Warning,
            file,
            line,
            format!("unknown key `{key}` ignored{hint}"),
        );
    }
}

/// Imports Claude Code settings files, given in any order: they are
/// layered by `layer` (equal layers in the order given, the later one
/// higher).
pub fn import(files: &[Settings<'_>]) -> Import {
    let mut notes = Notes(Vec::new());
    let mut order: Vec<usize> = (0..files.len()).collect();
    order.sort_by_key(|&i| files.get(i).map(|f| f.layer));
    let mut merged = Merged::default();
    for &i in &order {
        let Some(f) = files.get(i) else { continue };
        let doc = Doc {
            index: i,
            text: f.text,
            layer: f.layer,
        };
        read_file(&doc, &mut merged, &mut notes);
    }
    if notes.0.iter().any(|n| n.severity == Severity::Error) {
        notes.0.sort_by_key(|n| (n.input, n.line));
        return Import {
            text: String::new(),
            notes: notes.0,
        };
    }
    let labels: Vec<String> = files
        .iter()
        .map(|f| format!("{} ({})", f.name, f.layer.name()))
        .collect();
    let layers: Vec<Layer> = files.iter().map(|f| f.layer).collect();
    let text = emit::policy(&merged, &labels, &layers, &mut notes);
    let count = files.len();
    super::validated_by(text, notes.0, &|comment: &str| source_of(comment, count))
}

/// The file and line an output line's comment names: `(line N)`, with
/// `of settings K` when several files were imported.
fn source_of(comment: &str, count: usize) -> (Input, usize) {
    let Some((_, rest)) = comment.rsplit_once("(line ") else {
        return (Input::Settings(0), 0);
    };
    let mut parts = rest.split(')').next().unwrap_or("").split(" of settings ");
    let line = parts
        .next()
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or(0);
    let file = parts
        .next()
        .and_then(|k| k.trim().parse::<u16>().ok())
        .map_or(0, |k| k.saturating_sub(1));
    let file = if count <= 1 { 0 } else { file };
    (Input::Settings(file), line)
}

/// `(line N)`, or `(line N of settings K)` with several files (K from 1,
/// as the header lists them).
pub(super) fn cite<T>(at: &At<T>, count: usize) -> String {
    if count <= 1 {
        format!("(line {})", at.line)
    } else {
        format!("(line {} of settings {})", at.line, at.file + 1)
    }
}

fn read_file(doc: &Doc<'_>, m: &mut Merged, notes: &mut Notes) {
    let f = doc.index;
    let root: serde_json::Map<String, Value> = match serde_json::from_str(doc.text) {
        Ok(Value::Object(r)) => r,
        Ok(_) => {
            notes.add(
                Severity::Error,
                f,
                1,
                "not Claude Code settings: expected a JSON object".into(),
            );
            return;
        }
        Err(e) => {
            notes.add(Severity::Error, f, e.line(), format!("not valid JSON: {e}"));
            return;
        }
    };
    for (k, v) in &root {
        let line = doc.line_of(k, 1);
        match k.as_str() {
            "permissions" => permissions(doc, v, line, m, notes),
            "sandbox" => sandbox(doc, v, line, m, notes),
            "allowManagedPermissionRulesOnly" if doc.layer == Layer::Managed => {
                if let Some(b) = boolean(doc, v, k, line, notes) {
                    m.managed_only = Some(At {
                        value: b,
                        file: f,
                        line,
                    });
                }
            }
            k if SKIPPED.contains(&k) => {
                m.skip(k.to_string());
            }
            other => {
                let known: Vec<&str> = ["permissions", "sandbox"]
                    .iter()
                    .chain(SKIPPED)
                    .copied()
                    .collect();
                notes.unknown(f, other, line, &known);
            }
        }
    }
}

fn object<'v>(
    doc: &Doc<'_>,
    v: &'v Value,
    key: &str,
    line: usize,
    notes: &mut Notes,
) -> Option<&'v serde_json::Map<String, Value>> {
    match v {
        Value::Object(o) => Some(o),
        Value::Null => None,
        _ => {
            notes.add(
                Severity::Error,
                doc.index,
                line,
                format!("`{key}` must be an object"),
            );
            None
        }
    }
}

fn boolean(doc: &Doc<'_>, v: &Value, key: &str, line: usize, notes: &mut Notes) -> Option<bool> {
    match v {
        Value::Bool(b) => Some(*b),
        Value::Null => None,
        _ => {
            notes.add(
                Severity::Error,
                doc.index,
                line,
                format!("`{key}` must be true or false"),
            );
            None
        }
    }
}

fn strings(doc: &Doc<'_>, v: &Value, key: &str, from: usize, notes: &mut Notes) -> Vec<At<String>> {
    let mut out = Vec::new();
    match v {
        Value::Null => {}
        Value::Array(items) => {
            let mut at = from;
            for i in items {
                match i {
                    Value::String(s) => {
                        at = doc.line_of(s, at);
                        out.push(At {
                            value: s.clone(),
                            file: doc.index,
                            line: at,
                        });
                    }
                    _ => notes.add(
                        Severity::Error,
                        doc.index,
                        at,
                        format!("`{key}` entries must be strings"),
                    ),
                }
            }
        }
        _ => notes.add(
            Severity::Error,
            doc.index,
            from,
            format!("`{key}` must be a list of strings"),
        ),
    }
    out
}

fn string(
    doc: &Doc<'_>,
    v: &Value,
    key: &str,
    line: usize,
    notes: &mut Notes,
) -> Option<At<String>> {
    match v {
        Value::String(s) => Some(At {
            value: s.clone(),
            file: doc.index,
            line,
        }),
        Value::Null => None,
        _ => {
            notes.add(
                Severity::Error,
                doc.index,
                line,
                format!("`{key}` must be a string"),
            );
            None
        }
    }
}

/// A `true`/`false` setting with where it was set.
fn flag_at(
    doc: &Doc<'_>,
    v: &Value,
    key: &str,
    line: usize,
    notes: &mut Notes,
) -> Option<At<bool>> {
    boolean(doc, v, key, line, notes).map(|value| At {
        value,
        file: doc.index,
        line,
    })
}

fn permissions(doc: &Doc<'_>, v: &Value, line: usize, m: &mut Merged, notes: &mut Notes) {
    let Some(p) = object(doc, v, "permissions", line, notes) else {
        return;
    };
    for (k, v) in p {
        let l = doc.line_of(k, line);
        let key = format!("permissions.{k}");
        match k.as_str() {
            "allow" => m.allow.extend(strings(doc, v, &key, l, notes)),
            "ask" => m.ask.extend(strings(doc, v, &key, l, notes)),
            "deny" => m.deny.extend(strings(doc, v, &key, l, notes)),
            "additionalDirectories" => m.additional.extend(strings(doc, v, &key, l, notes)),
            "defaultMode" => {
                if let Some(s) = string(doc, v, &key, l, notes) {
                    const MODES: [&str; 6] = [
                        "default",
                        "acceptEdits",
                        "plan",
                        "bypassPermissions",
                        "dontAsk",
                        "auto",
                    ];
                    if MODES.contains(&s.value.as_str()) {
                        m.default_mode = Some(s);
                    } else {
                        let hint = crate::diag::did_you_mean(&s.value, MODES.iter().copied())
                            .map(|h| format!(" ({h})"))
                            .unwrap_or_default();
                        notes.add(
                            Severity::Error,
                            doc.index,
                            l,
                            format!(
                                "`permissions.defaultMode` \"{}\" is not a mode{hint}",
                                s.value
                            ),
                        );
                    }
                }
            }
            // bypassPermissions from a settings file is imported as the
            // default mode (emit.rs), so switching it off changes nothing.
            "disableBypassPermissionsMode"
            | "disableAutoMode"
            | "skipDangerousModePermissionPrompt" => m.skip(key),
            other => notes.unknown(doc.index, &format!("permissions.{other}"), l, PERMISSIONS),
        }
    }
}

fn sandbox(doc: &Doc<'_>, v: &Value, line: usize, m: &mut Merged, notes: &mut Notes) {
    let Some(s) = object(doc, v, "sandbox", line, notes) else {
        return;
    };
    let f = doc.index;
    for (k, v) in s {
        let l = doc.line_of(k, line);
        let key = format!("sandbox.{k}");
        let flag = |notes: &mut Notes| flag_at(doc, v, &key, l, notes);
        match k.as_str() {
            "enabled" => m.sandbox_enabled = flag(notes).or(m.sandbox_enabled.take()),
            "autoAllowBashIfSandboxed" => m.auto_allow = flag(notes).or(m.auto_allow.take()),
            "allowUnsandboxedCommands" => m.unsandboxed = flag(notes).or(m.unsandboxed.take()),
            "excludedCommands" => m.excluded.extend(strings(doc, v, &key, l, notes)),
            "network" => {
                let Some(n) = object(doc, v, &key, l, notes) else {
                    continue;
                };
                for (nk, nv) in n {
                    let nl = doc.line_of(nk, l);
                    let nkey = format!("sandbox.network.{nk}");
                    let nflag = |notes: &mut Notes| flag_at(doc, nv, &nkey, nl, notes);
                    match nk.as_str() {
                        "allowedDomains" => {
                            m.allowed_domains.extend(strings(doc, nv, &nkey, nl, notes))
                        }
                        "deniedDomains" => {
                            m.denied_domains.extend(strings(doc, nv, &nkey, nl, notes))
                        }
                        "allowUnixSockets" => m.sockets.extend(strings(doc, nv, &nkey, nl, notes)),
                        "allowAllUnixSockets" => {
                            m.all_sockets = nflag(notes).or(m.all_sockets.take())
                        }
                        "allowLocalBinding" => {
                            m.local_binding = nflag(notes).or(m.local_binding.take())
                        }
                        "httpProxyPort" | "socksProxyPort" | "allowManagedDomainsOnly" => {
                            m.skip(nkey)
                        }
                        other => notes.unknown(f, &format!("sandbox.network.{other}"), nl, NETWORK),
                    }
                }
            }
            "filesystem" => {
                let Some(fs) = object(doc, v, &key, l, notes) else {
                    continue;
                };
                for (fk, fv) in fs {
                    let fl = doc.line_of(fk, l);
                    let fkey = format!("sandbox.filesystem.{fk}");
                    let list = strings(doc, fv, &fkey, fl, notes).into_iter().map(|mut a| {
                        // A sandbox path is resolved where it is
                        // read (user settings: `~/.claude`).
                        if doc.layer == Layer::User && !a.value.starts_with(['/', '~']) {
                            a.value = format!("user:{}", a.value);
                        }
                        a
                    });
                    match fk.as_str() {
                        "allowWrite" => m.allow_write.extend(list),
                        "denyWrite" => m.deny_write.extend(list),
                        "denyRead" => m.deny_read.extend(list),
                        "allowRead" => m.allow_read.extend(list),
                        other => {
                            notes.unknown(f, &format!("sandbox.filesystem.{other}"), fl, FILESYSTEM)
                        }
                    }
                }
            }
            "ignoreViolations"
            | "enableWeakerNestedSandbox"
            | "enableWeakerNetworkIsolation"
            | "failIfUnavailable" => m.skip(key),
            other => notes.unknown(f, &format!("sandbox.{other}"), l, SANDBOX),
        }
    }
}
