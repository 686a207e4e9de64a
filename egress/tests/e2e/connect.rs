//! CONNECT tunnels: SNI checks, slow heads and held tunnels cut, tunnels ended by a reload.

use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use super::support::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn https_through_connect_with_sni_checks() {
    let dir = tempdir("https");
    let dns = fake_dns(&[
        ("allowed.test", "127.0.0.1"),
        ("other.test", "127.0.0.1"),
        ("denied.test", "127.0.0.1"),
    ])
    .await;
    let tls = tls_server(&dir).await;
    let d = daemon(&dir, POLICY, dns.addr, None).await;
    let port = tls.port;

    let (code, status, _, out) = curl(d.http, &[], &format!("https://allowed.test:{port}/")).await;
    assert_eq!((code, status.as_str()), (0, "200"), "{out}");
    assert!(out.contains("s_server"), "{out}");

    let (code, _, reason, _) = curl(d.http, &[], &format!("https://denied.test:{port}/")).await;
    assert_ne!(code, 0);
    assert_eq!(reason, "denied_by_rule");

    // curl asks to CONNECT to allowed.test but says other.test in the TLS
    // handshake: the tunnel is closed.
    let (code, _, _, _) = curl(
        d.http,
        &[
            "--connect-to",
            &format!("other.test:{port}:allowed.test:{port}"),
        ],
        &format!("https://other.test:{port}/"),
    )
    .await;
    assert_ne!(code, 0);
    assert!(
        records(&d)
            .iter()
            .any(|r| r["outcome"] == "refused: sni_mismatch"),
        "{:?}",
        records(&d)
    );

    // The same by hand, to see exactly where it stops.
    let mut s = TcpStream::connect(d.http).await.unwrap();
    s.write_all(
        format!("CONNECT allowed.test:{port} HTTP/1.1\r\nHost: allowed.test:{port}\r\n\r\n")
            .as_bytes(),
    )
    .await
    .unwrap();
    let mut buf = [0u8; 256];
    let n = s.read(&mut buf).await.unwrap();
    assert!(buf[..n].starts_with(b"HTTP/1.1 200"));
    s.write_all(&gatehouse_wire::tls::build_client_hello(Some(
        "evil.example",
    )))
    .await
    .unwrap();
    let mut rest = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(5), s.read_to_end(&mut rest))
        .await
        .unwrap();
    assert!(
        rest.is_empty(),
        "nothing of the server reaches a mismatched client"
    );

    // A CONNECT whose Host header disagrees with its target.
    let mut s = TcpStream::connect(d.http).await.unwrap();
    s.write_all(
        format!("CONNECT allowed.test:{port} HTTP/1.1\r\nHost: denied.test:{port}\r\n\r\n")
            .as_bytes(),
    )
    .await
    .unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).await.unwrap();
    assert!(
        out.starts_with("HTTP/1.1 403") && out.contains("host_mismatch"),
        "{out}"
    );
}

/// Deadlines (issue 13, item 4), with short configured values: a request
/// head or a tunnel's first bytes dripped slowly are cut at the overall
/// deadline, and an established tunnel is closed when idle and when it has
/// lived too long. Every wait here is bounded.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_heads_and_held_tunnels_are_cut() {
    use std::time::Instant;
    let dir = tempdir("deadlines");
    let dns = fake_dns(&[("allowed.test", "127.0.0.1")]).await;
    let server = http_server().await;
    // A server that accepts and says nothing, and one that trickles a byte
    // every 200 ms (for at most 20 s).
    let silent = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let silent_port = silent.local_addr().unwrap().port();
    tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((s, _)) = silent.accept().await {
            held.push(s);
        }
    });
    let trickle = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let trickle_port = trickle.local_addr().unwrap().port();
    tokio::spawn(async move {
        while let Ok((mut s, _)) = trickle.accept().await {
            tokio::spawn(async move {
                for _ in 0..100 {
                    if s.write_all(b".").await.is_err() {
                        return;
                    }
                    tokio::time::sleep(Duration::from_millis(200)).await;
                }
            });
        }
    });
    let timeouts = gatehouse_egress::relay::Timeouts {
        first_bytes: Duration::from_secs(1),
        tunnel_idle: Duration::from_secs(1),
        tunnel_total: Duration::from_secs(3),
        keepalive_idle: Duration::from_secs(1),
    };
    let d = daemon_with(&dir, POLICY, dns.addr, None, timeouts).await;

    /// Reads until the proxy closes (or 8 s pass); how long that took.
    async fn until_closed(s: &mut TcpStream) -> Duration {
        let t = Instant::now();
        let mut buf = [0u8; 1024];
        let _ = tokio::time::timeout(Duration::from_secs(8), async {
            while matches!(s.read(&mut buf).await, Ok(n) if n > 0) {}
        })
        .await;
        t.elapsed()
    }
    async fn drip(s: &mut TcpStream, bytes: &[u8]) {
        for b in bytes {
            if s.write_all(&[*b]).await.is_err() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    // A request head dripped a byte every 200 ms: cut at about 1 s.
    let mut s = TcpStream::connect(d.http).await.unwrap();
    let head = format!(
        "GET http://allowed.test:{}/ HTTP/1.1\r\nHost: allowed.test\r\n\r\n",
        server.port()
    );
    let t = Instant::now();
    tokio::select! {
        _ = drip(&mut s, head.as_bytes()) => {}
        _ = tokio::time::sleep(Duration::from_secs(6)) => {}
    }
    let t = t.elapsed() + until_closed(&mut s).await;
    assert!(t < Duration::from_secs(4), "a dripped head held for {t:?}");

    // CONNECT, then one byte and silence: closed at the first-bytes deadline.
    let mut s = connect_tunnel(d.http, server.port()).await;
    s.write_all(b"G").await.unwrap();
    let t = until_closed(&mut s).await;
    assert!(
        t < Duration::from_secs(3),
        "one byte then silence held for {t:?}"
    );

    // A ClientHello dripped a byte every 200 ms: cut at the overall deadline,
    // though no single read waits long.
    let mut s = connect_tunnel(d.http, server.port()).await;
    let hello = gatehouse_wire::tls::build_client_hello(Some("allowed.test"));
    let t = Instant::now();
    tokio::select! {
        _ = drip(&mut s, &hello) => {}
        _ = tokio::time::sleep(Duration::from_secs(6)) => {}
    }
    let t = t.elapsed() + until_closed(&mut s).await;
    assert!(
        t < Duration::from_secs(4),
        "a dripped ClientHello held for {t:?}"
    );

    // An established tunnel to a silent server: closed after 1 s idle.
    let mut s = connect_tunnel(d.http, silent_port).await;
    let get = format!("GET / HTTP/1.1\r\nHost: allowed.test:{silent_port}\r\n\r\n");
    s.write_all(get.as_bytes()).await.unwrap();
    let t = until_closed(&mut s).await;
    assert!(
        t >= Duration::from_millis(800) && t < Duration::from_secs(3),
        "idle tunnel closed after {t:?}"
    );

    // A busy tunnel (a byte every 200 ms): closed at the 3 s total.
    let mut s = connect_tunnel(d.http, trickle_port).await;
    let get = format!("GET / HTTP/1.1\r\nHost: allowed.test:{trickle_port}\r\n\r\n");
    s.write_all(get.as_bytes()).await.unwrap();
    let t = until_closed(&mut s).await;
    assert!(
        t >= Duration::from_millis(2500) && t < Duration::from_secs(5),
        "busy tunnel closed after {t:?}"
    );
}

/// Issue 35, finding 8: each request inside a plain-HTTP CONNECT tunnel is
/// decided again with the policy in force, so a reload that denies the
/// host ends the tunnel at its next request (403 `denied_by_rule`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reload_that_denies_a_host_ends_its_plain_http_tunnels() {
    let dir = tempdir("tunnel-revoke");
    let dns = fake_dns(&[("allowed.test", "127.0.0.1")]).await;
    let server = http_server().await;
    let d = daemon(&dir, POLICY, dns.addr, None).await;
    let port = server.port();
    let mut s = TcpStream::connect(d.http).await.unwrap();
    let connect =
        format!("CONNECT allowed.test:{port} HTTP/1.1\r\nHost: allowed.test:{port}\r\n\r\n");
    s.write_all(connect.as_bytes()).await.unwrap();
    let head = one_response(&mut s).await;
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    let get = format!("GET / HTTP/1.1\r\nHost: allowed.test:{port}\r\n\r\n");
    s.write_all(get.as_bytes()).await.unwrap();
    let head = one_response(&mut s).await;
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    // The same tunnel carries another request while the policy allows it.
    s.write_all(get.as_bytes()).await.unwrap();
    let head = one_response(&mut s).await;
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    // A reload denies the host: the tunnel's next request is refused.
    std::fs::write(
        dir.join("egress.policy"),
        POLICY.replace("allow domain allowed.test", "deny domain allowed.test"),
    )
    .unwrap();
    let mut seen = false;
    for _ in 0..40 {
        tokio::time::sleep(Duration::from_millis(100)).await;
        if d.policies.store.load().single().is_some_and(|p| {
            !p.connect("allowed.test", port, gatehouse::Via::Https)
                .is_allow()
        }) {
            seen = true;
            break;
        }
    }
    assert!(seen, "the reload was not seen");
    s.write_all(get.as_bytes()).await.unwrap();
    let head = one_response(&mut s).await;
    assert!(
        head.starts_with("HTTP/1.1 403") && head.contains("X-Gatehouse-Reason: denied_by_rule"),
        "{head}"
    );
}

/// Issue 35, finding 8: a reload that denies what a raw tunnel was allowed
/// for ends it — a TLS `CONNECT` tunnel to a name, a SOCKS5 tunnel of a
/// protocol that names no host, and a SOCKS5 tunnel to an address whose
/// ClientHello named a host the reload denies — while one the new policy
/// still allows keeps relaying.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reload_ends_the_raw_tunnels_it_no_longer_allows() {
    use tokio::io::AsyncReadExt;
    let dir = tempdir("raw-revoke");
    let dns = fake_dns(&[("allowed.test", "127.0.0.1"), ("other.test", "127.0.0.1")]).await;
    // An echo server: a raw tunnel's bytes come back while it lives.
    let echo = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = echo.local_addr().unwrap().port();
    tokio::spawn(async move {
        while let Ok((mut c, _)) = echo.accept().await {
            tokio::spawn(async move {
                let (mut r, mut w) = c.split();
                let _ = tokio::io::copy(&mut r, &mut w).await;
            });
        }
    });
    let d = daemon(&dir, POLICY, dns.addr, None).await;
    let hello = |name: &str| gatehouse_wire::tls::build_client_hello(Some(name));
    // Each tunnel echoes its first bytes while it is allowed.
    let alive = |mut s: TcpStream, first: Vec<u8>| async move {
        s.write_all(&first).await.unwrap();
        let mut b = vec![0u8; first.len()];
        tokio::time::timeout(Duration::from_secs(5), s.read_exact(&mut b))
            .await
            .unwrap()
            .unwrap();
        s
    };
    let connect = |host: &'static str| {
        let proxy = d.http;
        async move {
            let mut s = TcpStream::connect(proxy).await.unwrap();
            let line = format!("CONNECT {host}:{port} HTTP/1.1\r\nHost: {host}:{port}\r\n\r\n");
            s.write_all(line.as_bytes()).await.unwrap();
            let head = one_response(&mut s).await;
            assert!(head.starts_with("HTTP/1.1 200"), "{head}");
            s
        }
    };
    let tls_denied = alive(connect("allowed.test").await, hello("allowed.test")).await;
    let tls_kept = alive(connect("other.test").await, hello("other.test")).await;
    let socks_raw = alive(
        super::socks::socks_tunnel(d.socks.unwrap(), "allowed.test", port).await,
        b"\x00binary".to_vec(),
    )
    .await;
    let socks_sni = alive(
        super::socks::socks_tunnel(d.socks.unwrap(), "127.0.0.1", port).await,
        hello("allowed.test"),
    )
    .await;
    std::fs::write(
        dir.join("egress.policy"),
        POLICY.replace("allow domain allowed.test", "deny domain allowed.test"),
    )
    .unwrap();
    // Each denied tunnel is closed; the allowed one still echoes.
    for (what, mut s) in [
        ("tls", tls_denied),
        ("socks raw", socks_raw),
        ("socks sni", socks_sni),
    ] {
        let mut rest = Vec::new();
        let ended = tokio::time::timeout(Duration::from_secs(10), s.read_to_end(&mut rest)).await;
        assert!(ended.is_ok(), "{what}: still open 10 s after the reload");
    }
    let s = alive(tls_kept, b"more".to_vec()).await;
    drop(s);
    let outcomes: Vec<String> = records(&d)
        .iter()
        .map(|r| r["outcome"].to_string())
        .collect();
    assert!(
        outcomes
            .iter()
            .filter(|o| o.contains("refused: denied_by_rule"))
            .count()
            >= 3,
        "{outcomes:?}"
    );
}
