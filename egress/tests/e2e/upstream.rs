//! `upstream on`: the upstream proxy is used only when the policy says so,
//! and is asked for a tunnel to a vetted address, never a name or the
//! client's bytes.

use std::time::Duration;

use tokio::net::TcpStream;

use super::support::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upstream_proxy_is_used_only_when_the_policy_says_so() {
    let dir1 = tempdir("up-outer");
    let dir2 = tempdir("up-inner");
    let dns = fake_dns(&[("allowed.test", "127.0.0.1")]).await;
    let server = http_server().await;
    let inner = daemon(&dir2, POLICY, dns.addr, None).await;
    let url = format!("http://allowed.test:{}/", server.port());
    // `upstream off`: the proxy goes direct although one is configured.
    let off = daemon(&dir1, POLICY, dns.addr, Some(inner.http.to_string())).await;
    let (_, status, _, _) = curl(off.http, &[], &url).await;
    assert_eq!(status, "200");
    assert!(records(&inner).is_empty());
    // `upstream on`: through the inner proxy, which decides too: a tunnel
    // to the vetted address, the name inside it.
    let dir3 = tempdir("up-on");
    let on = daemon(
        &dir3,
        &POLICY.replace("upstream off", "upstream on"),
        dns.addr,
        Some(inner.http.to_string()),
    )
    .await;
    let (_, status, _, body) = curl(on.http, &[], &url).await;
    assert_eq!(status, "200", "{body}");
    let tunnel = format!("CONNECT 127.0.0.1:{}", server.port());
    let through = |r: &serde_json::Value| {
        r["outcome"] == "tunnel" && r["what"].as_str().is_some_and(|w| w.starts_with(&tunnel))
    };
    // The record is written once the tunnel is judged.
    for _ in 0..50 {
        if records(&inner).iter().any(through) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(records(&inner).iter().any(through), "{:?}", records(&inner));
}

/// Issue 35, findings 1, 2 and 4: an upstream proxy is asked for a tunnel
/// to the vetted address (an IP literal: it resolves nothing itself), and
/// the request inside carries a target rebuilt from what was decided —
/// never the client's bytes, which another parser may read as another
/// host (`?@denied`, `#@denied`); an HTTP/1.0 request without `Host` gets
/// the decided one. A fragment is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upstream_proxy_gets_the_decided_target_not_the_clients_bytes() {
    let dir = tempdir("up-rebuilt");
    let dns = fake_dns(&[("allowed.test", "127.0.0.1")]).await;
    let (upstream, heads) = recording_upstream().await;
    let d = daemon(
        &dir,
        &POLICY.replace("upstream off", "upstream on"),
        dns.addr,
        Some(upstream.to_string()),
    )
    .await;
    let status = raw_status(
        d.http,
        "GET http://allowed.test:18080?@denied.test:18081/ HTTP/1.1\r\nHost: allowed.test:18080\r\n\r\n",
    )
    .await;
    assert!(status.contains(" 200 "), "{status}");
    let status = raw_status(d.http, "GET http://allowed.test:18080/x HTTP/1.0\r\n\r\n").await;
    assert!(status.contains(" 200 "), "{status}");
    let status = raw_status(
        d.http,
        "GET http://allowed.test:18080#@denied.test:18081/ HTTP/1.1\r\nHost: allowed.test:18080\r\n\r\n",
    )
    .await;
    assert!(status.contains(" 400 "), "{status}");
    let heads = heads.lock().unwrap().clone();
    assert_eq!(heads.len(), 4, "{heads:?}");
    for i in [0, 2] {
        assert!(
            heads[i].starts_with("CONNECT 127.0.0.1:18080 HTTP/1.1\r\n"),
            "{heads:?}"
        );
    }
    assert!(
        heads[1].starts_with("GET /?@denied.test:18081/ HTTP/1.1\r\n")
            && heads[1].contains("Host: allowed.test:18080\r\n"),
        "{heads:?}"
    );
    assert!(
        heads[3].starts_with("GET /x HTTP/1.0\r\nHost: allowed.test:18080\r\n"),
        "{heads:?}"
    );
}

/// Issue 35, findings 1 and 2, against a real tinyproxy (Debian's) as the
/// upstream: tinyproxy reads a forwarded absolute target up to the first
/// `/` and strips `…@`, so the client's bytes once reached a denied host
/// through it; and it resolves names itself, so its resolver once chose the
/// address. Now it is asked only for a tunnel to the vetted address: the
/// allowed origin answers, the denied one is never connected to.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn through_a_real_tinyproxy_only_the_decided_address_is_reached() {
    use std::sync::atomic::{AtomicUsize, Ordering};
    let dir = tempdir("up-tinyproxy");
    let dns = fake_dns(&[("allowed.test", "127.0.0.1"), ("denied.test", "127.0.0.1")]).await;
    let origin = http_server().await;
    // The denied origin counts the connections it gets.
    let denied = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let denied_port = denied.local_addr().unwrap().port();
    let reached = std::sync::Arc::new(AtomicUsize::new(0));
    let count = reached.clone();
    tokio::spawn(async move {
        while let Ok(_c) = denied.accept().await {
            count.fetch_add(1, Ordering::Relaxed);
        }
    });
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let conf = dir.join("tinyproxy.conf");
    std::fs::write(
        &conf,
        format!("Port {port}\nListen 127.0.0.1\nTimeout 30\nLogLevel Critical\nAllow 127.0.0.1\n"),
    )
    .unwrap();
    let child = std::process::Command::new("tinyproxy")
        .arg("-d")
        .arg("-c")
        .arg(&conf)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("tinyproxy must be installed (apt-get install tinyproxy; .ci/run does)");
    struct Kill(std::process::Child);
    impl Drop for Kill {
        fn drop(&mut self) {
            let _ = self.0.kill();
        }
    }
    let _tinyproxy = Kill(child);
    let mut up = false;
    for _ in 0..100 {
        if TcpStream::connect(("127.0.0.1", port)).await.is_ok() {
            up = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(up, "tinyproxy did not start");
    let d = daemon(
        &dir,
        &POLICY.replace("upstream off", "upstream on"),
        dns.addr,
        Some(format!("127.0.0.1:{port}")),
    )
    .await;
    let o = origin.port();
    for target in [
        format!("http://allowed.test:{o}?@denied.test:{denied_port}/"),
        format!("http://allowed.test:{o}/?@denied.test:{denied_port}/"),
        format!("http://allowed.test:{o}/x@denied.test:{denied_port}"),
    ] {
        let status = raw_status(
            d.http,
            &format!(
                "GET {target} HTTP/1.1\r\nHost: allowed.test:{o}\r\nConnection: close\r\n\r\n"
            ),
        )
        .await;
        assert!(status.contains(" 200 "), "{target}: {status}");
    }
    let (_, status, _, body) = curl(d.http, &[], &format!("http://allowed.test:{o}/")).await;
    assert_eq!(status, "200", "{body}");
    assert!(body.contains("hello from the test server"), "{body}");
    // A denied name is refused before tinyproxy is asked.
    let status = raw_status(
        d.http,
        &format!("GET http://denied.test:{denied_port}/ HTTP/1.1\r\nHost: denied.test:{denied_port}\r\n\r\n"),
    )
    .await;
    assert!(status.contains(" 403 "), "{status}");
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(
        reached.load(Ordering::Relaxed),
        0,
        "the denied origin was reached"
    );
}
