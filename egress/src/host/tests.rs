#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use super::*;

fn dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("gatehouse-host-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    std::fs::write(
        d.join("a.policy"),
        "policy a {\n  network {\n    allow domain a.test\n  }\n}\n",
    )
    .unwrap();
    std::fs::write(d.join("b.policy"), "policy b {\n  network off\n}\n").unwrap();
    d
}

fn load(d: &Path, text: &str) -> Result<SandboxTable, HostError> {
    load_trusting(d, text, Vec::new())
}

fn load_trusting(
    d: &Path,
    text: &str,
    trusted: Vec<gatehouse::bundle::PublicKey>,
) -> Result<SandboxTable, HostError> {
    let path = d.join("sandboxes.toml");
    std::fs::write(&path, text).unwrap();
    SandboxTable::load(&path, &shared_trusting(trusted), None)
}

fn shared_trusting(trusted: Vec<gatehouse::bundle::PublicKey>) -> Shared {
    shared_with("127.0.0.1:9", trusted)
}

/// Issue 53, item 5: the daemon's own upstream resolver's address is
/// no sandbox's.
#[test]
fn the_upstream_resolvers_address_is_no_sandboxs() {
    let d = dir("upstream");
    std::fs::write(
        d.join("a.policy"),
        "policy a {\n  network {\n    allow domain a.test\n  }\n}\n",
    )
    .unwrap();
    let path = d.join("sandboxes.toml");
    std::fs::write(
        &path,
        "[[sandbox]]\nid = \"x\"\naddresses = [\"10.9.9.53\"]\npolicy = \"a.policy\"\n",
    )
    .unwrap();
    let e = SandboxTable::load(&path, &shared_with("10.9.9.53:53", Vec::new()), None)
        .err()
        .expect("refused")
        .to_string();
    assert!(e.contains("upstream resolver"), "{e}");
    assert!(SandboxTable::load(&path, &shared_with("10.9.9.54:53", Vec::new()), None).is_ok());
}

fn shared_with(upstream: &str, trusted: Vec<gatehouse::bundle::PublicKey>) -> Shared {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let metrics = Arc::new(Metrics::default());
    let resolver = rt
        .block_on(Upstream::new(upstream.parse().unwrap(), metrics.clone()))
        .unwrap();
    // The resolver's socket belongs to this runtime: it lives as long
    // as the test process.
    std::mem::forget(rt);
    Shared {
        options: PolicyOptions {
            trusted,
            ..PolicyOptions::default()
        },
        metrics,
        resolver: Arc::new(resolver),
        timeouts: crate::relay::Timeouts::default(),
        max_connections: 16,
        telemetry: gatehouse_otel::Telemetry::off(),
    }
}

#[test]
fn sources_find_their_sandbox_and_strangers_find_none() {
    let d = dir("lookup");
    let t = load(
        &d,
        r#"
[[sandbox]]
id = "one"
addresses = ["10.200.1.2", "fd00:200:1::2"]
policy = "a.policy"

[[sandbox]]
id = "two"
addresses = ["10.200.2.2"]
policy = "b.policy"
"#,
    )
    .unwrap();
    let id = |ip: &str| t.lookup(ip.parse().unwrap()).map(|s| s.id.clone());
    assert_eq!(id("10.200.1.2").as_deref(), Some("one"));
    assert_eq!(id("::ffff:10.200.1.2").as_deref(), Some("one"));
    assert_eq!(id("fd00:200:1::2").as_deref(), Some("one"));
    assert_eq!(id("10.200.2.2").as_deref(), Some("two"));
    assert_eq!(id("10.200.2.3"), None);
    assert_eq!(id("127.0.0.1"), None);
    let one = t.lookup("10.200.1.2".parse().unwrap()).unwrap();
    let set = one.policies().store.load();
    assert_eq!(set.single().unwrap().name(), "a");
    assert_eq!(t.sandboxes().count(), 2);
}

#[test]
fn the_example_table_loads() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/host/config");
    let copy = dir("example");
    for f in ["sandboxes.toml", "ci.policy", "research.policy"] {
        std::fs::copy(path.join(f), copy.join(f)).unwrap();
    }
    let text = std::fs::read_to_string(copy.join("sandboxes.toml")).unwrap();
    let t = load(&copy, &text).unwrap();
    assert_eq!(t.sandboxes().count(), 2);
    assert!(t.covers("10.200.9.9".parse().unwrap()));
    let ci = t.lookup("10.200.1.2".parse().unwrap()).unwrap();
    assert_eq!(ci.id, "ci-1");
}

#[test]
fn with_trusted_keys_only_signed_bundles_are_taken() {
    let d = dir("trusted");
    let key = gatehouse::bundle::Keypair::generate().unwrap();
    let set = gatehouse::PolicySet::from_source(
        "a.policy",
        "policy a {\n  network {\n    allow domain a.test\n  }\n}\n",
    )
    .unwrap();
    std::fs::write(d.join("a.ghb"), key.sign(&set.to_artifact().unwrap())).unwrap();
    let entry = |policy: &str| {
        format!("[[sandbox]]\nid = \"x\"\naddresses = [\"10.0.0.2\"]\npolicy = \"{policy}\"\n")
    };
    let signed = load_trusting(&d, &entry("a.ghb"), vec![key.public()]).unwrap();
    assert_eq!(signed.sandboxes().count(), 1);
    let text = load_trusting(&d, &entry("a.policy"), vec![key.public()]);
    let e = text.err().expect("text refused").to_string();
    assert!(e.contains("sandbox `x`"), "{e}");
    let other = gatehouse::bundle::Keypair::generate().unwrap();
    assert!(load_trusting(&d, &entry("a.ghb"), vec![other.public()]).is_err());
}

/// Issue 53, item 6: a table edit that changes a sandbox's entry opens
/// its policy afresh; an older signed bundle than the one in force is
/// refused there too (the whole table is, and the old one stays).
#[test]
fn a_changed_entry_cannot_roll_back_a_bundle() {
    let d = dir("rollback");
    let key = gatehouse::bundle::Keypair::generate().unwrap();
    let set = gatehouse::PolicySet::from_source(
        "a.policy",
        "policy a {\n  network {\n    allow domain a.test\n  }\n}\n",
    )
    .unwrap();
    let artifact = set.to_artifact().unwrap();
    std::fs::write(d.join("new.ghb"), key.sign_serial(&artifact, 7)).unwrap();
    std::fs::write(d.join("old.ghb"), key.sign_serial(&artifact, 3)).unwrap();
    let entry = |policy: &str, addr: &str| {
        format!("[[sandbox]]\nid = \"x\"\naddresses = [\"{addr}\"]\npolicy = \"{policy}\"\n")
    };
    let trusted = vec![key.public()];
    let first = load_trusting(&d, &entry("new.ghb", "10.0.0.2"), trusted.clone()).unwrap();
    let shared = shared_trusting(trusted.clone());
    let path = d.join("sandboxes.toml");
    // The entry changes (its address and its file): the older bundle
    // is refused.
    std::fs::write(&path, entry("old.ghb", "10.0.0.3")).unwrap();
    let e = SandboxTable::load(&path, &shared, Some(&first))
        .err()
        .expect("a rollback is refused")
        .to_string();
    assert!(e.contains("rollback") && e.contains("serial 3"), "{e}");
    // The same bundle, or a newer one, is taken.
    std::fs::write(&path, entry("new.ghb", "10.0.0.3")).unwrap();
    assert!(SandboxTable::load(&path, &shared, Some(&first)).is_ok());
}

#[test]
fn a_wrong_table_is_refused_naming_the_sandbox() {
    let d = dir("wrong");
    let entry = |id: &str, addrs: &str, policy: &str| {
        format!("[[sandbox]]\nid = \"{id}\"\naddresses = [{addrs}]\npolicy = \"{policy}\"\n")
    };
    let cases = [
        (entry("bad id", "\"10.0.0.2\"", "a.policy"), "an id is"),
        (entry("x", "", "a.policy"), "no addresses"),
        (
            entry("x", "\"10.0.0.256\"", "a.policy"),
            "not an IP address",
        ),
        (
            entry("x", "\"0.0.0.0\"", "a.policy"),
            "cannot be a sandbox's",
        ),
        (entry("x", "\"::1\"", "a.policy"), "cannot be a sandbox's"),
        (
            entry("x", "\"10.0.0.2\"", "a.policy") + &entry("y", "\"::ffff:10.0.0.2\"", "b.policy"),
            "already sandbox `x`'s",
        ),
        (
            entry("x", "\"10.0.0.2\"", "a.policy") + &entry("x", "\"10.0.0.3\"", "b.policy"),
            "a second sandbox",
        ),
        (
            entry("x", "\"10.0.0.2\"", "missing.policy"),
            "missing.policy",
        ),
        ("[[sandbox]]\nid = \"x\"\n".to_string(), "addresses"),
        (
            entry("x", "\"10.0.0.2\"", "a.policy") + "colour = 1\n",
            "colour",
        ),
    ];
    for (text, want) in cases {
        let e = load(&d, &text).err().expect(&text).to_string();
        assert!(e.contains(want), "{text}\n→ {e}");
        assert!(e.contains("sandboxes.toml"), "{e}");
    }
}

/// The table as the control API writes it (by hand, for speed) reads back
/// as the same table, whatever its strings hold.
#[test]
fn the_hand_written_table_reads_back_the_same() {
    let tricky = [
        "plain",
        "quote \" and backslash \\ and tab \t",
        "new\nline\r and \u{7f} \u{1b}[31m",
        "ünïcödé ✓ 𝄞",
        "",
    ];
    let file = File {
        networks: vec!["10.200.0.0/16".into(), tricky[1].into()],
        interfaces: vec!["veth*".into()],
        sandbox: tricky
            .iter()
            .enumerate()
            .map(|(i, t)| Entry {
                id: format!("s{i}"),
                addresses: vec![t.to_string(), "10.200.1.2".into()],
                policy: PathBuf::from(format!("/p/{t}.policy")),
                policy_name: (i % 2 == 0).then(|| t.to_string()),
            })
            .collect(),
    };
    let text = file.to_toml().unwrap();
    let back: File = toml::from_str(&text).unwrap();
    assert_eq!(
        serde_json::to_value(&back).unwrap(),
        serde_json::to_value(&file).unwrap(),
        "{text}"
    );
    // An empty table, and a path TOML cannot hold.
    let empty = File::default();
    let back: File = toml::from_str(&empty.to_toml().unwrap()).unwrap();
    assert!(back.sandbox.is_empty() && back.networks.is_empty());
    use std::os::unix::ffi::OsStrExt as _;
    let mut bad = file.clone();
    if let Some(e) = bad.sandbox.first_mut() {
        e.policy = PathBuf::from(std::ffi::OsStr::from_bytes(b"/p/\xff.policy"));
    }
    assert!(bad.to_toml().is_none());
}

/// Issue 58: one entry changed in place ([`SandboxTable::edit`]) makes the
/// table a whole build of the changed file makes, keeping every other
/// sandbox as it was; a refused edit is refused as the build refuses it.
#[test]
fn an_edit_of_one_entry_is_the_build_of_the_edited_file() {
    let d = dir("edit");
    let path = d.join("sandboxes.toml");
    let mut text = String::from("interfaces = [\"veth*\"]\n");
    for k in 1..=6 {
        let p = if k % 2 == 0 { "a.policy" } else { "b.policy" };
        text.push_str(&format!(
            "\n[[sandbox]]\nid = \"s{k}\"\naddresses = [\"10.1.0.{k}\"]\npolicy = \"{p}\"\n"
        ));
    }
    std::fs::write(&path, &text).unwrap();
    let shared = shared_trusting(Vec::new());
    let old = SandboxTable::load(&path, &shared, None).unwrap();
    let file = super::File::read(&path).unwrap();
    let entry = |id: &str, addresses: &[&str], policy: &str| super::Entry {
        id: id.into(),
        addresses: addresses.iter().map(|a| a.to_string()).collect(),
        policy: PathBuf::from(policy),
        policy_name: None,
    };
    let same = |a: &SandboxTable, b: &SandboxTable| {
        let view = |t: &SandboxTable| -> Vec<(String, Vec<IpAddr>, PathBuf)> {
            t.sandboxes()
                .map(|s| (s.id.clone(), s.addresses.clone(), s.policies().path.clone()))
                .collect()
        };
        assert_eq!(view(a), view(b));
        for s in a.sandboxes() {
            for ip in &s.addresses {
                assert_eq!(b.lookup(*ip).map(|t| t.id.clone()), Some(s.id.clone()));
            }
        }
    };
    // The file written from the table builds the same table, and the
    // table writes the text its file's entries write.
    let rebuilt = SandboxTable::build(&path, &super::File::of(&old, &path), &shared, Some(&old));
    same(&old, &rebuilt.unwrap());
    let written = old.to_toml(&path).unwrap();
    assert_eq!(
        Some(written.clone()),
        super::File::of(&old, &path).to_toml()
    );
    assert!(
        super::File::of(&old, &path)
            .sandbox
            .iter()
            .all(|e| e.policy.is_relative())
    );
    // (the sandbox, its entry after the edit or `None` for removed)
    let edits = [
        ("s3", None),
        ("s7", Some(entry("s7", &["10.1.0.7"], "a.policy"))),
        ("s2", Some(entry("s2", &["10.1.0.2"], "b.policy"))),
        (
            "s4",
            Some(entry("s4", &["10.1.0.40", "10.1.0.41"], "a.policy")),
        ),
        ("s6", Some(entry("s6", &["10.1.0.6"], "a.policy"))),
    ];
    for (id, e) in edits {
        let mut changed = file.clone();
        match &e {
            None => changed.sandbox.retain(|x| x.id != id),
            Some(e) => match changed.sandbox.iter_mut().find(|x| x.id == id) {
                Some(x) => *x = e.clone(),
                None => changed.sandbox.push(e.clone()),
            },
        }
        let built = SandboxTable::build(&path, &changed, &shared, Some(&old)).unwrap();
        let edited = old.edit(&path, id, e.as_ref(), &shared).unwrap();
        same(&built, &edited);
        // The file as the API changes it — the entry cut out or replaced
        // in the text written before, or added at its end — is the text
        // the edited table writes whole.
        let whole = edited.to_toml(&path).unwrap();
        let entry = edited.entry_toml(id, &path);
        let changed_text = match old.get(id) {
            Some(_) => super::splice_entry(&written, id, entry.as_deref()).unwrap(),
            None => format!("{written}{}", entry.unwrap()),
        };
        assert_eq!(changed_text, whole, "{id}");
        for s in edited.sandboxes() {
            let kept = old.get(&s.id).is_some_and(|o| Arc::ptr_eq(o, s));
            let kept_built = built
                .get(&s.id)
                .zip(old.get(&s.id))
                .is_some_and(|(b, o)| Arc::ptr_eq(b, o));
            assert_eq!(kept, kept_built, "{id}: {} kept alike", s.id);
            assert!(kept || s.id == id, "{id}: only the edited sandbox is new");
        }
    }
    // Another sandbox's address, an invalid address: refused alike.
    for bad in [
        entry("s8", &["10.1.0.1"], "a.policy"),
        entry("s8", &["not-an-ip"], "a.policy"),
        entry("s8", &["10.1.0.8"], "missing.policy"),
    ] {
        let mut changed = file.clone();
        changed.sandbox.push(bad.clone());
        let built = SandboxTable::build(&path, &changed, &shared, Some(&old)).map(|_| ());
        let edited = old.edit(&path, "s8", Some(&bad), &shared).map(|_| ());
        assert_eq!(
            built.map_err(|e| e.to_string()),
            edited.map_err(|e| e.to_string())
        );
    }
}

/// Issue 58: an entry is found by its own lines only — not inside another
/// entry's strings (a policy name that spells an entry), not as a prefix
/// of a longer id — and cut out whole, first, middle or last.
#[test]
fn an_entry_is_spliced_by_its_own_lines_only() {
    let entry = |id: &str, name: Option<&str>| Entry {
        id: id.into(),
        addresses: vec!["10.1.0.1".into()],
        policy: PathBuf::from(format!("{id}.policy")),
        policy_name: name.map(str::to_string),
    };
    let decoy = "x\"\n\n[[sandbox]]\nid = \"s1\"\n";
    let file = |ids: &[(&str, Option<&str>)]| File {
        networks: vec!["10.0.0.0/8".into()],
        interfaces: Vec::new(),
        sandbox: ids.iter().map(|(id, n)| entry(id, *n)).collect(),
    };
    let all = [
        ("s10", Some(decoy)),
        ("s1", None),
        ("s11", None),
        ("s2", Some("n")),
    ];
    let text = file(&all).to_toml().unwrap();
    for (i, (id, _)) in all.iter().enumerate() {
        let mut rest = all.to_vec();
        rest.remove(i);
        assert_eq!(
            super::splice_entry(&text, id, None),
            file(&rest).to_toml(),
            "{id} cut out"
        );
        let mut replaced = all.to_vec();
        if let Some(slot) = replaced.get_mut(i) {
            *slot = (id, Some("new"));
        }
        let new = file(&[(id, Some("new"))]).to_toml().unwrap();
        let new = new.trim_start_matches("networks = [\"10.0.0.0/8\"]\n");
        assert_eq!(
            super::splice_entry(&text, id, Some(new)),
            file(&replaced).to_toml(),
            "{id} replaced"
        );
    }
    assert_eq!(super::splice_entry(&text, "s3", None), None);
    assert_eq!(super::splice_entry(&text, "s\"", None), None);
}
