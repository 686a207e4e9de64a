//! `policyc import` on the command line: notes with file and line, and
//! imported text that `policyc check` accepts.

use std::process::Command;

#[test]
fn import_notes_on_stderr_carry_file_and_line() {
    // Notes on stderr with file:line, exit 1.
    let o = Command::new(env!("CARGO_BIN_EXE_policyc"))
        .args(["import", "zerocode", "tests/data/import/zc-typos.toml"])
        .current_dir(crate::common::repo())
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("warning: tests/data/import/zc-typos.toml:1: unknown key `modle`"),
        "{err}"
    );
    assert!(
        err.contains("error: tests/data/import/zc-typos.toml:2: `web_search`"),
        "{err}"
    );
}

#[test]
fn imported_text_passes_policyc_check() {
    let dir = std::env::temp_dir().join(format!("gatehouse-import-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    for (format, file) in [
        ("zerocode", "zc-proxy-and-access.toml"),
        ("zoo", "zoo-research.json"),
    ] {
        let o = Command::new(env!("CARGO_BIN_EXE_policyc"))
            .args(["import", format, &format!("tests/data/import/{file}")])
            .current_dir(crate::common::repo())
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(0));
        let out = dir.join(format!("{file}.policy"));
        std::fs::write(&out, &o.stdout).unwrap();
        let c = Command::new(env!("CARGO_BIN_EXE_policyc"))
            .args(["check", "--deny-warnings", out.to_str().unwrap()])
            .output()
            .unwrap();
        assert_eq!(
            c.status.code(),
            Some(0),
            "{}",
            String::from_utf8_lossy(&c.stdout)
        );
    }
}

/// As a new user would: `policyc import zerocode CONFIG --requirements REQ`
/// on a config with MCP per-tool approvals, a permission profile, legacy
/// network keys and a requirements file exits 0, and its output passes
/// `policyc check`; `policyc import srt` on the package README's complete
/// example too. Every other corpus config passes `check` as well.
#[test]
fn imports_of_the_corpus_pass_policyc_check_on_the_command_line() {
    let dir = std::env::temp_dir().join(format!("gatehouse-corpus-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let corpus = "tests/data/import/corpus";
    let mut runs: Vec<Vec<String>> = vec![vec![
        "srt".into(),
        "tests/data/import/srt/complete.json".into(),
    ]];
    for e in std::fs::read_dir(format!("{}/{corpus}", crate::common::repo().display())).unwrap() {
        let name = e.unwrap().file_name().to_string_lossy().into_owned();
        if !name.ends_with(".toml") || name.ends_with(".requirements.toml") {
            continue;
        }
        let mut args = vec!["zerocode".to_string(), format!("{corpus}/{name}")];
        let req = format!("{corpus}/{}", name.replace(".toml", ".requirements.toml"));
        if crate::common::repo().join(&req).exists() {
            args.extend(["--requirements".to_string(), req]);
        }
        runs.push(args);
    }
    for (n, args) in runs.iter().enumerate() {
        let o = Command::new(env!("CARGO_BIN_EXE_policyc"))
            .arg("import")
            .args(args)
            .current_dir(crate::common::repo())
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(0), "{args:?}: {stderr}");
        // Notes name the file they are about.
        for line in stderr.lines() {
            assert!(
                line.starts_with("warning: tests/data/import/"),
                "{args:?}: {line}"
            );
        }
        let out = dir.join(format!("{n}.policy"));
        std::fs::write(&out, &o.stdout).unwrap();
        let c = Command::new(env!("CARGO_BIN_EXE_policyc"))
            .args(["check", out.to_str().unwrap()])
            .output()
            .unwrap();
        assert_eq!(
            c.status.code(),
            Some(0),
            "{args:?}: {}",
            String::from_utf8_lossy(&c.stdout)
        );
    }
}

/// What cannot be expressed fails the import (exit 1, nothing on stdout),
/// with an error naming the key and its line; nothing that `check` would
/// refuse is ever printed as a success.
#[test]
fn what_cannot_be_expressed_fails_with_the_key_and_line() {
    let dir = std::env::temp_dir().join(format!("gatehouse-unexpressible-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let cases: &[(&str, &str, &str, &str)] = &[
        (
            "zerocode",
            "bad-domain.toml",
            "sandbox_mode = \"workspace-write\"\n[sandbox_workspace_write]\nnetwork_access = true\n[features.network_proxy]\nenabled = true\n[features.network_proxy.domains]\n\"exa mple.com\" = \"allow\"\n",
            ":7: cannot be expressed: `allow domain \"exa mple.com\"`",
        ),
        (
            "zerocode",
            "bad-root.toml",
            "sandbox_mode = \"workspace-write\"\n\n[sandbox_workspace_write]\nwritable_roots = [\"../shared\"]\n",
            ":4: cannot be expressed: `writable \"../shared\"` → invalid_writable_root",
        ),
        (
            "zoo",
            "host-bits.json",
            "{\"calls\": [\n  {\"set_network\": {\"default\": \"deny\"}},\n  {\"add_rule\": {\"kind\": \"cidr\", \"value\": \"10.1.2.3/8\"}}\n]}\n",
            ":3: cannot be expressed: `allow cidr 10.1.2.3/8` → cidr_host_bits",
        ),
        (
            "zoo",
            "bad-permission.json",
            "{\"calls\": [\n  {\"set_permission\": {\"permission\": \"camera\", \"action\": \"use\", \"effect\": \"allow\"}}\n]}\n",
            ":2: cannot be expressed: `allow camera.use` → unknown_permission",
        ),
        (
            "srt",
            "deny-port.json",
            "{\n  \"network\": {\n    \"allowedDomains\": [\"github.com\"],\n    \"deniedDomains\": [\"*:22\"]\n  }\n}\n",
            ":4: `network.deniedDomains` entry \"*:22\"",
        ),
    ];
    for (format, name, text, expected) in cases {
        let path = dir.join(name);
        std::fs::write(&path, text).unwrap();
        let o = Command::new(env!("CARGO_BIN_EXE_policyc"))
            .args(["import", format, path.to_str().unwrap()])
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(1), "{name}: {stderr}");
        assert!(
            o.stdout.is_empty(),
            "{name}: {}",
            String::from_utf8_lossy(&o.stdout)
        );
        assert!(
            stderr.contains(&format!("error: {}{expected}", path.display())),
            "{name}: expected `{expected}` in\n{stderr}"
        );
    }
}

/// What `policyc import` writes is already in `policyc fmt`'s layout (issue
/// 37, item 2): the documented `policyc-fmt` hook passes on the first
/// commit after an import. Every shipped input that imports is checked.
#[test]
fn imported_text_is_in_fmt_layout() {
    let repo = crate::common::repo();
    let dir = std::env::temp_dir().join(format!("gatehouse-import-fmt-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let mut inputs = Vec::new();
    for (format, sub, ext) in [
        ("zerocode", "", ".toml"),
        ("zerocode", "corpus/", ".toml"),
        ("zoo", "", ".json"),
        ("srt", "srt/", ".json"),
    ] {
        let folder = repo.join("tests/data/import").join(sub);
        let mut names: Vec<String> = std::fs::read_dir(&folder)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.ends_with(ext) && !n.contains(".requirements."))
            .collect();
        names.sort();
        for n in names {
            inputs.push((format, format!("tests/data/import/{sub}{n}")));
        }
    }
    let mut checked = 0;
    for (format, input) in &inputs {
        let o = Command::new(env!("CARGO_BIN_EXE_policyc"))
            .args(["import", format, input])
            .current_dir(&repo)
            .output()
            .unwrap();
        if o.status.code() != Some(0) {
            continue; // refused inputs write no policy
        }
        let out = dir.join(format!("{checked}.policy"));
        std::fs::write(&out, &o.stdout).unwrap();
        let f = Command::new(env!("CARGO_BIN_EXE_policyc"))
            .args(["fmt", "--check", out.to_str().unwrap()])
            .output()
            .unwrap();
        assert_eq!(
            f.status.code(),
            Some(0),
            "{input}: {}{}",
            String::from_utf8_lossy(&f.stdout),
            String::from_utf8_lossy(&f.stderr)
        );
        checked += 1;
    }
    assert!(
        checked >= 30,
        "only {checked} of {} inputs imported",
        inputs.len()
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// Requirements that ZeroCode itself refuses to start with fail the import
/// (issue 32, class 3): exit 1, nothing on stdout, and an error with the
/// requirements file, the line and the key — a `sandbox` list without
/// read-only, and every malformed `[rules] prefix_rules` entry as its
/// `requirements_exec_policy.rs` rejects it.
#[test]
fn requirements_zerocode_refuses_fail_with_file_line_and_key() {
    let dir = std::env::temp_dir().join(format!("gatehouse-refused-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let config = dir.join("config.toml");
    std::fs::write(&config, "sandbox_mode = \"workspace-write\"\n").unwrap();
    let rule = |r: &str| format!("# managed\n[rules]\nprefix_rules = [\n  {r},\n]\n");
    let cases: Vec<(&str, String, &str)> = vec![
        (
            "no-read-only",
            "allowed_sandbox_modes = [\"workspace-write\"]\n".into(),
            ":1: `allowed_sandbox_modes` must include \"read-only\"",
        ),
        (
            "allow-decision",
            rule("{ pattern = [{ token = \"git\" }], decision = \"allow\" }"),
            ":4: `rules.prefix_rules[0].decision` = \"allow\" is not permitted",
        ),
        (
            "no-decision",
            rule("{ pattern = [{ token = \"git\" }] }"),
            ":4: `rules.prefix_rules[0]` has no `decision`",
        ),
        (
            "blank-token",
            rule("{ pattern = [{ token = \"git\" }, { token = \" \" }], decision = \"prompt\" }"),
            ":4: `rules.prefix_rules[0].pattern[1].token` cannot be blank",
        ),
        (
            "both",
            rule("{ pattern = [{ token = \"rm\", any_of = [\"rm\"] }], decision = \"forbidden\" }"),
            ":4: `rules.prefix_rules[0].pattern[0]`: set either `token` or `any_of`, not both",
        ),
        (
            "empty-any-of",
            rule("{ pattern = [{ any_of = [] }], decision = \"forbidden\" }"),
            ":4: `rules.prefix_rules[0].pattern[0].any_of` cannot be empty",
        ),
        (
            "empty-pattern",
            rule("{ pattern = [], decision = \"forbidden\" }"),
            ":4: `rules.prefix_rules[0].pattern` cannot be empty",
        ),
        (
            "blank-justification",
            rule(
                "{ pattern = [{ token = \"su\" }], decision = \"forbidden\", justification = \"\" }",
            ),
            ":4: `rules.prefix_rules[0].justification` cannot be blank",
        ),
        (
            "no-rules",
            "[rules]\nprefix_rules = []\n".into(),
            ":2: `rules.prefix_rules` cannot be empty",
        ),
    ];
    for (name, text, expected) in cases {
        let req = dir.join(format!("{name}.requirements.toml"));
        std::fs::write(&req, text).unwrap();
        let o = Command::new(env!("CARGO_BIN_EXE_policyc"))
            .args(["import", "zerocode"])
            .arg(&config)
            .arg("--requirements")
            .arg(&req)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(1), "{name}: {stderr}");
        assert!(o.stdout.is_empty(), "{name}");
        assert!(
            stderr.contains(&format!("error: {}{expected}", req.display())),
            "{name}: expected `{expected}` in\n{stderr}"
        );
    }
}
