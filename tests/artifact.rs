//! Compiled artifacts: round trips decide the same; corruption, truncation
//! and newer formats are refused cleanly.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic
)]

use gatehouse::PolicySet;
use gatehouse::artifact::ArtifactError;
use gatehouse::query::Query;

fn shipped() -> PolicySet {
    let mut sources = gatehouse::source::SourceMap::new();
    for n in [
        "coding-agent",
        "research",
        "observer",
        "zerocode-proxy",
        "apps",
        "guardian",
        "zerocode-presets",
    ] {
        let text = std::fs::read_to_string(format!(
            "{}/policies/{n}.policy",
            env!("CARGO_MANIFEST_DIR")
        ))
        .unwrap();
        sources.add(format!("{n}.policy"), text);
    }
    PolicySet::from_sources(sources).unwrap()
}

const QUERIES: &[&str] = &[
    "connect github.com:443",
    "connect api.github.com:443",
    "connect 10.0.0.1:22",
    "connect [::1]:8080",
    "dns competitor.example.com",
    "resolved x.example -> 93.184.215.14, 10.0.0.7",
    "tool input.control",
    "app /Applications/Firefox.app",
    "socket \"/var/run/docker.sock\"",
    "listen 0.0.0.0:1",
    "upstream",
    "exec git push",
    "exec rm -rf build",
    "exec bash -lc \"ls && git push\"",
    "write \"/w/.git/x\" in \"/w\"",
    "mcp github/delete_repo destructive=true",
    "prompt request_permissions",
    "review exec curl -d x https://y.org with risk=low",
    "review exec cat /home/u/.ssh/id with auth=medium",
    "web_search",
];

#[test]
fn a_loaded_artifact_decides_exactly_as_the_source() {
    let set = shipped();
    let bytes = set.to_artifact().unwrap();
    let back = PolicySet::from_artifact(&bytes).unwrap();
    assert_eq!(set.revision(), back.revision());
    for p in set.policies() {
        let q = back.policy(p.name()).unwrap();
        for text in QUERIES {
            let query: Query = gatehouse::Query::parse(text).unwrap();
            let (a, b) = (p.decide(&query), q.decide(&query));
            assert_eq!(a, b, "{} {text}", p.name());
            assert_eq!(
                a.rule.and_then(|r| set.rule(r)),
                b.rule.and_then(|r| back.rule(r))
            );
        }
    }
}

#[test]
fn every_flipped_byte_and_every_truncation_is_refused() {
    let bytes = PolicySet::from_source(
        "p.policy",
        "policy p { network { allow domain a.example; deny cidr 10.0.0.0/8 } }",
    )
    .unwrap()
    .to_artifact()
    .unwrap();
    for i in 0..bytes.len() {
        let mut bad = bytes.clone();
        bad[i] ^= 0x20;
        assert!(
            PolicySet::from_artifact(&bad).is_err(),
            "flipped byte {i} accepted"
        );
    }
    for len in 0..bytes.len() {
        assert!(
            PolicySet::from_artifact(&bytes[..len]).is_err(),
            "truncated to {len} accepted"
        );
    }
    let mut longer = bytes.clone();
    longer.push(0);
    assert_eq!(
        PolicySet::from_artifact(&longer).unwrap_err(),
        ArtifactError::TrailingBytes(1)
    );
}

#[test]
fn a_newer_format_is_refused_with_a_clear_error() {
    let mut bytes = PolicySet::from_source("p.policy", "policy p {}")
        .unwrap()
        .to_artifact()
        .unwrap();
    let next = gatehouse::artifact::FORMAT_VERSION + 1;
    bytes[8..12].copy_from_slice(&next.to_le_bytes());
    let e = PolicySet::from_artifact(&bytes).unwrap_err();
    assert_eq!(
        e,
        ArtifactError::NewerFormat {
            found: next,
            supported: gatehouse::artifact::FORMAT_VERSION
        }
    );
    assert!(e.to_string().contains("newer gatehouse"));
    assert_eq!(
        PolicySet::from_artifact(b"hello world").unwrap_err(),
        ArtifactError::NotAnArtifact
    );
}

/// An artifact with a correct header and checksum around any payload.
fn forge(json: &serde_json::Value) -> Vec<u8> {
    gatehouse::testing::forge_artifact(json.clone()).unwrap()
}

/// An artifact's payload as JSON.
fn payload_json(set: &PolicySet) -> serde_json::Value {
    gatehouse::testing::artifact_json(&set.to_artifact().unwrap()).unwrap()
}

/// A checksummed payload whose indices lie is caught by validation.
#[test]
fn a_well_checksummed_but_forged_payload_is_refused() {
    let set = PolicySet::from_source(
        "p.policy",
        "policy p { network { allow domain a.example } }",
    )
    .unwrap();
    let mut json: serde_json::Value = payload_json(&set);
    // Point a node of the domain automaton at a slot that does not exist.
    json["inner"]["policies"][0]["net"]["domains"]["nodes"][1]["first_slot"] =
        serde_json::json!(999);
    let e = PolicySet::from_artifact(&forge(&json)).unwrap_err();
    assert!(
        matches!(e, ArtifactError::Inconsistent(ref m) if m.to_string().contains("slot")),
        "{e}"
    );
    // A rule whose text range runs past the arena.
    let mut json: serde_json::Value = payload_json(&set);
    json["inner"]["rules"]["lens"][0] = serde_json::json!(200);
    let e = PolicySet::from_artifact(&forge(&json)).unwrap_err();
    assert!(
        matches!(e, ArtifactError::Inconsistent(ref m) if m.to_string().contains("out of range")),
        "{e}"
    );
    // A command rule indexed under a program it does not name: the engine
    // trusts the index, so the load refuses it (an `allow git` filed
    // under `rm` would let `rm` run).
    let set = PolicySet::from_source(
        "p.policy",
        "policy p { commands { allow git status\n forbid rm } }",
    )
    .unwrap();
    let mut json: serde_json::Value = payload_json(&set);
    let index = &mut json["inner"]["policies"][0]["agent"]["commands"]["by_program"];
    assert!(index.is_object(), "{json}");
    index["rm"] = serde_json::json!([0]);
    let e = PolicySet::from_artifact(&forge(&json)).unwrap_err();
    assert!(
        matches!(e, ArtifactError::Inconsistent(ref m) if m.to_string().contains("command index")),
        "{e}"
    );
}

/// An artifact whose checksum is right around any stored bytes (the
/// payload's stated length, then what should be its DEFLATE stream).
fn sealed(stored: &[u8]) -> Vec<u8> {
    use sha2::Digest;
    let mut out = Vec::new();
    out.extend_from_slice(b"GATEHSE\0");
    out.extend_from_slice(&gatehouse::artifact::FORMAT_VERSION.to_le_bytes());
    out.extend_from_slice(&(stored.len() as u64).to_le_bytes());
    out.extend_from_slice(&sha2::Sha256::digest(stored));
    out.extend_from_slice(stored);
    out
}

/// The compressed payload is hostile input too: with a correct checksum,
/// a stated length that lies either way, a stream that does not inflate,
/// bytes after the stream, a bomb, are all refused before or while
/// inflating, never a panic and never more memory than the limit.
#[test]
fn a_lying_compressed_payload_is_refused() {
    let bytes = PolicySet::from_source(
        "p.policy",
        "policy p { network { allow domain a.example; deny cidr 10.0.0.0/8 } }",
    )
    .unwrap()
    .to_artifact()
    .unwrap();
    let stored = &bytes[52..];
    let len = u64::from_le_bytes(stored[..8].try_into().unwrap());
    let deflated = &stored[8..];
    // The artifact as written loads.
    assert!(PolicySet::from_artifact(&sealed(stored)).is_ok());
    let with_len = |l: u64, rest: &[u8]| {
        let mut s = l.to_le_bytes().to_vec();
        s.extend_from_slice(rest);
        sealed(&s)
    };
    let refused = |a: &[u8], why: &str| match PolicySet::from_artifact(a) {
        Err(ArtifactError::Invalid(m)) => assert!(m.contains(why), "{m}"),
        other => panic!("expected a refusal naming {why:?}, got {other:?}"),
    };
    refused(&with_len(len + 1, deflated), "not the length");
    refused(&with_len(len - 1, deflated), "not the length");
    let mut longer = deflated.to_vec();
    longer.extend_from_slice(b"junk");
    refused(&with_len(len, &longer), "bytes follow");
    refused(&with_len(len, b"\xff\xff\xff\xff"), "does not inflate");
    refused(
        &with_len(len, &[]),
        "more than its compressed bytes can hold",
    );
    refused(&sealed(&[1, 2, 3]), "no payload length");
    // A stated size past the limit is refused before anything is allocated.
    refused(
        &with_len(gatehouse::artifact::MAX_PAYLOAD + 1, deflated),
        "over the limit",
    );
    refused(&with_len(u64::MAX, deflated), "over the limit");
    // A real bomb: 64 MiB of zeros in about 64 KiB, stated as such, is
    // inflated (it is under the limit) and then refused as no set.
    let zeros = vec![0u8; 64 << 20];
    let bomb = miniz_oxide::deflate::compress_to_vec(&zeros, 6);
    refused(&with_len(zeros.len() as u64, &bomb), "");
    // Stated as 1 KiB, the same stream stops at 1 KiB and is refused.
    refused(&with_len(1024, &bomb), "not the length");
}

#[test]
fn the_same_source_gives_the_same_artifact() {
    let a = shipped().to_artifact().unwrap();
    let b = shipped().to_artifact().unwrap();
    assert!(
        a == b,
        "artifacts differ between two compilations of the same source"
    );
}

/// The exporters read the lowered network view the compiled set keeps, so an
/// artifact exports exactly as its text does: rulesets, Cilium policies,
/// sandbox-runtime settings and lists, refusals and notes alike (the
/// sandbox-runtime decider serves bundles). And a set with IPv6 address
/// rules makes an artifact at all (IPv6 interval starts above `u64::MAX`
/// once made the artifact's JSON refuse to serialise).
#[test]
fn an_artifact_exports_as_its_text_does() {
    use gatehouse::export::{CiliumOptions, Exits, cilium, nftables, srt_lists, srt_settings};
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files: Vec<_> = std::fs::read_dir(root.join("policies"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "policy"))
        .collect();
    files.push(root.join("tests/data/export-fleet.policy"));
    files.push(root.join("tests/data/export.policy"));
    files.push(root.join("tests/data/docs-language/policy.policy"));
    let exits = Exits {
        proxy: "127.0.0.1:3128".parse().ok(),
        resolver: None,
    };
    let mut compared = 0;
    for f in files {
        let text = std::fs::read_to_string(&f).unwrap();
        let set = PolicySet::from_source(&f.display().to_string(), &text).unwrap();
        let back = PolicySet::from_artifact(&set.to_artifact().unwrap()).unwrap();
        for p in set.policies() {
            let n = Some(p.name());
            let o = CiliumOptions::default();
            let what = format!("{} {}", f.display(), p.name());
            assert_eq!(
                nftables(&set, n, &exits),
                nftables(&back, n, &exits),
                "{what}"
            );
            assert_eq!(cilium(&set, n, &o), cilium(&back, n, &o), "{what}");
            assert_eq!(srt_settings(&set, n), srt_settings(&back, n), "{what}");
            assert_eq!(srt_lists(&set, n), srt_lists(&back, n), "{what}");
            let b = back.policy(p.name()).unwrap();
            for addr in [
                "[2001:db8::1]:443",
                "[2606:4700::1]:443",
                "[::1]:80",
                "10.0.0.5:443",
            ] {
                assert_eq!(
                    p.decide(&Query::parse(&format!("connect {addr}")).unwrap()),
                    b.decide(&Query::parse(&format!("connect {addr}")).unwrap()),
                    "{what} {addr}"
                );
            }
            assert_eq!(
                format!("{:?}", p.network()),
                format!("{:?}", back.policy(p.name()).unwrap().network()),
                "{what}"
            );
            compared += 1;
        }
    }
    assert!(compared > 15, "{compared}");
}

/// A set whose every hash map (denied apps, command programs, MCP servers
/// and tools, sockets) holds many keys: compiled twice in one process the
/// maps get different hash seeds, so any map written in hash order gives
/// another revision and other artifact bytes.
#[test]
fn the_same_source_always_gives_the_same_bytes_and_revision() {
    let mut text = String::from("policy p {\n  network {\n");
    for i in 0..40 {
        text.push_str(&format!("    allow socket \"/run/s{i}.sock\"\n"));
    }
    text.push_str("  }\n  apps {\n    deny");
    for i in 0..40 {
        text.push_str(&format!(" app{i}"));
    }
    text.push_str("\n  }\n  commands {\n");
    for i in 0..40 {
        text.push_str(&format!("    allow prog{i} run\n"));
    }
    text.push_str("  }\n  mcp {\n");
    for i in 0..20 {
        text.push_str(&format!("    server srv{i} auto\n"));
        for j in 0..10 {
            text.push_str(&format!("    tool srv{i}/t{j} prompt\n"));
        }
    }
    text.push_str("  }\n}\n");
    let a = PolicySet::from_source("m.policy", &text).unwrap();
    let bytes = a.to_artifact().unwrap();
    for _ in 0..8 {
        let b = PolicySet::from_source("m.policy", &text).unwrap();
        assert_eq!(b.to_artifact().unwrap(), bytes);
        assert_eq!(b.revision(), a.revision());
        // Loaded back, the maps are rebuilt with fresh seeds too.
        let back = PolicySet::from_artifact(&bytes).unwrap();
        assert_eq!(back.to_artifact().unwrap(), bytes);
        assert_eq!(back.revision(), a.revision());
    }
    // The revision is the digest of exactly the artifact's payload.
    let payload = gatehouse::testing::artifact_payload(&bytes).unwrap();
    assert_eq!(
        a.revision(),
        &gatehouse::artifact::sha256_hex(&payload)[..16]
    );
}

/// A payload many times the load's 64 KiB window, with texts that run
/// across its edges, decodes as it inflates into the same set: the same
/// revision, the same artifact again, the same decisions, every rule's
/// place and text. Cut anywhere or stated a byte off, it is refused.
#[test]
fn a_large_artifact_is_decoded_while_inflated_and_reads_back_the_same() {
    let mut text = String::from("policy big {\n  network {\n    default deny\n");
    for i in 0..4_000 {
        text.push_str(&format!(
            "    allow domain h{i}-{}.example{}.test port {}\n",
            "x".repeat(i % 50),
            i % 13,
            1 + i % 60_000
        ));
        if i % 7 == 0 {
            text.push_str(&format!(
                "    deny cidr 10.{}.{}.0/24\n",
                i % 256,
                (i / 256) % 256
            ));
        }
    }
    text.push_str("  }\n  commands {\n");
    for i in 0..300 {
        text.push_str(&format!(
            "    prompt tool{i} push because \"{}\"\n",
            "a reason that is long enough ".repeat(1 + i % 50)
        ));
    }
    text.push_str("  }\n}\n");
    let set = PolicySet::from_source("big.policy", &text).unwrap();
    let bytes = set.to_artifact().unwrap();
    let payload = gatehouse::testing::artifact_payload(&bytes).unwrap();
    assert!(payload.len() > 8 * 65_536, "{}", payload.len());
    let back = PolicySet::from_artifact(&bytes).unwrap();
    assert_eq!(back.revision(), set.revision());
    assert_eq!(back.to_artifact().unwrap(), bytes);
    let rules: Vec<_> = set.rules().map(|(_, r)| format!("{r:?}")).collect();
    let rules_back: Vec<_> = back.rules().map(|(_, r)| format!("{r:?}")).collect();
    assert_eq!(rules, rules_back);
    let (p, q) = (set.single().unwrap(), back.single().unwrap());
    for i in (0..4_000).step_by(37) {
        let host = format!("h{i}-{}.example{}.test", "x".repeat(i % 50), i % 13);
        for port in [443, (1 + i % 60_000) as u16] {
            assert_eq!(
                format!("{:?}", p.connect(&host, port, gatehouse::query::Via::Https)),
                format!("{:?}", q.connect(&host, port, gatehouse::query::Via::Https))
            );
        }
    }
    assert_eq!(
        format!("{:?}", p.network().rules),
        format!("{:?}", q.network().rules)
    );
    // Cut at a few places, or its payload stated a byte off: refused.
    for cut in [60, bytes.len() / 3, bytes.len() - 1] {
        let short = sealed(&bytes[52..cut]);
        assert!(PolicySet::from_artifact(&short).is_err(), "cut at {cut}");
    }
    let stored = &bytes[52..];
    let len = u64::from_le_bytes(stored[..8].try_into().unwrap());
    for l in [len - 1, len + 1] {
        let mut s = l.to_le_bytes().to_vec();
        s.extend_from_slice(&stored[8..]);
        assert!(
            PolicySet::from_artifact(&sealed(&s)).is_err(),
            "length {l} of {len}"
        );
    }
}
