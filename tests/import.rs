//! The importers on every TOML block of the ZeroCode seed and every recipe
//! of the Zoo seed: each imports, passes `check`, and decides as the seed
//! says.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic
)]

use gatehouse::PolicySet;
use gatehouse::import::{Import, Severity};

fn data(name: &str) -> String {
    std::fs::read_to_string(format!(
        "{}/tests/data/import/{name}",
        env!("CARGO_MANIFEST_DIR")
    ))
    .unwrap()
}

/// Imports, requires a clean check, and checks each (query, decision, reason).
fn holds(import: Import, name: &str, rows: &[(&str, &str, &str)]) {
    assert!(!import.has_errors(), "{name}: {:?}", import.notes);
    let set = PolicySet::from_source(name, &import.text)
        .unwrap_or_else(|e| panic!("{name} does not check:\n{e}\n{}", import.text));
    let b = gatehouse::build({
        let mut s = gatehouse::source::SourceMap::new();
        s.add(name, import.text.as_str());
        s
    });
    assert!(
        b.diagnostics.is_empty(),
        "{name} has warnings:\n{}",
        b.render()
    );
    let p = set.policies().next().unwrap();
    for (query, decision, reason) in rows {
        let q = gatehouse::Query::parse(query).unwrap();
        let d = p.decide(&q);
        assert_eq!(
            (d.outcome.as_str(), d.reason.as_str()),
            (*decision, *reason),
            "{name}: `{query}`\n{}",
            import.text
        );
    }
}

fn zerocode(file: &str, rows: &[(&str, &str, &str)]) {
    holds(
        gatehouse::import::zerocode::import(&data(file), None, None, None),
        file,
        rows,
    );
}

fn zoo(file: &str, rows: &[(&str, &str, &str)]) {
    holds(gatehouse::import::zoo::import(&data(file)), file, rows);
}

#[test]
fn zerocode_network_access_alone_is_unrestricted() {
    zerocode(
        "zc-network-access.toml",
        &[
            ("connect anything.example:443", "allow", "unrestricted"),
            ("connect 10.0.0.1:22", "allow", "unrestricted"),
            ("exec cargo build", "allow", "sandboxed"),
        ],
    );
}

#[test]
fn zerocode_the_three_way_table() {
    // Network off + network_proxy on: network stays off.
    zerocode(
        "zc-proxy-only.toml",
        &[("connect api.zerotwo.ai:443", "deny", "network_off")],
    );
    // Network on + network_proxy on: constrained by the policy.
    zerocode(
        "zc-proxy-and-access.toml",
        &[
            ("connect api.zerotwo.ai:443", "allow", "allowed_by_rule"),
            ("connect example.com:443", "deny", "denied_by_rule"),
            ("connect other.example:443", "deny", "not_allowed"),
            ("connect 169.254.169.254:80", "deny", "local_address"),
            ("connect localhost:8080", "deny", "local_address"),
        ],
    );
    // The boolean shorthand, as dotted keys.
    zerocode(
        "zc-shorthand.toml",
        &[("connect api.zerotwo.ai:443", "deny", "not_allowed")],
    );
}

#[test]
fn zerocode_web_search_and_auto_review() {
    zerocode(
        "zc-web-search.toml",
        &[("web_search", "cached", "configured")],
    );
    zerocode(
        "zc-auto-review.toml",
        &[
            ("exec cargo build escalate", "review", "escalation"),
            ("exec cargo build", "allow", "sandboxed"),
            ("prompt request_permissions", "review", "category_prompt"),
        ],
    );
}

#[test]
fn zerocode_config_basics() {
    zerocode(
        "zc-config-basics.toml",
        &[
            ("exec ls", "allow", "known_safe"),
            ("exec cargo build", "ask", "not_known_safe"),
            ("exec bash -lc ls", "deny", "forbidden_by_rule"),
            ("exec bash -c ls", "allow", "known_safe"),
            (r#"write "/w/a" in "/w""#, "ask", "read_only_sandbox"),
            ("connect github.com:443", "deny", "network_off"),
        ],
    );
    zerocode(
        "zc-granular.toml",
        &[
            ("prompt request_permissions", "deny", "category_rejected"),
            ("prompt skill_approval", "deny", "category_rejected"),
            ("exec cargo build escalate", "ask", "escalation"),
            (
                "mcp github/delete_repo destructive=true",
                "ask",
                "destructive_tool",
            ),
        ],
    );
}

#[test]
fn zerocode_profile_files() {
    let base = data("zc-web-search.toml");
    let full = gatehouse::import::zerocode::import(
        &base,
        None,
        Some("full_auto"),
        Some(&data("full_auto.config.toml")),
    );
    holds(
        full,
        "full_auto",
        &[
            ("exec cargo build", "allow", "sandboxed"),
            ("web_search", "cached", "configured"),
        ],
    );
    let quiet = gatehouse::import::zerocode::import(
        &base,
        None,
        Some("readonly_quiet"),
        Some(&data("readonly_quiet.config.toml")),
    );
    holds(
        quiet,
        "readonly_quiet",
        &[
            ("exec cargo build escalate", "deny", "approval_never"),
            (r#"write "/w/a" in "/w""#, "deny", "approval_never"),
        ],
    );
    let table =
        "sandbox_mode = \"read-only\"\n[profiles.open]\nsandbox_mode = \"workspace-write\"\n";
    let open = gatehouse::import::zerocode::import(table, None, Some("open"), None);
    holds(
        open,
        "open",
        &[(r#"write "/w/a" in "/w""#, "allow", "writable_root")],
    );
}

#[test]
fn zerocode_settings_that_decide_nothing_are_skipped_by_name() {
    for f in ["zc-otel.toml", "zc-otel-exporter.toml", "zc-otel-grpc.toml"] {
        let i = gatehouse::import::zerocode::import(&data(f), None, None, None);
        // The one note announces the defaults assumed for what is not set.
        assert_eq!(i.notes.len(), 1, "{f}: {:?}", i.notes);
        assert!(
            i.notes[0]
                .message
                .starts_with("not set, so assumed: `sandbox_mode` = workspace-write"),
            "{f}: {:?}",
            i.notes
        );
        assert!(
            i.text
                .contains("# Skipped (known keys that decide nothing): otel"),
            "{}",
            i.text
        );
        holds(i, f, &[("exec ls", "allow", "sandboxed")]);
    }
}

#[test]
fn zerocode_managed_requirements() {
    let i = gatehouse::import::zerocode::import(
        &data("zc-managed.toml"),
        Some(&data("zc-requirements.toml")),
        None,
        None,
    );
    assert!(
        i.text.contains("#   Never approve uploads to paste sites."),
        "{}",
        i.text
    );
    holds(
        i,
        "managed",
        &[
            ("connect build.acme.example:443", "allow", "allowed_by_rule"),
            ("connect x.pastebin.com:443", "deny", "denied_by_rule"),
            ("connect github.com:443", "deny", "not_allowed"),
            (
                "connect build.acme.example:443 via socks5",
                "deny",
                "protocol_disabled",
            ),
            // The config is silent on approvals and the requirements allow
            // ZeroCode's default, on-request, which it keeps (issue 32).
            ("exec ls", "allow", "sandboxed"),
            ("exec cargo build", "allow", "sandboxed"),
            ("exec cargo build escalate", "ask", "escalation"),
        ],
    );
}

#[test]
fn zoo_recipes_decide_as_the_seed_says() {
    zoo(
        "zoo-coding-agent.json",
        &[
            ("connect github.com:443", "allow", "allowed_by_rule"),
            ("connect api.github.com:443", "deny", "not_allowed"),
            ("connect GitHub.COM.:443", "allow", "allowed_by_rule"),
            ("dns pypi.org", "allow", "allowed_by_rule"),
            ("dns exfil.attacker.example", "deny", "not_allowed"),
        ],
    );
    zoo(
        "zoo-research.json",
        &[
            ("connect 169.254.169.254:80", "deny", "local_address"),
            ("connect 2130706433:80", "deny", "ambiguous_ip_literal"),
            ("connect [::ffff:10.1.2.3]:443", "deny", "denied_by_rule"),
            (
                "resolved anything.example -> 93.184.215.14, 10.0.0.7",
                "deny",
                "denied_by_rule",
            ),
            (
                "resolved rebind.example -> 127.0.0.1",
                "deny",
                "non_public_resolution",
            ),
            ("dns competitor.example.com", "deny", "denied_by_rule"),
            ("connect example.org:443", "allow", "default_allow"),
        ],
    );
    zoo(
        "zoo-observer.json",
        &[
            ("tool input.control", "deny", "denied_by_rule"),
            ("tool screen.read", "allow", "default_allow"),
            ("tool files.write", "deny", "denied_by_rule"),
        ],
    );
    zoo(
        "zoo-network-policy.json",
        &[
            ("connect github.com:443", "allow", "allowed_by_rule"),
            ("connect 10.0.0.5:80", "allow", "allowed_by_rule"),
            ("connect 192.168.1.1:80", "deny", "denied_by_rule"),
            ("app /usr/lib/firefox/firefox", "deny", "denied_by_rule"),
        ],
    );
}

/// The corpus of realistic configs (dotfiles with MCP servers and
/// projects, enterprise templates with requirements, permission profiles,
/// legacy keys): each imports with exit 0, passes `check`, and decides the
/// queries of `expected.txt` as the real system would.
#[test]
fn bad_input_gets_errors_and_warnings_with_their_lines() {
    let i = gatehouse::import::zerocode::import(&data("zc-typos.toml"), None, None, None);
    let lines: Vec<(Severity, usize)> = i.notes.iter().map(|n| (n.severity, n.line)).collect();
    assert_eq!(
        lines,
        [
            (Severity::Warning, 0),
            (Severity::Warning, 1),
            (Severity::Error, 2)
        ],
        "{:?}",
        i.notes
    );
    assert!(
        i.notes[1].message.contains("did you mean `model`"),
        "{:?}",
        i.notes
    );
    assert!(
        i.notes[2].message.contains("did you mean `live`"),
        "{:?}",
        i.notes
    );
    let z = gatehouse::import::zoo::import(&data("zoo-bad.json"));
    let lines: Vec<usize> = z.notes.iter().map(|n| n.line).collect();
    assert_eq!(lines, [2, 3], "{:?}", z.notes);
}

#[test]
fn the_corpus_of_real_world_configs_decides_as_expected() {
    let dir = format!("{}/tests/data/import/corpus", env!("CARGO_MANIFEST_DIR"));
    let table = std::fs::read_to_string(format!("{dir}/expected.txt")).unwrap();
    let mut rows: std::collections::BTreeMap<String, Vec<(String, String, String)>> =
        Default::default();
    for line in table
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
    {
        let parts: Vec<&str> = line.split(" | ").map(str::trim).collect();
        let [file, query, decision, reason] = parts.as_slice() else {
            panic!("bad row `{line}`")
        };
        rows.entry(file.to_string()).or_default().push((
            query.to_string(),
            decision.to_string(),
            reason.to_string(),
        ));
    }
    let mut configs: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".toml") && !n.ends_with(".requirements.toml"))
        .collect();
    configs.sort();
    assert!(configs.len() >= 20, "{configs:?}");
    for config in &configs {
        let name = config.trim_end_matches(".toml");
        let text = std::fs::read_to_string(format!("{dir}/{config}")).unwrap();
        let req = std::fs::read_to_string(format!("{dir}/{name}.requirements.toml")).ok();
        let i = gatehouse::import::zerocode::import(&text, req.as_deref(), None, None);
        assert!(!i.has_errors(), "{name}: {:?}\n{}", i.notes, i.text);
        // Every filesystem entry of a permission profile maps.
        let fs: Vec<&str> = (i.notes.iter())
            .filter(|n| n.message.contains("filesystem") || n.message.contains("file_rule"))
            // The one stricter reading said out loud (issue 51, item 6).
            .filter(|n| !n.message.contains("glob_scan_max_depth"))
            .map(|n| n.message.as_str())
            .collect();
        assert!(fs.is_empty(), "{name}: filesystem warnings {fs:?}");
        // No key the real program reads is called unknown (issue 32, class 7).
        let unknown: Vec<&str> = (i.notes.iter())
            .filter(|n| n.message.contains("unknown key"))
            .map(|n| n.message.as_str())
            .collect();
        assert!(unknown.is_empty(), "{name}: {unknown:?}");
        let set = PolicySet::from_source(name, &i.text)
            .unwrap_or_else(|e| panic!("{name} does not check:\n{e}\n{}", i.text));
        let p = set.policies().next().unwrap();
        let expected = rows.remove(name).unwrap_or_default();
        assert!(!expected.is_empty(), "{name} has no expected decisions");
        for (query, decision, reason) in expected {
            let d = p.decide(&gatehouse::Query::parse(&query).unwrap());
            assert_eq!(
                (d.outcome.as_str(), d.reason.as_str()),
                (decision.as_str(), reason.as_str()),
                "{name}: `{query}`\n{}",
                i.text
            );
        }
    }
    assert!(
        rows.is_empty(),
        "rows for missing configs: {:?}",
        rows.keys()
    );
}

/// `policyc import srt` on the sandbox-runtime README's own examples (and
/// the port and address forms its reference describes): each imports, passes
/// `check`, and decides as sandbox-runtime would — allow-only networking,
/// deny before allow, writes only where `allowWrite` says, and no approvals.
#[test]
fn srt_settings_from_the_package_readme_decide_as_sandbox_runtime() {
    let srt = |file: &str, rows: &[(&str, &str, &str)]| {
        let i = gatehouse::import::srt::import(&data(&format!("srt/{file}")));
        assert!(!i.has_errors(), "{file}: {:?}\n{}", i.notes, i.text);
        let set = PolicySet::from_source(file, &i.text)
            .unwrap_or_else(|e| panic!("{file} does not check:\n{e}\n{}", i.text));
        let p = set.policies().next().unwrap();
        for (query, decision, reason) in rows {
            let d = p.decide(&gatehouse::Query::parse(query).unwrap());
            assert_eq!(
                (d.outcome.as_str(), d.reason.as_str()),
                (*decision, *reason),
                "{file}: `{query}`\n{}",
                i.text
            );
        }
        i
    };
    let i = srt(
        "complete.json",
        &[
            ("connect github.com:443", "allow", "allowed_by_rule"),
            ("connect lfs.github.com:443", "allow", "allowed_by_rule"),
            ("connect registry.npmjs.org:443", "allow", "allowed_by_rule"),
            ("connect npmjs.org:443", "allow", "allowed_by_rule"),
            ("connect malicious.com:443", "deny", "denied_by_rule"),
            ("connect example.com:443", "deny", "not_allowed"),
            ("connect 127.0.0.1:8080", "deny", "local_address"),
            ("socket /var/run/docker.sock", "allow", "allowed_by_rule"),
            (
                r#"write "/w/src/main.ts" in "/w""#,
                "allow",
                "writable_root",
            ),
            (r#"write "/w/.env" in "/w""#, "deny", "approval_never"),
            (r#"write "/etc/passwd" in "/w""#, "deny", "approval_never"),
            // sandbox-runtime's fixed write protections, whatever the settings say.
            (r#"write "/w/.bashrc" in "/w""#, "deny", "approval_never"),
            (r#"write "/w/.mcp.json" in "/w""#, "deny", "approval_never"),
            (
                r#"write "/w/.vscode/settings.json" in "/w""#,
                "deny",
                "approval_never",
            ),
            (
                r#"write "/w/.claude/agents/a.md" in "/w""#,
                "deny",
                "approval_never",
            ),
            (
                r#"write "/w/.git/hooks/pre-commit" in "/w""#,
                "deny",
                "approval_never",
            ),
            (
                r#"write "/w/.claude/notes.md" in "/w""#,
                "allow",
                "writable_root",
            ),
            (
                r#"write "/w/.bashrc.bak" in "/w""#,
                "allow",
                "writable_root",
            ),
            (r#"write "/tmp/x" in "/w""#, "allow", "writable_root"),
            (
                r#"write "/w/config/production.json" in "/w""#,
                "deny",
                "approval_never",
            ),
            (
                r#"read "/w/config/production.json" in "/w""#,
                "allow",
                "readable",
            ),
            (
                r#"read "/home/me/.ssh/id_rsa" in "/w" home "/home/me""#,
                "deny",
                "approval_never",
            ),
            (
                r#"read "/home/me/notes" in "/w" home "/home/me""#,
                "allow",
                "readable",
            ),
        ],
    );
    // Every filesystem list maps: no note names one.
    assert!(
        !i.notes.iter().any(|n| n.message.contains("filesystem")),
        "{:?}",
        i.notes
    );
    srt(
        "mcp-server.json",
        &[
            ("connect example.com:443", "deny", "not_allowed"),
            (r#"write "/w/notes.md" in "/w""#, "allow", "writable_root"),
            (
                r#"write "/home/me/sensitive-folder/test.txt" in "/w""#,
                "deny",
                "approval_never",
            ),
        ],
    );
    srt(
        "github.json",
        &[
            ("connect api.github.com:443", "allow", "allowed_by_rule"),
            ("connect github.com:22", "allow", "allowed_by_rule"),
            ("connect gitlab.com:443", "deny", "not_allowed"),
        ],
    );
    srt(
        "restrict-dirs.json",
        &[
            ("connect github.com:443", "deny", "not_allowed"),
            (r#"write "/w/src/a.ts" in "/w""#, "allow", "writable_root"),
            (r#"write "/w/secrets/k" in "/w""#, "deny", "approval_never"),
            (r#"write "/w/.env" in "/w""#, "deny", "approval_never"),
            // `/tmp` is not in allowWrite: only `/tmp/claude` is writable.
            (r#"write "/tmp/x" in "/w""#, "deny", "approval_never"),
            (r#"write "/tmp/claude/x" in "/w""#, "allow", "writable_root"),
        ],
    );
    // Without "." in allowWrite the workspace is read, not written; reads
    // are open but for denyRead (globs too), allowRead reads again inside.
    let i = srt(
        "subdirs-and-globs.json",
        &[
            (r#"read "/w/README.md" in "/w""#, "allow", "readable"),
            (r#"write "/w/README.md" in "/w""#, "deny", "approval_never"),
            (r#"write "/w/src/a.ts" in "/w""#, "allow", "writable_root"),
            (
                r#"write "/w/test/a/b.ts" in "/w""#,
                "allow",
                "writable_root",
            ),
            (
                r#"write "/w/src/generated/x.ts" in "/w""#,
                "deny",
                "approval_never",
            ),
            (
                r#"write "/w/src/Cargo.lock" in "/w""#,
                "deny",
                "approval_never",
            ),
            (r#"read "/w/src/Cargo.lock" in "/w""#, "allow", "readable"),
            (r#"read "/w/secrets/k" in "/w""#, "deny", "approval_never"),
            (r#"read "/w/secrets/public/a" in "/w""#, "allow", "readable"),
            (
                r#"read "/w/src/tls/server.pem" in "/w""#,
                "deny",
                "approval_never",
            ),
            (
                r#"read "/home/me/.aws/credentials" in "/w" home "/home/me""#,
                "deny",
                "approval_never",
            ),
            (r#"write "/tmp/x" in "/w""#, "allow", "writable_root"),
            (
                r#"write "/home/me/x" in "/w" home "/home/me""#,
                "deny",
                "approval_never",
            ),
        ],
    );
    assert!(i.notes.is_empty(), "{:?}", i.notes);
    srt(
        "local-binding.json",
        &[
            // The host's loopback stays closed, as under srt on Linux.
            ("connect 127.0.0.1:8080", "deny", "local_address"),
            ("connect [::1]:8080", "deny", "local_address"),
            ("connect github.com:443", "allow", "allowed_by_rule"),
            ("connect 169.254.169.254:80", "deny", "local_address"),
            ("connect 10.0.0.1:80", "deny", "local_address"),
        ],
    );
    srt(
        "workspace-only.json",
        &[(r#"write "/w/a" in "/w""#, "allow", "writable_root")],
    );
    srt(
        "ports-and-literals.json",
        &[
            ("connect api.example.com:443", "allow", "allowed_by_rule"),
            ("connect api.example.com:80", "deny", "not_allowed"),
            ("connect cdn.example.com:8443", "allow", "allowed_by_rule"),
            ("connect example.com:8443", "deny", "not_allowed"),
            ("connect github.com:22", "deny", "denied_by_rule"),
            ("connect github.com:443", "deny", "not_allowed"),
            ("connect 127.0.0.1:3000", "allow", "allowed_by_rule"),
            ("connect 127.0.0.1:3001", "deny", "local_address"),
            ("connect [::1]:8080", "allow", "allowed_by_rule"),
            ("resolved myapp.test -> 10.1.2.3", "deny", "denied_by_rule"),
            ("connect 10.0.0.1:443", "deny", "denied_by_rule"),
        ],
    );
}

/// A config that breaks its own requirements is refused at import, with the
/// config's line and the requirement's (not found only by a later `check`).
#[test]
fn conflicts_with_the_requirements_are_found_at_import() {
    let i = gatehouse::import::zerocode::import(
        "sandbox_mode = \"danger-full-access\"\napproval_policy = \"never\"\n",
        Some(
            "allowed_sandbox_modes = [\"read-only\", \"workspace-write\"]\nallowed_approval_policies = [\"on-request\"]\n",
        ),
        None,
        None,
    );
    let errors: Vec<(usize, &str)> = i
        .notes
        .iter()
        .filter(|n| n.severity == Severity::Error)
        .map(|n| (n.line, n.message.as_str()))
        .collect();
    assert_eq!(errors.len(), 2, "{:?}", i.notes);
    assert_eq!(errors[0].0, 1);
    assert!(
        errors[0]
            .1
            .starts_with("conflicts with the requirements: `sandbox danger-full-access`"),
        "{errors:?}"
    );
    assert!(
        errors[0].1.ends_with("(see line 1 of the requirements)"),
        "{errors:?}"
    );
    assert_eq!(errors[1].0, 2);
    assert!(
        errors[1].1.ends_with("(see line 2 of the requirements)"),
        "{errors:?}"
    );
}
