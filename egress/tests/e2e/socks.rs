//! SOCKS5: CONNECT on and off, the UDP relay and its replies.

use std::net::SocketAddr;
use std::time::Duration;

use gatehouse_egress::Running;
use tokio::net::UdpSocket;

use super::support::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn socks5_on_and_off() {
    let dir = tempdir("socks");
    let dns = fake_dns(&[("allowed.test", "127.0.0.1")]).await;
    let server = http_server().await;
    let on = daemon(&dir, POLICY, dns.addr, None).await;
    let url = format!("http://allowed.test:{}/", server.port());
    let socks = |d: &Running| {
        vec![
            "-s".to_string(),
            "--max-time".into(),
            "10".into(),
            "--socks5-hostname".into(),
            d.socks.unwrap().to_string(),
            url.clone(),
        ]
    };
    let (code, body) = run("curl", socks(&on)).await;
    assert_eq!(code, 0);
    assert!(body.contains("hello from the test server"));
    let (code, _) = run(
        "curl",
        vec![
            "-s".into(),
            "--max-time".into(),
            "10".into(),
            "--socks5-hostname".into(),
            on.socks.unwrap().to_string(),
            format!("http://denied.test:{}/", server.port()),
        ],
    )
    .await;
    assert_ne!(code, 0);

    let dir2 = tempdir("socks-off");
    let off = daemon(
        &dir2,
        &POLICY.replace("socks5 on", "socks5 off"),
        dns.addr,
        None,
    )
    .await;
    let (code, _) = run("curl", socks(&off)).await;
    assert_ne!(code, 0, "socks5 off must refuse");
    assert!(
        records(&off)
            .iter()
            .any(|r| r["outcome"] == "refused: protocol_disabled"),
        "{:?}",
        records(&off)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn socks5_udp_relays_only_allowed_datagrams() {
    let dir = tempdir("udp");
    let dns = fake_dns(&[("allowed.test", "127.0.0.1")]).await;
    let (echo_port, _) = udp_echo().await;
    let d = daemon(&dir, POLICY, dns.addr, None).await;
    let (_control, relay) = udp_associate(d.socks.unwrap()).await;
    let client = UdpSocket::bind("127.0.0.1:0").await.unwrap();
    let datagram = |host: &str, payload: &[u8]| {
        let mut d = vec![0, 0, 0, 3, host.len() as u8];
        d.extend(host.as_bytes());
        d.extend(echo_port.to_be_bytes());
        d.extend(payload);
        d
    };
    client
        .send_to(&datagram("denied.test", b"nope"), relay)
        .await
        .unwrap();
    client
        .send_to(&datagram("allowed.test", b"ping"), relay)
        .await
        .unwrap();
    let mut buf = [0u8; 512];
    let (n, _) = tokio::time::timeout(Duration::from_secs(5), client.recv_from(&mut buf))
        .await
        .unwrap()
        .unwrap();
    assert!(
        buf[..n].ends_with(b"ping"),
        "only the allowed datagram comes back"
    );
    let got = tokio::time::timeout(Duration::from_millis(300), client.recv_from(&mut buf)).await;
    assert!(got.is_err(), "the denied datagram was not relayed");
    assert!(records(&d).iter().any(|r| {
        r["what"]
            .as_str()
            .is_some_and(|w| w.contains("denied.test"))
            && r["outcome"]
                .as_str()
                .is_some_and(|o| o.starts_with("dropped"))
    }));
}

/// The SOCKS UDP relay (issue 13, item 9): it listens only on the
/// listener's address, and relays back only replies of peers the client
/// sent to and the policy allowed — not datagrams any local socket sends
/// to either of its ports.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_socks_udp_relay_admits_only_replies_of_allowed_peers() {
    let dir = tempdir("udp-peers");
    let dns = fake_dns(&[("allowed.test", "127.0.0.1")]).await;
    // An echo target that reports where datagrams come from.
    let (echo_port, mut seen_rx) = udp_echo().await;
    let d = daemon(&dir, POLICY, dns.addr, None).await;
    let (_control, relay) = udp_associate(d.socks.unwrap()).await;
    let client = UdpSocket::bind("127.0.0.1:0").await.unwrap();
    let mut ping = vec![0, 0, 0, 3, 12];
    ping.extend(b"allowed.test");
    ping.extend(echo_port.to_be_bytes());
    ping.extend(b"ping");
    let mut buf = [0u8; 512];
    /// Nothing arrives within 400 ms.
    async fn quiet(c: &UdpSocket, buf: &mut [u8; 512]) -> bool {
        tokio::time::timeout(Duration::from_millis(400), c.recv_from(buf))
            .await
            .is_err()
    }

    // The allowed exchange works, and shows the relay's outbound address.
    client.send_to(&ping, relay).await.unwrap();
    let (n, _) = tokio::time::timeout(Duration::from_secs(5), client.recv_from(&mut buf))
        .await
        .unwrap()
        .unwrap();
    assert!(buf[..n].ends_with(b"ping"));
    let outbound = seen_rx.recv().await.unwrap();

    // Another local socket writes to the client's side of the relay, and
    // to its outbound side: nothing reaches the client.
    let intruder = UdpSocket::bind("127.0.0.1:0").await.unwrap();
    intruder
        .send_to(b"\0\0\0\x01\x7f\0\0\x01\0\x35forged", relay)
        .await
        .unwrap();
    assert!(
        quiet(&client, &mut buf).await,
        "a datagram from another socket reached the client"
    );
    intruder.send_to(b"forged reply", outbound).await.unwrap();
    assert!(
        quiet(&client, &mut buf).await,
        "a reply from a peer never sent to reached the client"
    );

    // The client's side listens on the listener's address only: the same
    // port on another loopback address relays nothing.
    let elsewhere = SocketAddr::from(([127, 0, 0, 2], relay.port()));
    client.send_to(&ping, elsewhere).await.unwrap();
    assert!(
        quiet(&client, &mut buf).await,
        "the relay answered on 127.0.0.2"
    );
    assert!(
        seen_rx.try_recv().is_err(),
        "the relay sent a datagram for 127.0.0.2"
    );
}
