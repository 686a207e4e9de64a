//! The filtering resolver: allowed names only, CNAME chains, the answer cache, answers that must match the question.

use std::time::Duration;

use gatehouse_egress::testing::{self};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::UdpSocket;

use super::support::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_resolver_answers_only_allowed_names() {
    let dir = tempdir("dns");
    let dns = fake_dns(&[
        ("allowed.test", "127.0.0.1"),
        ("private.test", "127.0.0.2"),
        ("denied.test", "127.0.0.1"),
    ])
    .await;
    let d = daemon(&dir, POLICY, dns.addr, None).await;
    let server = d.dns.unwrap();
    let dig = |name: &str, kind: &str, tcp: bool| {
        let mut a = vec![
            format!("@{}", server.ip()),
            "-p".into(),
            server.port().to_string(),
            name.into(),
            kind.into(),
            "+tries=1".into(),
            "+time=3".into(),
        ];
        if tcp {
            a.push("+tcp".into());
        }
        a
    };
    let (_, out) = run("dig", dig("allowed.test", "A", false)).await;
    assert!(
        out.contains("status: NOERROR") && answers(&out, "allowed.test.", "127.0.0.1"),
        "{out}"
    );
    let (_, out) = run("dig", dig("allowed.test", "A", true)).await;
    assert!(
        out.contains("status: NOERROR") && answers(&out, "allowed.test.", "127.0.0.1"),
        "{out}"
    );
    let (_, out) = run("dig", dig("denied.test", "A", false)).await;
    assert!(out.contains("status: REFUSED"), "{out}");
    let (_, out) = run("dig", dig("exfil.attacker.example", "A", false)).await;
    assert!(out.contains("status: REFUSED"), "{out}");
    // Allowed name, private answer: the whole answer is refused.
    let (_, out) = run("dig", dig("private.test", "A", false)).await;
    assert!(
        out.contains("status: REFUSED") && !out.contains("127.0.0.2\n"),
        "{out}"
    );
    let (_, out) = run("dig", dig("allowed.test", "TXT", false)).await;
    assert!(out.contains("status: REFUSED"), "{out}");
    // Denied names never went upstream.
    let asked = dns.asked.lock().unwrap().clone();
    assert!(
        asked
            .iter()
            .all(|n| !n.starts_with("denied") && !n.starts_with("exfil")),
        "{asked:?}"
    );
    assert!(asked.iter().any(|n| n.starts_with("allowed")));
}

/// CNAME chains and foreign records (issue 13, item 10): every name of a
/// chain is decided with `dns`, records owned by names off the chain are
/// dropped by the resolver and ignored by the proxy's own lookup.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cname_chains_are_decided_and_foreign_records_dropped() {
    let dir = tempdir("cname");
    let (dns, script) = scripted_dns().await;
    let server = http_server().await;
    let port = server.port();
    {
        let mut s = script.lock().unwrap();
        // other.test → allowed.test: both allowed; a foreign record rides along.
        s.insert(
            "other.test.".into(),
            vec![
                testing::cname_record("other.test.", "allowed.test.", 60).unwrap(),
                a_rec("allowed.test.", "127.0.0.1", 60),
                a_rec("denied.test.", "127.0.0.9", 60),
            ],
        );
        // allowed.test → denied.test.
        s.insert(
            "allowed.test.".into(),
            vec![
                testing::cname_record("allowed.test.", "denied.test.", 60).unwrap(),
                a_rec("denied.test.", "127.0.0.1", 60),
            ],
        );
        // private.test answered only with a record owned by another name.
        s.insert(
            "private.test.".into(),
            vec![a_rec("denied.test.", "127.0.0.1", 60)],
        );
    }
    let d = daemon(&dir, POLICY, dns.addr, None).await;
    let resolver = d.dns.unwrap();
    let out = dig(resolver, &["other.test", "A"]).await;
    assert!(out.contains("status: NOERROR"), "{out}");
    assert!(
        out.contains("CNAME\tallowed.test.") && answers(&out, "allowed.test.", "127.0.0.1"),
        "{out}"
    );
    assert!(
        !out.contains("127.0.0.9") && !out.contains("denied.test.\t"),
        "{out}"
    );
    let out = dig(resolver, &["allowed.test", "A"]).await;
    assert!(
        out.contains("status: REFUSED") && !out.contains("127.0.0.1\n"),
        "{out}"
    );
    let out = dig(resolver, &["private.test", "A"]).await;
    assert!(
        out.contains("status: NOERROR") && out.contains("ANSWER: 0"),
        "{out}"
    );
    // The proxy's own lookup takes only the chain's records: private.test
    // has no address of its own, so nothing is dialled.
    let (_, status, reason, _) = curl(d.http, &[], &format!("http://private.test:{port}/")).await;
    assert_eq!((status.as_str(), reason.as_str()), ("502", "lookup_failed"));
    let (_, status, _, _) = curl(d.http, &[], &format!("http://other.test:{port}/")).await;
    assert_eq!(status, "200");
}

/// The answer cache (issue 13, item 7): an answer the policy refused is
/// never kept, a fresh answer replaces the old one, and expired entries
/// are evicted (the metrics show the table shrink).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_answer_cache_replaces_keeps_only_vetted_answers_and_evicts() {
    let dir = tempdir("cache");
    let (dns, script) = scripted_dns().await;
    // Two servers on one port: 127.0.0.1 says "old", 127.0.0.5 says "new".
    let old = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = old.local_addr().unwrap().port();
    let new = tokio::net::TcpListener::bind(("127.0.0.5", port))
        .await
        .unwrap();
    for (l, body) in [(old, "old"), (new, "new")] {
        tokio::spawn(async move {
            while let Ok((mut s, _)) = l.accept().await {
                tokio::spawn(async move {
                    let mut b = [0u8; 4096];
                    let _ = s.read(&mut b).await;
                    let resp = format!(
                        "HTTP/1.1 200 OK\r\nContent-Length: 3\r\nConnection: close\r\n\r\n{body}"
                    );
                    let _ = s.write_all(resp.as_bytes()).await;
                });
            }
        });
    }
    let policy = POLICY.replace(
        "allow ip 127.0.0.1",
        "allow ip 127.0.0.1\n    allow ip 127.0.0.5",
    );
    let d = daemon(&dir, &policy, dns.addr, None).await;
    let url = format!("http://allowed.test:{port}/");
    let set = |ip: &str, ttl: u32| {
        script.lock().unwrap().insert(
            "allowed.test.".into(),
            vec![a_rec("allowed.test.", ip, ttl)],
        );
    };
    // A private answer is refused, and not kept: once DNS moves on, the
    // name works at once.
    set("127.0.0.2", 300);
    let (_, status, reason, _) = curl(d.http, &[], &url).await;
    assert_eq!(
        (status.as_str(), reason.as_str()),
        ("403", "non_public_resolution")
    );
    set("127.0.0.1", 1);
    let (_, status, _, body) = curl(d.http, &[], &url).await;
    assert_eq!(status, "200", "{body}");
    assert!(body.ends_with("old"), "{body}");
    // DNS moves to 127.0.0.5: after the TTL, the fresh answer replaces the
    // old one, and only the new address is dialled.
    set("127.0.0.5", 1);
    tokio::time::sleep(Duration::from_millis(1300)).await;
    let (_, status, _, body) = curl(d.http, &[], &url).await;
    assert_eq!(status, "200", "{body}");
    assert!(body.ends_with("new"), "{body}");
    // Names resolved through the resolver fill the table; expired ones
    // leave it.
    {
        let mut s = script.lock().unwrap();
        for i in 0..40 {
            s.insert(
                format!("n{i}.other.test."),
                vec![a_rec(&format!("n{i}.other.test."), "1.1.1.1", 1)],
            );
        }
    }
    let policy = policy.replace("allow domain other.test", "allow domain **.other.test");
    std::fs::write(dir.join("egress.policy"), &policy).unwrap();
    tokio::time::sleep(Duration::from_millis(600)).await;
    let names = dir.join("names.txt");
    std::fs::write(
        &names,
        (0..40)
            .map(|i| format!("n{i}.other.test A\n"))
            .collect::<String>(),
    )
    .unwrap();
    let out = dig(d.dns.unwrap(), &["-f", names.to_str().unwrap()]).await;
    assert_eq!(out.matches("status: NOERROR").count(), 40, "{out}");
    let metric = |text: &str, name: &str| -> i64 {
        text.lines()
            .find_map(|l| l.strip_prefix(name)?.trim().parse().ok())
            .unwrap_or(-1)
    };
    let scrape = || async {
        run(
            "curl",
            vec![
                "-s".into(),
                format!("http://{}/metrics", d.metrics.unwrap()),
            ],
        )
        .await
        .1
    };
    let cached = metric(&scrape().await, "gatehouse_egress_resolver_cache_entries");
    assert!(cached >= 40, "{cached}");
    tokio::time::sleep(Duration::from_secs(7)).await;
    assert_eq!(
        metric(&scrape().await, "gatehouse_egress_resolver_cache_entries"),
        0
    );
}

/// Answers are matched to questions (issue 13, item 6): an upstream reply
/// that carries the question's id but another question — what an off-path
/// spoofer who guessed the id sends first — is ignored, and the genuine
/// answer that follows is the one given.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn upstream_answers_must_match_the_question() {
    use hickory_proto::op::{Message, MessageType, OpCode};
    let dir = tempdir("spoof");
    let upstream = UdpSocket::bind("127.0.0.1:0").await.unwrap();
    let up_addr = upstream.local_addr().unwrap();
    tokio::spawn(async move {
        let mut buf = [0u8; 1500];
        while let Ok((n, from)) = upstream.recv_from(&mut buf).await {
            let q = Message::from_vec(&buf[..n]).unwrap();
            let question = q.queries[0].clone();
            let reply = |name: &str, ip: &str, asked: bool| {
                let mut r = Message::new(q.metadata.id, MessageType::Response, OpCode::Query);
                let mut shown = question.clone();
                if !asked {
                    shown.set_name(hickory_proto::rr::Name::from_ascii(name).unwrap());
                }
                r.add_query(shown);
                if question.query_type() == hickory_proto::rr::RecordType::A {
                    r.add_answer(testing::addr_record(name, ip.parse().unwrap(), 60).unwrap());
                }
                r.to_vec().unwrap()
            };
            let name = question.name().to_ascii();
            // The spoof first: same id, another question and answer.
            upstream
                .send_to(&reply("denied.test.", "10.9.9.9", false), from)
                .await
                .unwrap();
            tokio::time::sleep(Duration::from_millis(50)).await;
            upstream
                .send_to(&reply(&name, "127.0.0.1", true), from)
                .await
                .unwrap();
        }
    });
    let d = daemon(&dir, POLICY, up_addr, None).await;
    let out = dig(d.dns.unwrap(), &["allowed.test", "A"]).await;
    assert!(out.contains("status: NOERROR"), "{out}");
    assert!(answers(&out, "allowed.test.", "127.0.0.1"), "{out}");
    assert!(!out.contains("10.9.9.9"), "{out}");
}

/// The red team's notes on the resolver (issue 35): only standard queries
/// (a NOTIFY is NOTIMP, not answered as a question), only class IN (CHAOS
/// and ANY are refused, not answered from an IN lookup), and an answer too
/// large for UDP is sent empty with TC set, so that the client asks again
/// over TCP and gets all of it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_resolver_answers_standard_in_questions_and_truncates_over_udp() {
    use hickory_proto::op::{Message, MessageType, OpCode, Query, ResponseCode};
    use hickory_proto::rr::{Name, RecordType};
    let dir = tempdir("dns-classes");
    let (dns, script) = scripted_dns().await;
    script.lock().unwrap().insert(
        "allowed.test.".into(),
        (1..=59)
            .map(|i| a_rec("allowed.test.", &format!("8.8.4.{i}"), 60))
            .collect(),
    );
    let d = daemon(&dir, POLICY, dns.addr, None).await;
    let resolver = d.dns.unwrap();
    // 59 addresses do not fit 512 bytes: TC and no answer over UDP.
    let out = dig(resolver, &["allowed.test", "A", "+noedns", "+ignore"]).await;
    assert!(out.contains(" tc") && out.contains("ANSWER: 0"), "{out}");
    // dig then asks over TCP and gets every address.
    let out = dig(resolver, &["allowed.test", "A", "+noedns"]).await;
    assert!(out.contains("ANSWER: 59"), "{out}");
    // A client that takes 4 096 bytes gets them over UDP.
    let out = dig(resolver, &["allowed.test", "A", "+bufsize=4096", "+ignore"]).await;
    assert!(out.contains("ANSWER: 59") && !out.contains(" tc"), "{out}");
    for class in ["CH", "ANY"] {
        let out = dig(resolver, &["-c", class, "allowed.test", "A"]).await;
        assert!(out.contains("status: REFUSED"), "{class}: {out}");
    }
    let out = dig(resolver, &["-c", "CH", "version.bind", "TXT"]).await;
    assert!(out.contains("status: REFUSED"), "{out}");
    // A NOTIFY is not a question.
    let mut m = Message::new(7, MessageType::Query, OpCode::Notify);
    m.add_query(Query::query(
        Name::from_ascii("allowed.test.").unwrap(),
        RecordType::A,
    ));
    let sock = UdpSocket::bind("127.0.0.1:0").await.unwrap();
    sock.send_to(&m.to_vec().unwrap(), resolver).await.unwrap();
    let mut buf = [0u8; 512];
    let (n, _) = tokio::time::timeout(Duration::from_secs(5), sock.recv_from(&mut buf))
        .await
        .unwrap()
        .unwrap();
    let r = Message::from_vec(&buf[..n]).unwrap();
    assert_eq!(r.metadata.response_code, ResponseCode::NotImp);
    assert!(r.answers.is_empty());
}

/// `localhost` means the loopback addresses everywhere (issue 37, item 4):
/// the proxy dials the ones the policy allows (here 127.0.0.1, not ::1),
/// over plain HTTP and through `CONNECT`, and the resolver answers them
/// itself, never asking upstream.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn localhost_means_the_loopback_addresses_everywhere() {
    let dir = tempdir("localhost");
    let dns = fake_dns(&[("localhost", "10.9.9.9")]).await;
    let policy = "policy egress {\n  network {\n    default deny\n    local deny\n    allow domain localhost\n    allow ip 127.0.0.1\n  }\n}\n";
    let d = daemon(&dir, policy, dns.addr, None).await;
    let server = http_server().await;
    let url = format!("http://localhost:{}/", server.port());
    let (code, status, reason, out) = curl(d.http, &["--noproxy", ""], &url).await;
    assert_eq!(
        (code, status.as_str(), reason.as_str()),
        (0, "200", ""),
        "{out}"
    );
    let (code, status, _, out) = curl(d.http, &["--noproxy", "", "-p"], &url).await;
    assert_eq!((code, status.as_str()), (0, "200"), "{out}");
    let resolver = d.dns.unwrap();
    let dig = |kind: &str| {
        vec![
            format!("@{}", resolver.ip()),
            "-p".into(),
            resolver.port().to_string(),
            "localhost".into(),
            kind.into(),
            "+tries=1".into(),
            "+time=3".into(),
        ]
    };
    let (_, out) = run("dig", dig("A")).await;
    assert!(answers(&out, "localhost.", "127.0.0.1"), "{out}");
    // ::1 is not allowed: no IPv6 address, and no error either.
    let (_, out) = run("dig", dig("AAAA")).await;
    assert!(
        out.contains("status: NOERROR") && out.contains("ANSWER: 0"),
        "{out}"
    );
    assert!(dns.asked.lock().unwrap().is_empty(), "asked upstream");
}
