//! `upstream on`: the upstream proxy is used only when the policy says so, and gets the decided target.

use std::time::Duration;

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
    // `upstream on`: through the inner proxy, which decides too.
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
    // The record is written once the response is out.
    for _ in 0..50 {
        if records(&inner).iter().any(|r| r["outcome"] == "forwarded") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(
        records(&inner).iter().any(|r| r["outcome"] == "forwarded"),
        "{:?}",
        records(&inner)
    );
}

/// Issue 35, findings 1 and 4: an upstream proxy gets a target rebuilt from
/// what was decided — never the client's bytes, which another parser may
/// read as another host (`?@denied`, `#@denied`) — and an HTTP/1.0 request
/// without `Host` gets the decided one. A fragment is refused.
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
    assert_eq!(heads.len(), 2, "{heads:?}");
    assert!(
        heads[0].starts_with("GET http://allowed.test:18080/?@denied.test:18081/ HTTP/1.1\r\n"),
        "{heads:?}"
    );
    assert!(
        heads[1].starts_with(
            "GET http://allowed.test:18080/x HTTP/1.0\r\nHost: allowed.test:18080\r\n"
        ),
        "{heads:?}"
    );
}
