//! gatehouse-wire's ClientHello reader on hostile bytes: never a panic; a
//! server name it reports is lower case, is the name a hello built for it
//! carries, and no prefix of a record is read as a different answer.
#![no_main]
use gatehouse_wire::tls::{Hello, build_client_hello, build_client_hello_with, client_hello};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let hello = client_hello(data);
    match &hello {
        Hello::Sni(name) | Hello::Ech(Some(name)) => {
            assert_eq!(*name, name.to_ascii_lowercase());
        }
        Hello::NotTls => assert_ne!(data.first(), Some(&0x16)),
        _ => {}
    }
    // A prefix of a record that is complete is never taken for a hello of
    // another name: it is the same answer or incomplete.
    if !matches!(hello, Hello::Incomplete | Hello::NotTls) {
        for cut in [data.len() / 2, data.len().saturating_sub(1)] {
            let part = client_hello(&data[..cut]);
            assert!(part == Hello::Incomplete || part == hello, "{part:?} vs {hello:?}");
        }
    }
    // A name taken from the bytes reads back from a hello built for it.
    if let Ok(text) = std::str::from_utf8(data)
        && !text.is_empty()
        && text.len() < 200
    {
        let lower = text.to_ascii_lowercase();
        assert_eq!(client_hello(&build_client_hello(Some(text))), Hello::Sni(lower.clone()));
        assert_eq!(
            client_hello(&build_client_hello_with(Some(text), true)),
            Hello::Ech(Some(lower))
        );
    }
});
