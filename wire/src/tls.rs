//! The server name of a TLS ClientHello, read from the first record of a
//! CONNECT tunnel without terminating TLS.

/// What the first bytes of a tunnel are.
#[derive(Debug, PartialEq, Eq)]
pub enum Hello {
    /// A ClientHello with this server name (lower-cased).
    Sni(String),
    /// A ClientHello without a server name extension.
    NoSni,
    /// A ClientHello carrying Encrypted Client Hello, with its outer
    /// server name (lower-cased) when it has one. The outer name is a
    /// cover name, not the name the client will reach: a `CONNECT` tunnel
    /// to a name refuses it; host mode decides by it (docs/host.md).
    Ech(Option<String>),
    /// Not a (complete, well-formed) ClientHello in the bytes given.
    Incomplete,
    /// Not TLS at all.
    NotTls,
}

fn u16_at(b: &[u8], i: usize) -> Option<usize> {
    Some(usize::from(*b.get(i)?) << 8 | usize::from(*b.get(i + 1)?))
}

/// Parses the ClientHello in `b` (the start of the stream). Only the first
/// record is read: a ClientHello split over several records is `Incomplete`
/// (refused by the caller: browsers and curl never do that for SNI).
pub fn client_hello(b: &[u8]) -> Hello {
    match b.first() {
        None => return Hello::Incomplete,
        Some(0x16) => {}
        Some(_) => return Hello::NotTls,
    }
    parse(b).unwrap_or(Hello::Incomplete)
}

fn parse(b: &[u8]) -> Option<Hello> {
    let record_len = u16_at(b, 3)?;
    let rec = b.get(5..5 + record_len)?;
    // Handshake header: type 1 (ClientHello), 3-byte length.
    if *rec.first()? != 1 {
        return None;
    }
    let mut i = 4;
    i += 2 + 32; // version, random
    let sid = usize::from(*rec.get(i)?);
    i += 1 + sid;
    let suites = u16_at(rec, i)?;
    i += 2 + suites;
    let comp = usize::from(*rec.get(i)?);
    i += 1 + comp;
    if i == rec.len() {
        return Some(Hello::NoSni);
    }
    let ext_total = u16_at(rec, i)?;
    i += 2;
    let end = i + ext_total;
    let mut sni = None;
    let mut ech = false;
    while i + 4 <= end {
        let kind = u16_at(rec, i)?;
        let len = u16_at(rec, i + 2)?;
        let body = rec.get(i + 4..i + 4 + len)?;
        // encrypted_client_hello (RFC 9849; draft-ietf-tls-esni 0xfe0d).
        ech |= kind == ECH_EXTENSION;
        if kind == 0 {
            // server_name_list: a list length, then (type, length, name).
            let mut j = 2;
            while j + 3 <= body.len() {
                let t = *body.get(j)?;
                let l = u16_at(body, j + 1)?;
                let name = body.get(j + 3..j + 3 + l)?;
                if t == 0 {
                    if sni.is_some() {
                        return None; // two host names: refuse
                    }
                    let name = std::str::from_utf8(name).ok()?;
                    sni = Some(name.to_ascii_lowercase());
                }
                j += 3 + l;
            }
        }
        i += 4 + len;
    }
    Some(match sni {
        outer if ech => Hello::Ech(outer),
        Some(s) => Hello::Sni(s),
        None => Hello::NoSni,
    })
}

/// The extension type of Encrypted Client Hello.
const ECH_EXTENSION: usize = 0xfe0d;

/// A minimal ClientHello record naming `sni` (none: no server name
/// extension), for tests and probes of the proxy.
pub fn build_client_hello(sni: Option<&str>) -> Vec<u8> {
    build_client_hello_with(sni, false)
}

/// [`build_client_hello`], with an (empty) Encrypted Client Hello extension
/// when `ech`.
pub fn build_client_hello_with(sni: Option<&str>, ech: bool) -> Vec<u8> {
    let len16 = |n: usize| u16::try_from(n).unwrap_or(u16::MAX).to_be_bytes();
    let mut ext = Vec::new();
    if ech {
        ext.extend([0xfe, 0x0d, 0, 0]);
    }
    if let Some(s) = sni {
        let n = s.as_bytes();
        let mut list = vec![0u8];
        list.extend(len16(n.len()));
        list.extend(n);
        let mut body = len16(list.len()).to_vec();
        body.extend(list);
        ext.extend([0, 0]);
        ext.extend(len16(body.len()));
        ext.extend(body);
    }
    let mut ch = vec![3, 3];
    ch.extend([7u8; 32]); // random
    ch.push(0); // session id
    ch.extend([0, 2, 0x13, 0x01]); // one suite
    ch.extend([1, 0]); // null compression
    ch.extend(len16(ext.len()));
    ch.extend(ext);
    let mut hs = vec![1, 0];
    hs.extend(len16(ch.len()));
    hs.extend(ch);
    let mut rec = vec![0x16, 3, 1];
    rec.extend(len16(hs.len()));
    rec.extend(hs);
    rec
}

#[cfg(test)]
#[allow(clippy::indexing_slicing)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_server_name() {
        assert_eq!(
            client_hello(&build_client_hello(Some("API.example.com"))),
            Hello::Sni("api.example.com".into())
        );
        assert_eq!(client_hello(&build_client_hello(None)), Hello::NoSni);
        assert_eq!(
            client_hello(&build_client_hello_with(Some("cover.example"), true)),
            Hello::Ech(Some("cover.example".into()))
        );
        assert_eq!(
            client_hello(&build_client_hello_with(None, true)),
            Hello::Ech(None)
        );
        assert_eq!(client_hello(b"GET / HTTP/1.1\r\n"), Hello::NotTls);
        let h = build_client_hello(Some("a.example"));
        for cut in 0..h.len() {
            assert_ne!(
                client_hello(&h[..cut]),
                Hello::Sni("a.example".into()),
                "{cut}"
            );
        }
    }
}
