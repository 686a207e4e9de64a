//! DNS messages as a filtering resolver reads them (hickory-proto parses
//! the bytes): the questions it answers, the CNAME chain an answer leads
//! through, and the replies that refuse.

use hickory_proto::op::{Message, MessageType, OpCode, Query, ResponseCode};
use hickory_proto::rr::{DNSClass, Name, RData, Record, RecordType};
use std::net::IpAddr;

/// The longest CNAME chain followed.
pub const MAX_CHAIN: usize = 8;

/// A name as the resolver keys it: ASCII lowercase, no trailing dot.
pub fn key(name: &str) -> String {
    name.trim_end_matches('.').to_ascii_lowercase()
}

/// A DNS query message from `bytes`; `None` for bytes that are not one (a
/// response, or not a message): those are dropped unanswered.
pub fn query(bytes: &[u8]) -> Option<Message> {
    let q = Message::from_vec(bytes).ok()?;
    (q.metadata.message_type == MessageType::Query).then_some(q)
}

/// The one question of a standard query; else the response code that
/// refuses it: NOTIMP for NOTIFY, UPDATE and the other opcodes (RFC 1035
/// §4.1.1), FORMERR for no question or several.
pub fn question(q: &Message) -> Result<&Query, ResponseCode> {
    if q.metadata.op_code != OpCode::Query {
        return Err(ResponseCode::NotImp);
    }
    match q.queries.as_slice() {
        [one] => Ok(one),
        _ => Err(ResponseCode::FormErr),
    }
}

/// Why a well-formed question is not answered.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Unanswered {
    /// A class other than IN (a CHAOS or ANY question would otherwise be
    /// answered from an IN lookup, as if it had asked that).
    NotClassIn,
    /// A type other than A and AAAA.
    NotAddress,
}

impl Unanswered {
    /// As the access record says it.
    pub fn as_str(self) -> &'static str {
        match self {
            Unanswered::NotClassIn => "only class IN is answered",
            Unanswered::NotAddress => "only A and AAAA are answered",
        }
    }
}

/// Whether the resolver answers `question` at all (before the policy
/// decides its name): class IN, type A or AAAA.
pub fn answerable(question: &Query) -> Result<RecordType, Unanswered> {
    if question.query_class() != DNSClass::IN {
        return Err(Unanswered::NotClassIn);
    }
    match question.query_type() {
        kind @ (RecordType::A | RecordType::AAAA) => Ok(kind),
        _ => Err(Unanswered::NotAddress),
    }
}

/// A response to `q` with its question and no answers.
pub fn reply(q: &Message, code: ResponseCode) -> Message {
    let mut r = Message::new(q.metadata.id, MessageType::Response, q.metadata.op_code);
    r.metadata.recursion_desired = q.metadata.recursion_desired;
    r.metadata.recursion_available = true;
    r.metadata.response_code = code;
    for query in &q.queries {
        r.add_query(query.clone());
    }
    r
}

/// [`reply`] as bytes (empty if it cannot be written).
pub fn refusal(q: &Message, code: ResponseCode) -> Vec<u8> {
    reply(q, code).to_vec().unwrap_or_default()
}

/// The largest response `q`'s sender takes over UDP: 512 bytes, or its
/// EDNS payload size when larger (RFC 6891 §6.2.3).
pub fn udp_room(q: &Message) -> usize {
    q.edns
        .as_ref()
        .map_or(512, |e| usize::from(e.max_payload().max(512)))
}

/// Whether `name` is `localhost` or a name under it (any case, trailing
/// dot or not): a loopback name, which no resolver is asked about.
pub fn is_loopback_name(name: &str) -> bool {
    let lower = key(name);
    lower == "localhost" || lower.ends_with(".localhost")
}

/// An answer's CNAME chain from the asked name, and the records kept.
pub struct Chain {
    /// The asked name, then each CNAME target, as text without the dot.
    pub names: Vec<String>,
    /// The addresses of the asked type owned by the chain's last name, in
    /// DNS order.
    pub addrs: Vec<IpAddr>,
    /// The smallest TTL of the kept records.
    pub ttl: u32,
    /// The chain's CNAME records and those addresses' records; every other
    /// record of the answer is dropped.
    pub records: Vec<Record>,
}

/// Follows the CNAME chain from `qname` through `answers`, keeping only the
/// records on it. `None`: a loop, two CNAMEs for one name, or a chain
/// longer than [`MAX_CHAIN`].
pub fn follow(qname: &Name, kind: RecordType, answers: &[Record]) -> Option<Chain> {
    let mut current = qname.clone();
    let mut names = vec![text(qname)];
    let mut records = Vec::new();
    let mut ttl = u32::MAX;
    loop {
        let mut cnames = answers
            .iter()
            .filter(|r| r.record_type() == RecordType::CNAME && r.name == current);
        let Some(c) = cnames.next() else { break };
        if cnames.next().is_some() {
            return None;
        }
        let RData::CNAME(target) = &c.data else {
            return None;
        };
        let next = target.0.clone();
        let t = text(&next);
        if names.contains(&t) || names.len() > MAX_CHAIN {
            return None;
        }
        names.push(t);
        records.push(c.clone());
        ttl = ttl.min(c.ttl);
        current = next;
    }
    let mut addrs = Vec::new();
    for r in answers.iter().filter(|r| r.name == current) {
        let ip = match (&r.data, kind) {
            (RData::A(a), RecordType::A) => IpAddr::V4(a.0),
            (RData::AAAA(a), RecordType::AAAA) => IpAddr::V6(a.0),
            _ => continue,
        };
        addrs.push(ip);
        records.push(r.clone());
        ttl = ttl.min(r.ttl);
    }
    Some(Chain {
        names,
        addrs,
        ttl,
        records,
    })
}

/// A name as text: ASCII, lowercase, no trailing dot.
fn text(n: &Name) -> String {
    n.to_ascii().trim_end_matches('.').to_ascii_lowercase()
}

#[cfg(test)]
#[allow(clippy::expect_used)]
mod tests {
    use super::*;
    use hickory_proto::rr::rdata::{A, CNAME};

    fn name(s: &str) -> Name {
        Name::from_ascii(s).expect("a name")
    }

    fn a(owner: &str, ip: [u8; 4]) -> Record {
        Record::from_rdata(
            name(owner),
            60,
            RData::A(A::from(std::net::Ipv4Addr::from(ip))),
        )
    }

    fn cname(owner: &str, target: &str) -> Record {
        Record::from_rdata(name(owner), 30, RData::CNAME(CNAME(name(target))))
    }

    #[test]
    fn chains_are_followed_and_foreign_records_dropped() {
        let answers = [
            cname("www.allowed.test.", "edge.cdn.test."),
            a("denied.test.", [10, 0, 0, 1]),
            a("EDGE.cdn.test.", [192, 0, 2, 1]),
            a("www.allowed.test.", [10, 0, 0, 2]),
        ];
        let c = follow(&name("WWW.allowed.test."), RecordType::A, &answers).expect("a chain");
        assert_eq!(c.names, ["www.allowed.test", "edge.cdn.test"]);
        assert_eq!(c.addrs, [IpAddr::from([192, 0, 2, 1])]);
        assert_eq!(c.ttl, 30);
        assert_eq!(c.records.len(), 2);
        let c = follow(
            &name("x.test."),
            RecordType::A,
            &[a("y.test.", [10, 0, 0, 1])],
        )
        .expect("no chain");
        assert!(c.addrs.is_empty() && c.records.is_empty());
        let looped = [cname("a.test.", "b.test."), cname("b.test.", "a.test.")];
        assert!(follow(&name("a.test."), RecordType::A, &looped).is_none());
        let forked = [cname("a.test.", "b.test."), cname("a.test.", "c.test.")];
        assert!(follow(&name("a.test."), RecordType::A, &forked).is_none());
        let long: Vec<Record> = (0..20)
            .map(|i| cname(&format!("n{i}.test."), &format!("n{}.test.", i + 1)))
            .collect();
        assert!(follow(&name("n0.test."), RecordType::A, &long).is_none());
    }

    #[test]
    fn questions_the_resolver_answers() {
        let ask = |class: DNSClass, kind: RecordType| {
            let mut q = Message::query();
            let mut one = Query::query(name("a.test."), kind);
            one.set_query_class(class);
            q.add_query(one);
            q.to_vec().expect("writes")
        };
        let q = query(&ask(DNSClass::IN, RecordType::AAAA)).expect("a query");
        assert_eq!(answerable(question(&q).expect("one")), Ok(RecordType::AAAA));
        let q = query(&ask(DNSClass::CH, RecordType::A)).expect("a query");
        assert_eq!(
            answerable(question(&q).expect("one")),
            Err(Unanswered::NotClassIn)
        );
        let q = query(&ask(DNSClass::IN, RecordType::TXT)).expect("a query");
        assert_eq!(
            answerable(question(&q).expect("one")),
            Err(Unanswered::NotAddress)
        );
        assert!(
            query(&refusal(&q, ResponseCode::Refused)).is_none(),
            "a response"
        );
        assert!(query(b"\x00").is_none());
        assert_eq!(
            question(&Message::query()).err(),
            Some(ResponseCode::FormErr)
        );
        assert_eq!(udp_room(&q), 512);
        assert!(is_loopback_name("A.LocalHost.") && !is_loopback_name("localhost.test"));
    }
}
