//! `policyc export nftables`: golden rulesets (BLESS=1 rewrites them), each
//! checked by the real `nft` parser when it can run here.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::process::Command;

fn export(args: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_policyc"))
        .current_dir(crate::common::repo())
        .arg("export")
        .arg("nftables")
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// `nft -c` (check only, nothing applied), when nft is installed and may
/// talk to the kernel here.
fn nft_accepts(text: &str) -> Option<bool> {
    let probe = Command::new("nft")
        .args(["-c", "-f", "/dev/null"])
        .output()
        .ok()?;
    if !probe.status.success() {
        return None;
    }
    let path = std::env::temp_dir().join(format!("gatehouse-export-{}.nft", std::process::id()));
    std::fs::write(&path, text).unwrap();
    let out = Command::new("nft")
        .arg("-c")
        .arg("-f")
        .arg(&path)
        .output()
        .ok()?;
    if !out.status.success() {
        eprintln!("{}", String::from_utf8_lossy(&out.stderr));
    }
    Some(out.status.success())
}

#[test]
fn rulesets_match_their_golden_files_and_parse() {
    let cases: &[(&str, &[&str])] = &[
        ("mixed", &["tests/data/export.policy", "--policy", "mixed"]),
        (
            "open",
            &[
                "tests/data/export.policy",
                "--policy",
                "open",
                "--resolver",
                "none",
            ],
        ),
        (
            "closed",
            &["tests/data/export.policy", "--policy", "closed"],
        ),
        (
            "free",
            &[
                "tests/data/export.policy",
                "--policy",
                "free",
                "--proxy",
                "[::1]:3128",
            ],
        ),
        ("zerocode-proxy", &["policies/zerocode-proxy.policy"]),
        ("research", &["policies/research.policy"]),
    ];
    let mut checked = 0;
    for (name, args) in cases {
        let text = export(args);
        crate::bless::golden(
            &format!("tests/golden/export/{name}.nft"),
            &text,
            "cargo test -p policyc export",
        );
        if let Some(ok) = nft_accepts(&text) {
            assert!(ok, "nft refuses the {name} ruleset");
            checked += 1;
        }
    }
    eprintln!("{checked} rulesets checked by nft");
}

#[test]
fn the_ruleset_follows_the_decision_order() {
    let text = export(&["tests/data/export.policy", "--policy", "mixed"]);
    let at = |needle: &str| {
        text.find(needle)
            .unwrap_or_else(|| panic!("`{needle}` in\n{text}"))
    };
    // Deny rules first, then the exact exceptions, then the non-public drop,
    // then allow rules; the default is the chain's policy.
    assert!(
        at("8.8.4.0/24 drop")
            < at("127.0.0.1 tcp dport { 8080 } accept comment \"exact exception\"")
    );
    assert!(at("exact exception") < at("drop comment \"non-public\""));
    assert!(at("drop comment \"non-public\"") < at("10.0.0.0/8 accept comment \"allow\""));
    assert!(text.contains("policy drop;"));
    // A CIDR never counts as a local exception: 10/8 stays behind the drop.
    assert!(!text.contains("10.0.0.0/8 accept comment \"exact exception\""));
    let open = export(&["tests/data/export.policy", "--policy", "open"]);
    assert!(open.contains("policy accept;") && !open.contains("non-public"));
    let closed = export(&["tests/data/export.policy", "--policy", "closed"]);
    assert!(closed.contains("policy drop;") && !closed.contains("comment \"allow\""));
}

#[test]
fn bad_arguments_are_usage_errors() {
    for args in [
        &["nftable", "policies/research.policy"][..],
        &["nftables", "tests/data/export.policy"],
        &["nftables", "policies/research.policy", "--proxy", "nowhere"],
    ] {
        let out = Command::new(env!("CARGO_BIN_EXE_policyc"))
            .current_dir(crate::common::repo())
            .arg("export")
            .args(args)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}");
    }
}

/// `policyc export cilium|srt`: golden outputs, and golden refusals for what
/// the format cannot express (exit 1, every rule named).
#[test]
fn cilium_and_srt_exports_match_their_golden_files() {
    let cases: &[(&str, &[&str])] = &[
        (
            "fleet",
            &["tests/data/export-fleet.policy", "--policy", "fleet"],
        ),
        (
            "laptop",
            &["tests/data/export-fleet.policy", "--policy", "laptop"],
        ),
        (
            "carve",
            &["tests/data/export-fleet.policy", "--policy", "carve"],
        ),
        (
            "wide",
            &["tests/data/export-fleet.policy", "--policy", "wide"],
        ),
        (
            "closed",
            &["tests/data/export-fleet.policy", "--policy", "closed"],
        ),
        (
            "free",
            &["tests/data/export-fleet.policy", "--policy", "free"],
        ),
        ("egress-demo", &["policies/egress-demo.policy"]),
        ("zerocode-proxy", &["policies/zerocode-proxy.policy"]),
    ];
    for (format, ext) in [("cilium", "yaml"), ("srt", "json")] {
        for (name, args) in cases {
            let out = Command::new(env!("CARGO_BIN_EXE_policyc"))
                .current_dir(crate::common::repo())
                .args(["export", format])
                .args(*args)
                .output()
                .unwrap();
            let (text, file) = match out.status.code() {
                Some(0) => (
                    String::from_utf8(out.stdout).unwrap(),
                    format!("{name}.{format}.{ext}"),
                ),
                Some(1) => {
                    assert!(out.stdout.is_empty(), "{format} {name}: nothing on stdout");
                    (
                        String::from_utf8(out.stderr).unwrap(),
                        format!("{name}.{format}.err"),
                    )
                }
                other => panic!(
                    "{format} {name}: exit {other:?}\n{}",
                    String::from_utf8_lossy(&out.stderr)
                ),
            };
            crate::bless::golden(
                &format!("tests/golden/export/{file}"),
                &text,
                "cargo test -p policyc export",
            );
        }
    }
    // Each refusal names every rule that does not fit, with its place.
    let wide =
        std::fs::read_to_string(crate::common::repo().join("tests/golden/export/wide.cilium.err"))
            .unwrap();
    assert!(
        wide.contains("export-fleet.policy:46:5: `default allow`"),
        "{wide}"
    );
    let carve =
        std::fs::read_to_string(crate::common::repo().join("tests/golden/export/carve.cilium.err"))
            .unwrap();
    assert!(carve.contains("`deny domain gist.github.com`"), "{carve}");
    let wide =
        std::fs::read_to_string(crate::common::repo().join("tests/golden/export/wide.srt.err"))
            .unwrap();
    assert!(
        wide.starts_with("error: 4 rules cannot be expressed"),
        "{wide}"
    );
}

/// The example shipped for Cilium users is what `policyc export cilium`
/// writes today.
#[test]
fn the_shipped_cilium_example_is_current() {
    let out = Command::new(env!("CARGO_BIN_EXE_policyc"))
        .current_dir(crate::common::repo())
        .args([
            "export",
            "cilium",
            "policies/coding-agent.policy",
            "--namespace",
            "agents",
            "--selector",
            "app=coding-agent",
        ])
        .output()
        .unwrap();
    assert!(out.status.success());
    crate::bless::golden(
        "examples/integrations/cilium/coding-agent.cnp.yaml",
        &String::from_utf8(out.stdout).unwrap(),
        "cargo test -p policyc export",
    );
}
