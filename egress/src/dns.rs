//! The filtering DNS resolver (UDP and TCP), the upstream client it and the
//! proxy share, and the table of vetted answers.
//!
//! A question is answered only when the policy allows the name (`dns`), and
//! only with addresses the policy accepts for it (`resolved`): a denied name
//! is never sent upstream, and an answer holding one unacceptable address is
//! refused whole. What was answered is recorded, and the proxy dials only
//! addresses that passed the same check — it never resolves again between
//! the check and the connection.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use gatehouse::query::Query;
use hickory_proto::op::{Message, MessageType, OpCode, ResponseCode};
use hickory_proto::rr::{Name, RData, Record, RecordType};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, UdpSocket};

use crate::policy::Policies;

const TIMEOUT: Duration = Duration::from_secs(3);

/// Answers that passed the `resolved` check, by name, until they expire.
#[derive(Default)]
pub struct Vetted {
    map: Mutex<HashMap<String, (Vec<IpAddr>, Instant)>>,
}

impl Vetted {
    fn key(name: &str) -> String {
        name.trim_end_matches('.').to_ascii_lowercase()
    }
    pub fn record(&self, name: &str, addrs: &[IpAddr], ttl: Duration) {
        if let Ok(mut m) = self.map.lock() {
            let until =
                Instant::now() + ttl.clamp(Duration::from_secs(1), Duration::from_secs(300));
            let entry = m
                .entry(Self::key(name))
                .or_insert_with(|| (Vec::new(), until));
            for a in addrs {
                if !entry.0.contains(a) {
                    entry.0.push(*a);
                }
            }
            entry.1 = entry.1.max(until);
        }
    }
    pub fn get(&self, name: &str) -> Option<Vec<IpAddr>> {
        let m = self.map.lock().ok()?;
        let (addrs, until) = m.get(&Self::key(name))?;
        (Instant::now() < *until).then(|| addrs.clone())
    }
}

/// The upstream DNS server and the vetted table.
pub struct Upstream {
    pub server: SocketAddr,
    pub vetted: Vetted,
}

impl Upstream {
    /// Asks the upstream server one question (UDP); the response as it came.
    pub async fn ask(&self, name: &Name, kind: RecordType) -> Result<Message, String> {
        let mut q = Message::new(rand_id(), MessageType::Query, OpCode::Query);
        q.metadata.recursion_desired = true;
        q.add_query(hickory_proto::op::Query::query(name.clone(), kind));
        let bytes = q.to_vec().map_err(|e| e.to_string())?;
        let bind: SocketAddr = if self.server.is_ipv4() {
            "0.0.0.0:0".parse().map_err(|_| "bind")?
        } else {
            "[::]:0".parse().map_err(|_| "bind")?
        };
        let sock = UdpSocket::bind(bind).await.map_err(|e| e.to_string())?;
        sock.connect(self.server).await.map_err(|e| e.to_string())?;
        sock.send(&bytes).await.map_err(|e| e.to_string())?;
        let mut buf = vec![0u8; 4096];
        loop {
            let n = tokio::time::timeout(TIMEOUT, sock.recv(&mut buf))
                .await
                .map_err(|_| "upstream DNS timed out".to_string())?
                .map_err(|e| e.to_string())?;
            let r =
                Message::from_vec(buf.get(..n).unwrap_or_default()).map_err(|e| e.to_string())?;
            if r.metadata.id == q.metadata.id {
                return Ok(r);
            }
        }
    }

    /// The A and AAAA addresses of `name`, with the smallest TTL seen.
    pub async fn lookup(&self, name: &str) -> Result<(Vec<IpAddr>, Duration), String> {
        let fq = Name::from_ascii(format!("{}.", name.trim_end_matches('.')))
            .map_err(|e| e.to_string())?;
        let mut addrs = Vec::new();
        let mut ttl = u32::MAX;
        for kind in [RecordType::A, RecordType::AAAA] {
            let r = self.ask(&fq, kind).await?;
            let (a, t) = addresses(&r.answers);
            addrs.extend(a);
            ttl = ttl.min(t);
        }
        Ok((addrs, Duration::from_secs(u64::from(ttl.min(300)))))
    }

    /// The addresses the proxy may dial for `host`: a literal is itself;
    /// a name takes the resolver's vetted answers, or is looked up now. The
    /// caller checks them with `resolved` before dialling.
    pub async fn addresses_for(&self, host: &str) -> Result<Vec<IpAddr>, String> {
        let bare = host.trim_start_matches('[').trim_end_matches(']');
        if let Ok(ip) = bare.parse::<IpAddr>() {
            // Dial what was decided: a mapped or compatible IPv6 literal
            // (`[::ffff:a.b.c.d]`, `[::a.b.c.d]`) is decided as its IPv4
            // address, so it is dialled as that address too.
            return Ok(vec![gatehouse::normalize::canonical_ip(ip)]);
        }
        // `localhost` and its subdomains are loopback without asking anyone
        // (RFC 6761 §6.3), as every stub resolver does; the policy still
        // needs its exact `allow ip` exceptions for them.
        let lower = host.trim_end_matches('.').to_ascii_lowercase();
        if lower == "localhost" || lower.ends_with(".localhost") {
            return Ok(vec![
                IpAddr::from([127, 0, 0, 1]),
                IpAddr::from(std::net::Ipv6Addr::LOCALHOST),
            ]);
        }
        if let Some(a) = self.vetted.get(host) {
            return Ok(a);
        }
        // Kept for the answers' TTL like any resolver's cache; the caller
        // checks every use of them with `resolved` under the policy then in
        // force, so a cached answer is never trusted without a check.
        let (addrs, ttl) = self.lookup(host).await?;
        if !addrs.is_empty() {
            self.vetted.record(host, &addrs, ttl);
        }
        Ok(addrs)
    }
}

fn addresses(records: &[Record]) -> (Vec<IpAddr>, u32) {
    let mut out = Vec::new();
    let mut ttl = u32::MAX;
    for r in records {
        match &r.data {
            RData::A(a) => out.push(IpAddr::V4(a.0)),
            RData::AAAA(a) => out.push(IpAddr::V6(a.0)),
            _ => continue,
        }
        ttl = ttl.min(r.ttl);
    }
    (out, ttl)
}

fn rand_id() -> u16 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(Instant::now().elapsed().as_nanos());
    h.finish() as u16
}

/// A response to `q` with its question and no answers.
fn reply_to(q: &Message, code: ResponseCode) -> Message {
    let mut r = Message::new(q.metadata.id, MessageType::Response, q.metadata.op_code);
    r.metadata.recursion_desired = q.metadata.recursion_desired;
    r.metadata.recursion_available = true;
    r.metadata.response_code = code;
    for query in &q.queries {
        r.add_query(query.clone());
    }
    r
}

fn refuse(q: &Message, code: ResponseCode) -> Vec<u8> {
    reply_to(q, code).to_vec().unwrap_or_default()
}

/// Answers one DNS message.
pub async fn answer(policies: &Policies, upstream: &Upstream, bytes: &[u8]) -> Option<Vec<u8>> {
    let q = Message::from_vec(bytes).ok()?;
    if q.metadata.message_type != MessageType::Query {
        return None;
    }
    let [question] = q.queries.as_slice() else {
        return Some(refuse(&q, ResponseCode::FormErr));
    };
    let kind = question.query_type();
    let name = question.name().to_ascii();
    let mut req = policies.request();
    let what = format!("dns {name} {kind}");
    // Only A and AAAA are answered, and only for allowed names.
    if !matches!(kind, RecordType::A | RecordType::AAAA) {
        req.finish(&what, "refused: only A and AAAA are answered");
        return Some(refuse(&q, ResponseCode::Refused));
    }
    let d = req.decide(&Query::Dns { name: name.clone() });
    if !d.is_allow() {
        req.finish(&what, &format!("refused: {}", d.reason.as_str()));
        return Some(refuse(&q, ResponseCode::Refused));
    }
    let Ok(r) = upstream.ask(question.name(), kind).await else {
        req.finish(&what, "servfail: upstream");
        return Some(refuse(&q, ResponseCode::ServFail));
    };
    let (addrs, ttl) = addresses(&r.answers);
    if !addrs.is_empty() {
        let text: Vec<String> = addrs.iter().map(IpAddr::to_string).collect();
        let d = req.decide(&Query::Resolved {
            host: name.clone(),
            addrs: text,
            port: None,
        });
        if !d.is_allow() {
            req.finish(&what, &format!("refused: {}", d.reason.as_str()));
            return Some(refuse(&q, ResponseCode::Refused));
        }
        upstream
            .vetted
            .record(&name, &addrs, Duration::from_secs(u64::from(ttl)));
    }
    let mut out = reply_to(&q, r.metadata.response_code);
    for rec in &r.answers {
        if matches!(
            rec.record_type(),
            RecordType::A | RecordType::AAAA | RecordType::CNAME
        ) {
            out.add_answer(rec.clone());
        }
    }
    req.finish(&what, &format!("answered {} addresses", addrs.len()));
    out.to_vec().ok()
}

/// Serves DNS on `sock` (UDP) and `tcp` until the runtime ends.
pub fn serve(policies: Arc<Policies>, upstream: Arc<Upstream>, sock: UdpSocket, tcp: TcpListener) {
    let sock = Arc::new(sock);
    let (p, u) = (policies.clone(), upstream.clone());
    tokio::spawn(async move {
        let mut buf = vec![0u8; 4096];
        loop {
            let Ok((n, from)) = sock.recv_from(&mut buf).await else {
                continue;
            };
            let bytes = buf.get(..n).unwrap_or_default().to_vec();
            let (p, u, sock) = (p.clone(), u.clone(), sock.clone());
            tokio::spawn(async move {
                if let Some(out) = answer(&p, &u, &bytes).await {
                    let _ = sock.send_to(&out, from).await;
                }
            });
        }
    });
    tokio::spawn(async move {
        loop {
            let Ok((mut s, _)) = tcp.accept().await else {
                continue;
            };
            let (p, u) = (policies.clone(), upstream.clone());
            tokio::spawn(async move {
                loop {
                    let Ok(len) = s.read_u16().await else { return };
                    let mut bytes = vec![0u8; usize::from(len)];
                    if s.read_exact(&mut bytes).await.is_err() {
                        return;
                    }
                    let Some(out) = answer(&p, &u, &bytes).await else {
                        return;
                    };
                    let Ok(len) = u16::try_from(out.len()) else {
                        return;
                    };
                    if s.write_u16(len).await.is_err() || s.write_all(&out).await.is_err() {
                        return;
                    }
                }
            });
        }
    });
}
