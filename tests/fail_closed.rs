//! Fail closed, proven: every error path of evaluation ends in a deny (or a
//! refusal that leaves the previous policy in force), never an allow and
//! never a panic.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic
)]

use std::io::Write;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Barrier, mpsc};
use std::time::{Duration, Instant};

use gatehouse::log::{BackgroundSink, DecisionEvent, DecisionSink};
use gatehouse::query::{Query, Via};
use gatehouse::source::SourceMap;
use gatehouse::store::PolicyStore;
use gatehouse::{Outcome, PolicySet};

const OPEN: &str = "policy p {
  network { default allow }
  permissions { default allow }
  sandbox danger-full-access
  approvals never
}
";

fn open_policy() -> PolicySet {
    PolicySet::from_source("open.policy", OPEN).unwrap()
}

#[test]
fn an_unknown_permission_is_denied_even_under_default_allow() {
    let set = open_policy();
    let p = set.single().unwrap();
    assert_eq!(p.tool("shell.exec").outcome, Outcome::Allow);
    for perm in [
        "files.teleport",
        "",
        "SHELL.EXEC",
        "shell.exec ",
        "shell.exec\0",
        "shell",
    ] {
        let d = p.tool(perm);
        assert_eq!(
            (d.outcome, d.reason.as_str()),
            (Outcome::Deny, "unknown_permission"),
            "{perm:?}"
        );
    }
}

#[test]
fn an_unknown_query_kind_or_malformed_query_is_never_a_decision() {
    for line in [
        r#"{"kind":"teleport","host":"a"}"#,
        r#"{"kind":"connect","host":"a.example"}"#,
        r#"{"kind":"connect","host":"a.example","port":"443"}"#,
        r#"{"kind":"connect","host":"a.example","port":443,"admin":true}"#,
        r#"{"host":"a.example","port":443}"#,
        r#"["connect","a.example",443]"#,
    ] {
        assert!(Query::from_json(line).is_err(), "{line}");
    }
    for line in [
        "teleport a.example:443",
        "connect",
        "connect a.example:443 via carrier-pigeon",
        "",
    ] {
        assert!(gatehouse::Query::parse(line).is_err(), "{line}");
    }
}

#[test]
fn a_compile_failure_mid_update_keeps_the_old_policy_in_force() {
    let store = PolicyStore::new(
        PolicySet::from_source(
            "p.policy",
            "policy p { network { allow domain a.example } }",
        )
        .unwrap(),
    );
    let decide = |store: &PolicyStore, host: &str| {
        let set = store.load();
        set.single().unwrap().connect(host, 443, Via::Https).outcome
    };
    assert_eq!(decide(&store, "a.example"), Outcome::Allow);
    let before = store.load().revision().to_string();
    // Errors of every phase: syntax, check, limits; and a policy that would
    // open everything but does not build.
    let bad = [
        "policy p { network { allow domain a.example } ",
        "policy p { network { allow domain *.*.example } }",
        "policy p { network { default allow } }\npolicy p { network { default allow } }",
        "policy p { network { default allow }\n guardian { risk high destructive command ~ r\"(\" } }",
        "policy p { network { default allow; allow domain b.example port 70000 } }",
    ];
    for text in bad {
        let mut sources = SourceMap::new();
        sources.add("p.policy", text);
        assert!(store.update(sources).is_err(), "{text}");
        assert_eq!(decide(&store, "a.example"), Outcome::Allow, "{text}");
        assert_eq!(decide(&store, "b.example"), Outcome::Deny, "{text}");
        assert_eq!(store.load().revision(), before, "{text}");
    }
    // A good update does land.
    let mut sources = SourceMap::new();
    sources.add(
        "p.policy",
        "policy p { network { allow domain b.example } }",
    );
    store.update(sources).unwrap();
    assert_eq!(decide(&store, "a.example"), Outcome::Deny);
    assert_eq!(decide(&store, "b.example"), Outcome::Allow);
}

/// A writer that blocks until released: a log pipe nobody reads.
struct Stuck(mpsc::Receiver<()>, Arc<AtomicUsize>);
impl Write for Stuck {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let _ = self.0.recv();
        self.1.fetch_add(1, Ordering::SeqCst);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[test]
fn a_blocking_log_writer_never_holds_up_or_changes_a_decision() {
    let set = PolicySet::from_source(
        "p.policy",
        "policy p { network { allow domain a.example } }",
    )
    .unwrap();
    let p = set.single().unwrap();
    let (release, wait) = mpsc::channel();
    let written = Arc::new(AtomicUsize::new(0));
    let sink = BackgroundSink::new(Stuck(wait, written.clone()), 8).unwrap();
    let queries: Vec<Query> = ["connect a.example:443", "connect b.example:443", "exec ls"]
        .iter()
        .map(|t| gatehouse::Query::parse(t).unwrap())
        .collect();
    let start = Instant::now();
    for i in 0..1_000 {
        let q = &queries[i % queries.len()];
        assert_eq!(set.decide_logged(p, q, None, &sink), p.decide(q));
    }
    // A thousand decisions behind a stuck writer take no time at all, and
    // what did not fit in the queue was dropped and counted.
    assert!(start.elapsed() < Duration::from_secs(5));
    assert!(
        sink.dropped() >= 1_000 - 8 - 1,
        "dropped {}",
        sink.dropped()
    );
    assert_eq!(written.load(Ordering::SeqCst), 0);
    // Once the writer moves again, the queued events reach it.
    drop(release);
    let deadline = Instant::now() + Duration::from_secs(5);
    while written.load(Ordering::SeqCst) == 0 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(5));
    }
    assert!(written.load(Ordering::SeqCst) >= 1);
}

/// A sink that blocks inside `record` itself (a synchronous sink an embedder
/// wrote badly) holds up only its own caller: other threads keep deciding
/// with the same policy set.
struct Blocks(Arc<Barrier>);
impl DecisionSink for Blocks {
    fn record(&self, _: &DecisionEvent<'_>) {
        self.0.wait();
    }
}

#[test]
fn a_sink_blocking_one_caller_does_not_block_others() {
    let set = Arc::new(open_policy());
    let barrier = Arc::new(Barrier::new(2));
    let blocked = {
        let (set, barrier) = (set.clone(), barrier.clone());
        std::thread::spawn(move || {
            let p = set.single().unwrap();
            let q = gatehouse::Query::parse("connect a.example:443").unwrap();
            set.decide_logged(p, &q, None, &Blocks(barrier)).outcome
        })
    };
    // Meanwhile this thread decides freely.
    let p = set.single().unwrap();
    for _ in 0..1_000 {
        assert_eq!(
            p.connect("a.example", 443, Via::Https).outcome,
            Outcome::Allow
        );
    }
    barrier.wait();
    assert_eq!(blocked.join().unwrap(), Outcome::Allow);
}

#[test]
fn a_panicking_sink_is_contained() {
    struct Panics;
    impl DecisionSink for Panics {
        fn record(&self, _: &DecisionEvent<'_>) {
            panic!("the sink failed");
        }
    }
    let set = PolicySet::from_source(
        "p.policy",
        "policy p { network { allow domain a.example } }",
    )
    .unwrap();
    let p = set.single().unwrap();
    for text in [
        "connect a.example:443",
        "connect b.example:443",
        "connect 10.0.0.1:443",
    ] {
        let q = gatehouse::Query::parse(text).unwrap();
        assert_eq!(
            set.decide_logged(p, &q, None, &Panics),
            p.decide(&q),
            "{text}"
        );
    }
}

#[test]
fn hostile_queries_through_every_kind_are_denied_not_panics() {
    // The most permissive policy there is, so that anything not denied by
    // validation would be allowed: validation must catch these.
    let set = open_policy();
    let p = set.single().unwrap();
    let nul = "a\0.example";
    let long = "a".repeat(300);
    for host in [
        nul,
        &long,
        "",
        ".",
        "..",
        "[::1",
        "a..b",
        "exa mple.com",
        "\u{202e}moc.elgoog",
    ] {
        assert_eq!(
            p.connect(host, 443, Via::Https).outcome,
            Outcome::Deny,
            "{host:?}"
        );
        assert_eq!(p.dns(host).outcome, Outcome::Deny, "{host:?}");
    }
    for port in [0i64, -1, 65536, i64::MAX, i64::MIN] {
        let q = Query::Connect {
            host: "a.example".into(),
            port,
            via: Via::Https,
        };
        assert_eq!(p.decide(&q).reason.as_str(), "invalid_port", "{port}");
    }
    for argv in [
        vec![],
        vec![String::new()],
        vec!["ls\0".to_string()],
        vec![" ".to_string()],
    ] {
        assert_eq!(
            p.exec(&argv, false).reason.as_str(),
            "invalid_command",
            "{argv:?}"
        );
    }
}
