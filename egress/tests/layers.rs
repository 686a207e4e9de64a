//! The daemon's rooms form one-way layers (docs/egress.md, "How the code is
//! laid out"): every `crate::` and `super::` path in `egress/src` (outside
//! comments and test modules) points to a room of the same stage or a lower
//! one, and no two rooms reach each other, however far round. A connection's
//! walk goes down: a front door reads the client, the shared tunnel and the
//! HTTP exchange carry what the gate allowed, the gate decides, resolves and
//! dials, and below it nothing answers a client — a refusal is a value
//! (`outcome::Refusal`) that only a front door writes, through `reply`.
//!
//! A new file must be given its stage here.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// The stages, bottom first; each room is a file's module path (`host::nft`),
/// or a folder kept as one room (`policy`, `resolve`, `exchange`).
const STAGES: &[(&str, &[&str])] = &[
    (
        "words and plumbing: what became of a request, counters, byte relays, buffered connections, nftables parts, file notifications, the control API's client, nf_tables elements over netlink, the sandbox table's shared pieces",
        &[
            "notify",
            "outcome",
            "metrics",
            "relay",
            "conn",
            "host::addr",
            "host::expr",
            "host::ports",
            "host::client",
            "host::netlink",
            "host::shards",
        ],
    ),
    (
        "the policy in force, accept loops, pooled connections, vetted answers",
        &[
            "policy",
            "listener",
            "pool",
            "resolve::cache",
            "host::boundary",
        ],
    ),
    (
        "built on the policy: its watcher, fleets, resolution, the /metrics endpoint, the main nftables table and the record of what it holds",
        &[
            "watch",
            "fleet",
            "resolve",
            "metrics_server",
            "testing",
            "host::answered",
            "host::nft",
            "host::layout",
        ],
    ),
    ("the gate: decide, resolve, dial", &["gate"]),
    (
        "what carries what the gate allowed: one HTTP exchange, the shared tunnel; host mode's sandboxes and kernel side",
        &[
            "exchange",
            "tunnel",
            "host::table",
            "host::table_file",
            "host::passes",
            "host::kernel",
            "host::state",
            "host::state_files",
            "host::state_write",
        ],
    ),
    (
        "how a front door answers: refusals written to a client, the adapters' common start",
        &["reply", "adapter"],
    ),
    (
        "the front doors",
        &[
            "http",
            "http::connect",
            "socks",
            "dns",
            "squid",
            "ext_authz",
            "srt_decider",
            "host::transparent",
            "host::resolver",
            "host::control",
        ],
    ),
    ("host mode's daemon", &["host::run", "host"]),
];

/// The stage whose rooms are the gate; nothing below it may write to a
/// client.
const GATE: &str = "gate";

/// The rooms that write to a client: nothing below the gate may use them.
const WRITES_TO_CLIENTS: &[&str] = &["reply"];

fn stage_of(room: &str) -> Option<usize> {
    STAGES.iter().position(|(_, rooms)| rooms.contains(&room))
}

/// Every room, and the source of each file in it.
fn sources(src: &Path) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let mut stack = vec![src.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
                continue;
            }
            if path.extension().and_then(|e| e.to_str()) != Some("rs") {
                continue;
            }
            let rel = path.strip_prefix(src).unwrap().with_extension("");
            let mut module: Vec<String> = rel
                .components()
                .map(|c| c.as_os_str().to_string_lossy().into_owned())
                .collect();
            if module.last().is_some_and(|m| m == "mod") {
                module.pop();
            }
            let module = module.join("::");
            if module == "lib" || module == "main" {
                continue;
            }
            let text = std::fs::read_to_string(&path).unwrap();
            out.insert(module, text);
        }
    }
    out
}

/// The code of a file without comments and without its test modules
/// (`#[cfg(test)] mod x;` and a `#[cfg(test)] mod x { ... }` that runs to
/// the end of the file).
fn code(text: &str) -> String {
    let mut out = String::new();
    let mut lines = text.lines().peekable();
    while let Some(line) = lines.next() {
        if line.trim() == "#[cfg(test)]" {
            // Attributes, then the module.
            let mut item = lines.next().unwrap_or("");
            while item.trim_start().starts_with("#[") {
                // An attribute over several lines ends with `)]`.
                while !item.trim_end().ends_with(']') {
                    item = lines.next().unwrap_or("]");
                }
                item = lines.next().unwrap_or("");
            }
            if item.trim_end().ends_with(';') {
                continue;
            }
            break;
        }
        out.push_str(line.split("//").next().unwrap_or(""));
        out.push('\n');
    }
    out
}

/// The room a module path belongs to: the longest known room it starts
/// with.
fn room_of<'a>(path: &[&str], rooms: &'a BTreeSet<String>) -> Option<&'a String> {
    (1..=path.len())
        .rev()
        .find_map(|n| rooms.get(&path.get(..n).unwrap().join("::")))
}

/// Paths after `prefix` in `code`: `prefix a::b::{c, d::e}` gives `a::b`,
/// `a::b::c` and `a::b::d::e` (enough to find the room of each).
fn paths_after(code: &str, prefix: &str) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    let mut rest = code;
    while let Some(i) = rest.find(prefix) {
        let before = rest[..i].chars().last();
        rest = &rest[i + prefix.len()..];
        if before.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_') {
            continue; // `gatehouse_wire::...` is not `wire::...`
        }
        let mut path: Vec<String> = Vec::new();
        let mut r = rest;
        loop {
            let name: String = r
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            if name.is_empty() {
                break;
            }
            path.push(name.clone());
            r = &r[name.len()..];
            if let Some(after) = r.strip_prefix("::") {
                if let Some(group) = after.strip_prefix('{') {
                    let end = group.find('}').unwrap_or(group.len());
                    for part in group[..end].split(',') {
                        let mut p = path.clone();
                        p.extend(
                            part.trim()
                                .split("::")
                                .map(|s| s.split_whitespace().next().unwrap_or("").to_string())
                                .filter(|s| !s.is_empty() && s != "self"),
                        );
                        out.push(p);
                    }
                    break;
                }
                r = after;
            } else {
                break;
            }
        }
        if !path.is_empty() {
            out.push(path);
        }
    }
    out
}

/// Every room each room uses (itself and its own files aside).
fn arrows(files: &BTreeMap<String, String>) -> BTreeMap<String, BTreeSet<String>> {
    let rooms: BTreeSet<String> = STAGES
        .iter()
        .flat_map(|(_, r)| r.iter().map(|s| s.to_string()))
        .collect();
    let mut out: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (module, text) in files {
        let parts: Vec<&str> = module.split("::").collect();
        let Some(from) = room_of(&parts, &rooms).cloned() else {
            // A file of no room is reported by `every_file_has_a_room`.
            continue;
        };
        let code = code(text);
        let mut used = Vec::new();
        for p in paths_after(&code, "crate::") {
            used.push(p);
        }
        // `super::x` from `a/b.rs` (module `a::b`) is `a::x`, and from
        // `a/mod.rs` (module `a`) it is `x`: the module path less its last
        // name, either way.
        let is_folder = files.keys().any(|k| k.starts_with(&format!("{module}::")));
        let parent: Vec<String> = parts[..parts.len().saturating_sub(1)]
            .iter()
            .map(|s| s.to_string())
            .collect();
        for p in paths_after(&code, "super::") {
            let mut full = parent.clone();
            full.extend(p);
            used.push(full);
        }
        // A folder's own files named from its mod.rs (`child::f()`), but
        // not its re-exports (`pub use child::X`): the folder's facade.
        if is_folder {
            for line in code
                .lines()
                .filter(|l| !l.trim_start().starts_with("pub use"))
            {
                for key in files.keys() {
                    if let Some(child) = key.strip_prefix(&format!("{module}::"))
                        && !child.contains("::")
                    {
                        for p in paths_after(line, &format!("{child}::")) {
                            let mut full: Vec<String> =
                                parts.iter().map(|s| s.to_string()).collect();
                            full.push(child.to_string());
                            full.extend(p);
                            used.push(full);
                        }
                    }
                }
            }
        }
        let entry = out.entry(from.clone()).or_default();
        for p in used {
            let refs: Vec<&str> = p.iter().map(String::as_str).collect();
            if let Some(to) = room_of(&refs, &rooms)
                && *to != from
            {
                entry.insert(to.clone());
            }
        }
    }
    out
}

/// Arrows that run up a stage, rooms below the gate that use a room that
/// writes to a client, and circles.
fn violations(files: &BTreeMap<String, String>) -> Vec<String> {
    let arrows = arrows(files);
    let gate = stage_of(GATE).unwrap();
    let mut out = Vec::new();
    for (from, tos) in &arrows {
        let s = stage_of(from).unwrap();
        for to in tos {
            let t = stage_of(to).unwrap();
            if t > s {
                out.push(format!(
                    "{from} ({}) uses {to} ({}), a later stage",
                    STAGES[s].0, STAGES[t].0
                ));
            }
            if s < gate && WRITES_TO_CLIENTS.contains(&to.as_str()) {
                out.push(format!(
                    "{from}, below the gate, uses {to}, which writes to clients"
                ));
            }
        }
    }
    // Circles: a room that reaches itself.
    for start in arrows.keys() {
        let mut seen = BTreeSet::new();
        let mut todo: Vec<&String> = arrows[start].iter().collect();
        while let Some(r) = todo.pop() {
            if r == start {
                out.push(format!("{start} reaches itself (a circle)"));
                break;
            }
            if seen.insert(r.clone()) {
                todo.extend(arrows.get(r).into_iter().flatten());
            }
        }
    }
    out
}

fn src() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

#[test]
fn every_file_has_a_room() {
    let rooms: BTreeSet<String> = STAGES
        .iter()
        .flat_map(|(_, r)| r.iter().map(|s| s.to_string()))
        .collect();
    for module in sources(&src()).keys() {
        let parts: Vec<&str> = module.split("::").collect();
        // Test-only files (`host/tests.rs`, `exchange/robustness.rs`)
        // belong to the room of their folder.
        assert!(
            room_of(&parts, &rooms).is_some(),
            "egress/src: {module} has no stage in egress/tests/layers.rs"
        );
    }
    let mut all: Vec<&str> = STAGES.iter().flat_map(|(_, r)| r.iter().copied()).collect();
    let n = all.len();
    all.sort_unstable();
    all.dedup();
    assert_eq!(all.len(), n, "a room in two stages");
}

#[test]
fn rooms_form_one_way_layers() {
    let files = sources(&src());
    let found = violations(&files);
    assert!(found.is_empty(), "{}", found.join("\n"));
    // The walk of a connection goes down: the front doors reach the gate
    // only from above.
    let arrows = arrows(&files);
    for door in ["http", "socks", "host::transparent"] {
        assert!(
            arrows[door].contains("tunnel") || arrows[door].contains("exchange"),
            "{door}: {:?}",
            arrows[door]
        );
    }
}

/// The check fails on what it is for: a room below the gate that uses the
/// room that writes to clients, an arrow up, and a circle.
#[test]
fn the_check_fails_on_a_room_below_the_gate_that_answers_clients() {
    let files = sources(&src());
    let mut broken = files.clone();
    // Added at the top: a file's test module runs to its end.
    broken
        .get_mut("resolve")
        .unwrap()
        .insert_str(0, "use crate::reply::refuse;\n");
    let found = violations(&broken);
    assert!(
        found.iter().any(|v| v.contains("writes to clients")),
        "{found:?}"
    );
    let mut up = files.clone();
    up.get_mut("pool")
        .unwrap()
        .insert_str(0, "use crate::gate::Ctx;\n");
    let found = violations(&up);
    assert!(
        found
            .iter()
            .any(|v| v.starts_with("pool") && v.contains("later stage")),
        "{found:?}"
    );
    let mut circle = files.clone();
    circle
        .get_mut("host::expr")
        .unwrap()
        .insert_str(0, "use super::addr::canonical;\n");
    circle
        .get_mut("host::addr")
        .unwrap()
        .insert_str(0, "use super::expr::TABLE;\n");
    let found = violations(&circle);
    assert!(found.iter().any(|v| v.contains("circle")), "{found:?}");
    // Comments and test modules are not code.
    let mut quiet = files.clone();
    quiet
        .get_mut("pool")
        .unwrap()
        .insert_str(0, "// crate::gate::Ctx\n#[cfg(test)]\nmod x;\n");
    assert!(violations(&quiet).is_empty());
}
