//! gatehouse-wire's DNS reading on hostile bytes: never a panic; a query
//! is answered or refused with its own id and question; a CNAME chain
//! followed through any answer is finite, starts at the asked name, has
//! no repeated name, and keeps only records on it.
#![no_main]
use gatehouse_wire::dns;
use hickory_proto::op::{Message, ResponseCode};
use hickory_proto::rr::RecordType;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Some(q) = dns::query(data) {
        match dns::question(&q) {
            Ok(question) => match dns::answerable(question) {
                Ok(kind) => assert!(matches!(kind, RecordType::A | RecordType::AAAA)),
                Err(why) => assert!(!why.as_str().is_empty()),
            },
            Err(code) => assert!(matches!(code, ResponseCode::NotImp | ResponseCode::FormErr)),
        }
        assert!(dns::udp_room(&q) >= 512);
        let out = dns::refusal(&q, ResponseCode::Refused);
        if let Ok(r) = Message::from_vec(&out) {
            assert_eq!(r.metadata.id, q.metadata.id);
            assert_eq!(r.queries, q.queries);
            assert!(dns::query(&out).is_none(), "a refusal is no query");
        }
    }
    // Any message's answers, followed from its first question's name.
    if let Ok(m) = Message::from_vec(data)
        && let Some(asked) = m.queries.first()
    {
        for kind in [RecordType::A, RecordType::AAAA] {
            if let Some(chain) = dns::follow(asked.name(), kind, &m.answers) {
                assert!(!chain.names.is_empty() && chain.names.len() <= dns::MAX_CHAIN + 1);
                let mut seen = chain.names.clone();
                seen.sort();
                seen.dedup();
                assert_eq!(seen.len(), chain.names.len(), "a name twice: {:?}", chain.names);
                assert!(chain.records.len() >= chain.names.len() - 1);
                assert!(chain.records.len() == chain.names.len() - 1 + chain.addrs.len());
                for r in &chain.records {
                    assert!(chain.names.contains(&dns::key(&r.name.to_ascii())));
                    assert!(chain.ttl <= r.ttl);
                }
            }
        }
    }
});
