//! Loopback stand-ins for the tests and the load example: an upstream DNS
//! server answering from a table and recording every question, and an HTTP
//! server answering `200` to everything. Not part of the daemon.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex};

use hickory_proto::op::{Message, MessageType, OpCode, ResponseCode};
use hickory_proto::rr::{Name, RData, Record, RecordType, rdata};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, UdpSocket};

/// A fake upstream DNS server on 127.0.0.1.
pub struct FakeDns {
    pub addr: SocketAddr,
    /// Every question's name, in order (`allowed.test.`).
    pub asked: Arc<Mutex<Vec<String>>>,
}

/// What a scripted upstream answers to a question (the name in lowercase
/// with its dot, and the type): a response code and records, or `None` to
/// stay silent.
pub type Answerer =
    Arc<dyn Fn(&str, RecordType) -> Option<(ResponseCode, Vec<Record>)> + Send + Sync>;

/// An A or AAAA record.
pub fn addr_record(owner: &str, ip: IpAddr, ttl: u32) -> Option<Record> {
    let name = Name::from_ascii(owner).ok()?;
    let data = match ip {
        IpAddr::V4(a) => RData::A(rdata::A(a)),
        IpAddr::V6(a) => RData::AAAA(rdata::AAAA(a)),
    };
    Some(Record::from_rdata(name, ttl, data))
}

/// A CNAME record.
pub fn cname_record(owner: &str, target: &str, ttl: u32) -> Option<Record> {
    let name = Name::from_ascii(owner).ok()?;
    let target = Name::from_ascii(target).ok()?;
    Some(Record::from_rdata(
        name,
        ttl,
        RData::CNAME(rdata::CNAME(target)),
    ))
}

/// A fake upstream DNS server on 127.0.0.1 answering as `answer` says.
pub async fn fake_dns_fn(answer: Answerer) -> std::io::Result<FakeDns> {
    fake_dns_at(
        "127.0.0.1:0".parse().map_err(std::io::Error::other)?,
        answer,
    )
    .await
}

/// A fake upstream DNS server on `bind` answering as `answer` says.
pub async fn fake_dns_at(bind: SocketAddr, answer: Answerer) -> std::io::Result<FakeDns> {
    let sock = UdpSocket::bind(bind).await?;
    let addr = sock.local_addr()?;
    let asked = Arc::new(Mutex::new(Vec::new()));
    let log = asked.clone();
    tokio::spawn(async move {
        let mut buf = vec![0u8; 4096];
        while let Ok((n, from)) = sock.recv_from(&mut buf).await {
            let Some(q) = buf.get(..n).and_then(|b| Message::from_vec(b).ok()) else {
                continue;
            };
            let Some(question) = q.queries.first().cloned() else {
                continue;
            };
            let name = question.name().to_ascii();
            if let Ok(mut l) = log.lock() {
                l.push(name.clone());
            }
            let Some((code, records)) = answer(&name.to_ascii_lowercase(), question.query_type())
            else {
                continue;
            };
            let mut r = Message::new(q.metadata.id, MessageType::Response, OpCode::Query);
            r.add_query(question.clone());
            r.metadata.response_code = code;
            for rec in records {
                r.add_answer(rec);
            }
            if let Ok(bytes) = r.to_vec() {
                let _ = sock.send_to(&bytes, from).await;
            }
        }
    });
    Ok(FakeDns { addr, asked })
}

/// Answers A/AAAA for the table's names (`("allowed.test", "127.0.0.1")`),
/// NXDOMAIN for any other.
pub async fn fake_dns(table: &[(&str, &str)]) -> std::io::Result<FakeDns> {
    let table: HashMap<String, IpAddr> = table
        .iter()
        .filter_map(|(n, a)| Some((format!("{n}."), a.parse().ok()?)))
        .collect();
    fake_dns_fn(Arc::new(move |name, kind| match table.get(name) {
        Some(ip) => {
            let fits = matches!(
                (ip, kind),
                (IpAddr::V4(_), RecordType::A) | (IpAddr::V6(_), RecordType::AAAA)
            );
            let records = if fits {
                addr_record(name, *ip, 60).into_iter().collect()
            } else {
                Vec::new()
            };
            Some((ResponseCode::NoError, records))
        }
        None => Some((ResponseCode::NXDomain, Vec::new())),
    }))
    .await
}

/// An HTTP/1.1 server on 127.0.0.1 answering `200` with `body` to every
/// request, keeping the connection unless the request says `close`.
pub async fn http_server(body: &'static str) -> std::io::Result<SocketAddr> {
    let bind = SocketAddr::from(([127, 0, 0, 1], 0));
    http_server_with(bind, Arc::new(move |_| body.to_string()), None).await
}

/// The body an HTTP stand-in answers to a request head.
pub type Body = Arc<dyn Fn(&str) -> String + Send + Sync>;

/// An HTTP/1.1 server on `bind` answering `200` with `body(head)` to every
/// request, keeping the connection unless the request says `close`, and
/// counting the connections it accepts in `accepted`.
pub async fn http_server_with(
    bind: SocketAddr,
    body: Body,
    accepted: Option<Arc<std::sync::atomic::AtomicUsize>>,
) -> std::io::Result<SocketAddr> {
    let l = TcpListener::bind(bind).await?;
    let addr = l.local_addr()?;
    tokio::spawn(async move {
        while let Ok((mut s, _)) = l.accept().await {
            if let Some(a) = &accepted {
                a.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            }
            let body = body.clone();
            tokio::spawn(async move {
                let mut buf = Vec::new();
                let mut chunk = [0u8; 2048];
                loop {
                    while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
                        match s.read(&mut chunk).await {
                            Ok(0) | Err(_) => return,
                            Ok(n) => buf.extend_from_slice(chunk.get(..n).unwrap_or_default()),
                        }
                    }
                    let head = String::from_utf8_lossy(&buf).into_owned();
                    let close = head.to_ascii_lowercase().contains("connection: close");
                    buf.clear();
                    let body = body(&head);
                    let resp = format!(
                        "HTTP/1.1 200 OK\r\nContent-Length: {}\r\n{}\r\n{body}",
                        body.len(),
                        if close { "Connection: close\r\n" } else { "" }
                    );
                    if s.write_all(resp.as_bytes()).await.is_err() || close {
                        return;
                    }
                }
            });
        }
    });
    Ok(addr)
}

/// `Policies` from policy text, written to a file of its own under the
/// temporary directory (`tag` keeps tests apart); `None` when it does not
/// load.
pub fn policies(tag: &str, text: &str) -> Option<crate::policy::Policies> {
    // A folder of its own for every call: tests running side by side with
    // the same tag (and the same text) must not read each other's file
    // while it is being written.
    static CALLS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let call = CALLS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let dir = std::env::temp_dir().join(format!("gatehouse-{tag}-{}-{call}", std::process::id()));
    std::fs::create_dir_all(&dir).ok()?;
    let path = dir.join("p.policy");
    std::fs::write(&path, text).ok()?;
    crate::policy::Policies::open(
        crate::policy::PolicyOptions::new(path),
        Arc::new(crate::metrics::Metrics::default()),
    )
    .ok()
}
