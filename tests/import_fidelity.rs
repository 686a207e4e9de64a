//! Import fidelity against the real programs (issue 32): what ZeroCode's
//! config loading and sandbox-runtime do where a config is silent, and
//! what they refuse. The corpus rows for these classes are in
//! `tests/data/import/corpus/` (configs 27-29).

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic
)]

use gatehouse::PolicySet;
use gatehouse::import::Severity;

/// `~` in an srt socket path (issue 32, class 6): sandbox-runtime expands
/// it when it starts; the import leaves the entry out with a warning (the
/// socket stays refused) and never fails.
#[test]
fn srt_home_relative_sockets_are_left_out_with_a_warning() {
    let i = gatehouse::import::srt::import(
        "{\n  \"network\": {\n    \"allowedDomains\": [\"github.com\"],\n    \"deniedDomains\": [],\n    \"allowUnixSockets\": [\"~/.docker/run/docker.sock\", \"/var/run/docker.sock\"]\n  },\n  \"filesystem\": { \"denyRead\": [], \"allowWrite\": [\".\"], \"denyWrite\": [] }\n}\n",
    );
    assert!(!i.has_errors(), "{:?}", i.notes);
    let warnings: Vec<(usize, &str)> = (i.notes.iter())
        .filter(|n| n.severity == Severity::Warning)
        .map(|n| (n.line, n.message.as_str()))
        .collect();
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert_eq!(warnings[0].0, 5);
    assert!(
        warnings[0].1.contains("~/.docker/run/docker.sock"),
        "{warnings:?}"
    );
    let set = PolicySet::from_source("srt", &i.text).unwrap();
    let p = set.policies().next().unwrap();
    for (query, outcome) in [
        ("socket /var/run/docker.sock", "allow"),
        ("socket /home/me/.docker/run/docker.sock", "deny"),
    ] {
        let d = p.decide(&gatehouse::Query::parse(query).unwrap());
        assert_eq!(d.outcome.as_str(), outcome, "{query}\n{}", i.text);
    }
}

/// Requirements that pin the choices without naming the one a config
/// makes: ZeroCode's own default stays when allowed (issue 32, class 2),
/// else the first listed; and a config's permission profile outside
/// `allowed_permission_profiles` is refused with both lines.
#[test]
fn silent_settings_under_requirements_keep_zerocodes_default_when_allowed() {
    let text = |config: &str, req: &str| {
        let i = gatehouse::import::zerocode::import(config, Some(req), None, None);
        assert!(!i.has_errors(), "{:?}", i.notes);
        i.text
    };
    let t = text(
        "",
        "allowed_approvals_reviewers = [\"auto_review\", \"user\"]\n",
    );
    assert!(t.contains("  reviewer user  # default"), "{t}");
    let t = text("", "allowed_approvals_reviewers = [\"auto_review\"]\n");
    assert!(!t.contains("  reviewer user"), "{t}");
    let t = text(
        "sandbox_mode = \"danger-full-access\"\n",
        "allowed_web_search_modes = [\"cached\", \"live\"]\n",
    );
    assert!(t.contains("  web_search live  # default"), "{t}");
    let t = text(
        "",
        "allowed_approval_policies = [\"never\", \"untrusted\"]\n",
    );
    assert!(!t.contains("  approvals on-request"), "{t}");
    let i = gatehouse::import::zerocode::import(
        "default_permissions = \"wide\"\n[permissions.wide.filesystem]\n\":root\" = \"write\"\n",
        Some("allowed_permission_profiles = [\"narrow\"]\n"),
        None,
        None,
    );
    let errors: Vec<(usize, &str)> = (i.notes.iter())
        .filter(|n| n.severity == Severity::Error)
        .map(|n| (n.line, n.message.as_str()))
        .collect();
    assert_eq!(errors.len(), 1, "{:?}", i.notes);
    assert_eq!(errors[0].0, 1);
    assert!(
        errors[0].1.contains("`default_permissions` = \"wide\" is not among `allowed_permission_profiles` (narrow) (see line 1 of the requirements)"),
        "{errors:?}"
    );
}

/// Issue 51, items 3–8: what current Codex reads, checked beside the
/// corpus rows (configs 31–36).
#[test]
fn current_codex_keys_import_with_their_meaning() {
    let import = |config: &str, req: Option<&str>| {
        gatehouse::import::zerocode::import(config, req, None, None)
    };
    let decide = |text: &str, query: &str| {
        let set = PolicySet::from_source("t", text).unwrap();
        let p = set.policies().next().unwrap();
        let d = p.decide(&gatehouse::Query::parse(query).unwrap());
        format!("{} {}", d.outcome.as_str(), d.reason.as_str())
    };
    // Item 3: a table; a `false` entry is a profile that is not allowed.
    let table = "[allowed_permission_profiles]\ndev = true\n\":danger-full-access\" = false\n";
    let ok = import(
        "default_permissions = \"dev\"\n[permissions.dev]\nextends = \":workspace\"\n",
        Some(table),
    );
    assert!(!ok.has_errors(), "{:?}", ok.notes);
    let refused = import(
        "default_permissions = \":danger-full-access\"\n",
        Some(table),
    );
    assert!(refused.has_errors(), "{}", refused.text);
    let list = import(
        "default_permissions = \"dev\"\n[permissions.dev]\nextends = \":workspace\"\n",
        Some("allowed_permission_profiles = [\"dev\"]\n"),
    );
    assert!(!list.has_errors(), "{:?}", list.notes);
    // Item 5: one file with both keys selects the profile; a profile's own
    // sandbox_mode, or a later layer that sets only sandbox_mode, selects
    // the legacy settings.
    let both = import(
        "sandbox_mode = \"danger-full-access\"\ndefault_permissions = \":read-only\"\n",
        None,
    );
    assert_eq!(
        decide(&both.text, "write \"/w/a\" in \"/w\""),
        "ask read_only_sandbox"
    );
    let profile_level = gatehouse::import::zerocode::import(
        "default_permissions = \":read-only\"\nprofile = \"yolo\"\n[profiles.yolo]\nsandbox_mode = \"danger-full-access\"\n",
        None,
        None,
        None,
    );
    assert_eq!(
        decide(&profile_level.text, "write \"/etc/hosts\" in \"/w\""),
        "allow unsandboxed"
    );
    let later_layer = gatehouse::import::zerocode::import(
        "default_permissions = \":read-only\"\n",
        None,
        Some("fast"),
        Some("sandbox_mode = \"danger-full-access\"\n"),
    );
    assert_eq!(
        decide(&later_layer.text, "write \"/etc/hosts\" in \"/w\""),
        "allow unsandboxed"
    );
    // Item 6: the alias, the new MCP mode, the glob depth (a warning).
    let keys = import(
        "approvals_reviewer = \"guardian_subagent\"\n[mcp_servers.gh]\ncommand = \"gh\"\ndefault_tools_approval_mode = \"writes\"\n",
        None,
    );
    assert!(!keys.has_errors(), "{:?}", keys.notes);
    assert!(keys.text.contains("reviewer auto_review"), "{}", keys.text);
    assert_eq!(
        decide(&keys.text, "mcp gh/list read_only=true"),
        "allow read_only_tool"
    );
    assert_eq!(
        decide(
            &keys.text,
            "mcp gh/create destructive=false open_world=false"
        ),
        "review approval_mode"
    );
    // Item 7: a warning each time `approve` is written as approve_destructive.
    let approve = import(
        "[mcp_servers.a]\ncommand = \"a\"\ndefault_tools_approval_mode = \"approve\"\n[mcp_servers.a.tools.x]\napproval_mode = \"approve\"\n",
        None,
    );
    let warned = (approve.notes.iter())
        .filter(|n| n.message.contains("approve_destructive"))
        .count();
    assert_eq!(warned, 2, "{:?}", approve.notes);
    // Item 8: the spec's reading, with a warning naming the other policy.
    let never = import(
        "approval_policy = \"never\"\nsandbox_mode = \"danger-full-access\"\n",
        None,
    );
    assert!(
        never.notes.iter().any(|n| n
            .message
            .contains("`approvals never` in a `requirements` block")),
        "{:?}",
        never.notes
    );
    assert_eq!(decide(&never.text, "exec rm -rf x"), "allow unsandboxed");
}
