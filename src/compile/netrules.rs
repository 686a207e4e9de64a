//! A network section's rules in source order, as [`Policy::network`]
//! shows them — kept packed (issue 62): a decision never reads them, so a
//! compiled set holds each as a few bytes (its effect and kind, its rule,
//! its target's bytes, its ports; rule ids as differences), DEFLATE-
//! compressed once the list is complete when it is long, and unpacks the
//! list the first time an exporter or embedder asks for it. Artifacts hold
//! the list itself.
//!
//! [`Policy::network`]: super::Policy::network

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::sync::OnceLock;

use serde::{Deserialize, Serialize};

use super::view::{NetworkRule, NetworkTarget, PortSpan};
use crate::decision::RuleId;

const ALLOW: u8 = 1;
const PORTS: u8 = 2;
// The kind, in the bits above.
const DOMAIN: u8 = 0 << 2;
const IP4: u8 = 1 << 2;
const IP6: u8 = 2 << 2;
const CIDR4: u8 = 3 << 2;
const CIDR6: u8 = 4 << 2;
const SOCKET: u8 = 5 << 2;
const ANY_SOCKET: u8 = 6 << 2;
const KIND: u8 = 7 << 2;

/// The rules, packed; the unpacked list made once, on demand.
#[derive(Clone, Debug, Default)]
pub(crate) struct NetRules {
    /// The packed rules; DEFLATE-compressed once the list is complete
    /// ([`NetRules::shrink`]) when `raw` is `Some(their length)`.
    packed: Vec<u8>,
    raw: Option<usize>,
    /// How many rules `packed` holds.
    count: usize,
    /// The id of the rule pushed last.
    last: u32,
    view: OnceLock<Vec<NetworkRule>>,
}

/// Lists packed into fewer bytes than this stay uncompressed (a
/// compressed list is inflated whenever it is read whole).
#[cfg(not(target_arch = "wasm32"))]
const COMPRESS_FROM: usize = 4096;

fn varint(out: &mut Vec<u8>, mut v: u64) {
    loop {
        let b = (v & 0x7f) as u8;
        v >>= 7;
        if v == 0 {
            out.push(b);
            return;
        }
        out.push(b | 0x80);
    }
}

/// Reads what [`NetRules::push`] wrote.
struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
    /// The rule id read last (ids are written as the difference).
    prev: u32,
}

/// A rule id as the difference from the one before, zigzagged: rules come
/// in source order, so nearly every id is one byte, and compresses away.
fn delta(prev: u32, id: u32) -> u64 {
    let d = i64::from(id) - i64::from(prev);
    ((d << 1) ^ (d >> 63)) as u64
}

fn undelta(prev: u32, z: u64) -> Option<u32> {
    let d = ((z >> 1) as i64) ^ -((z & 1) as i64);
    u32::try_from(i64::from(prev).checked_add(d)?).ok()
}

impl Reader<'_> {
    fn byte(&mut self) -> Option<u8> {
        let b = *self.bytes.get(self.at)?;
        self.at += 1;
        Some(b)
    }
    fn take<const N: usize>(&mut self) -> Option<[u8; N]> {
        let s = self.bytes.get(self.at..self.at + N)?;
        self.at += N;
        s.try_into().ok()
    }
    fn varint(&mut self) -> Option<u64> {
        let mut v = 0u64;
        for shift in (0..64).step_by(7) {
            let b = self.byte()?;
            v |= u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                return Some(v);
            }
        }
        None
    }
    fn text(&mut self) -> Option<String> {
        let n = usize::try_from(self.varint()?).ok()?;
        let s = self.bytes.get(self.at..self.at.checked_add(n)?)?;
        self.at += n;
        String::from_utf8(s.to_vec()).ok()
    }
    fn rule(&mut self) -> Option<NetworkRule> {
        let head = self.byte()?;
        let rule = RuleId(undelta(self.prev, self.varint()?)?);
        self.prev = rule.0;
        let target = match head & KIND {
            DOMAIN => NetworkTarget::Domain(self.text()?),
            IP4 => NetworkTarget::Ip(IpAddr::V4(Ipv4Addr::from(self.take::<4>()?))),
            IP6 => NetworkTarget::Ip(IpAddr::V6(Ipv6Addr::from(self.take::<16>()?))),
            CIDR4 => {
                let a = Ipv4Addr::from(self.take::<4>()?);
                let len = self.byte()?;
                NetworkTarget::Cidr(ipnet::IpNet::V4(ipnet::Ipv4Net::new(a, len).ok()?))
            }
            CIDR6 => {
                let a = Ipv6Addr::from(self.take::<16>()?);
                let len = self.byte()?;
                NetworkTarget::Cidr(ipnet::IpNet::V6(ipnet::Ipv6Net::new(a, len).ok()?))
            }
            SOCKET => NetworkTarget::Socket(self.text()?),
            ANY_SOCKET => NetworkTarget::AnySocket,
            _ => return None,
        };
        let ports = if head & PORTS != 0 {
            let n = usize::try_from(self.varint()?).ok()?;
            let mut v = Vec::with_capacity(n.min(1024));
            for _ in 0..n {
                let [a, b, c, d] = self.take::<4>()?;
                v.push(PortSpan {
                    lo: u16::from_le_bytes([a, b]),
                    hi: u16::from_le_bytes([c, d]),
                });
            }
            Some(v)
        } else {
            None
        };
        Some(NetworkRule {
            allow: head & ALLOW != 0,
            target,
            ports,
            rule,
        })
    }
}

impl NetRules {
    /// Adds a rule after the others.
    pub(crate) fn push(&mut self, r: &NetworkRule) {
        if self.raw.is_some() {
            // Never: rules are pushed before the list is compressed; a
            // list is rebuilt rather than grown after.
            let all = self.unpacked();
            *self = NetRules::default();
            for r in &all {
                self.push(r);
            }
        }
        self.count += 1;
        let out = &mut self.packed;
        let head_at = out.len();
        out.push(0);
        varint(out, delta(self.last, r.rule.0));
        self.last = r.rule.0;
        let kind = match &r.target {
            NetworkTarget::Domain(d) => {
                varint(out, d.len() as u64);
                out.extend_from_slice(d.as_bytes());
                DOMAIN
            }
            NetworkTarget::Ip(IpAddr::V4(a)) => {
                out.extend_from_slice(&a.octets());
                IP4
            }
            NetworkTarget::Ip(IpAddr::V6(a)) => {
                out.extend_from_slice(&a.octets());
                IP6
            }
            NetworkTarget::Cidr(ipnet::IpNet::V4(n)) => {
                out.extend_from_slice(&n.addr().octets());
                out.push(n.prefix_len());
                CIDR4
            }
            NetworkTarget::Cidr(ipnet::IpNet::V6(n)) => {
                out.extend_from_slice(&n.addr().octets());
                out.push(n.prefix_len());
                CIDR6
            }
            NetworkTarget::Socket(p) => {
                varint(out, p.len() as u64);
                out.extend_from_slice(p.as_bytes());
                SOCKET
            }
            NetworkTarget::AnySocket => ANY_SOCKET,
        };
        let mut head = kind | if r.allow { ALLOW } else { 0 };
        if let Some(ports) = &r.ports {
            head |= PORTS;
            varint(out, ports.len() as u64);
            for p in ports {
                out.extend_from_slice(&p.lo.to_le_bytes());
                out.extend_from_slice(&p.hi.to_le_bytes());
            }
        }
        if let Some(h) = out.get_mut(head_at) {
            *h = head;
        }
        self.view = OnceLock::new();
    }

    /// The list is complete: compressed when it is long (the domain names
    /// it holds are most of it; at 200 000 rules 16 bytes a rule become
    /// about 6), and its growth room given back.
    pub(crate) fn shrink(&mut self) {
        // Not in the browser build: the compressor is 12 KB of its size
        // budget, and the playground's policies are small.
        #[cfg(not(target_arch = "wasm32"))]
        if self.raw.is_none() && self.packed.len() >= COMPRESS_FROM {
            let raw = self.packed.len();
            self.packed = miniz_oxide::deflate::compress_to_vec(&self.packed, 1);
            self.raw = Some(raw);
        }
        self.packed.shrink_to_fit();
    }

    /// The packed bytes (the browser build never compresses them).
    #[cfg(target_arch = "wasm32")]
    fn bytes(&self) -> std::borrow::Cow<'_, [u8]> {
        // Never compressed here (`shrink`); a list that says it is reads
        // as none, which validation refuses (the count differs).
        match self.raw {
            None => std::borrow::Cow::Borrowed(&self.packed),
            Some(_) => std::borrow::Cow::Owned(Vec::new()),
        }
    }

    /// The packed bytes, inflated when they are compressed. They were
    /// compressed here, into exactly `raw` bytes: a failure (which would
    /// be a bug) gives no bytes, and every reader checks the count.
    #[cfg(not(target_arch = "wasm32"))]
    fn bytes(&self) -> std::borrow::Cow<'_, [u8]> {
        use miniz_oxide::inflate::core::{DecompressorOxide, decompress, inflate_flags};
        let Some(raw) = self.raw else {
            return std::borrow::Cow::Borrowed(&self.packed);
        };
        let mut out = vec![0u8; raw];
        let mut state = Box::<DecompressorOxide>::default();
        let (_, read, written) = decompress(
            &mut state,
            &self.packed,
            &mut out,
            0,
            inflate_flags::TINFL_FLAG_USING_NON_WRAPPING_OUTPUT_BUF,
        );
        if read != self.packed.len() || written != raw {
            out.clear();
        }
        std::borrow::Cow::Owned(out)
    }

    /// The rules, unpacked anew (the list is not kept).
    pub(crate) fn unpacked(&self) -> Vec<NetworkRule> {
        self.iter().collect()
    }

    /// The rules, unpacked one at a time.
    pub(crate) fn iter(&self) -> impl Iterator<Item = NetworkRule> + '_ {
        let bytes = self.bytes();
        let (mut at, mut prev) = (0, 0);
        // `rule` gives `None` only at the end: only `push` writes the bytes.
        std::iter::from_fn(move || {
            let mut r = Reader {
                bytes: &bytes,
                at,
                prev,
            };
            let rule = if at < bytes.len() { r.rule() } else { None };
            (at, prev) = (r.at, r.prev);
            rule
        })
    }

    /// How many rules the list holds.
    pub(crate) fn len(&self) -> usize {
        self.count
    }

    /// The rules, unpacked the first time they are asked for and kept.
    pub(crate) fn all(&self) -> &[NetworkRule] {
        self.view.get_or_init(|| self.unpacked())
    }
}

/// Written one rule at a time (never the whole list unpacked).
impl Serialize for NetRules {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeSeq;
        let mut seq = s.serialize_seq(Some(self.count))?;
        let mut written = 0;
        for r in self.iter() {
            seq.serialize_element(&r)?;
            written += 1;
        }
        if written != self.count {
            return Err(serde::ser::Error::custom(
                "the packed network rules do not read back",
            ));
        }
        seq.end()
    }
}

/// Each rule packed as it is read: the list is never held unpacked (at
/// 200 000 rules that was 16 MB more at a load's peak).
impl<'de> Deserialize<'de> for NetRules {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Packing;
        impl<'de> serde::de::Visitor<'de> for Packing {
            type Value = NetRules;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a list of network rules")
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(
                self,
                mut seq: A,
            ) -> Result<NetRules, A::Error> {
                let mut out = NetRules::default();
                while let Some(r) = seq.next_element::<NetworkRule>()? {
                    out.push(&r);
                }
                out.shrink();
                Ok(out)
            }
        }
        d.deserialize_seq(Packing)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_of_rule_unpacks_as_it_was_pushed() {
        let span = |lo, hi| PortSpan { lo, hi };
        let rules = vec![
            NetworkRule {
                allow: true,
                target: NetworkTarget::Domain("**.github.com".into()),
                ports: Some(vec![span(443, 443), span(8000, 8999)]),
                rule: RuleId(0),
            },
            NetworkRule {
                allow: false,
                target: NetworkTarget::Ip("10.1.2.3".parse().unwrap()),
                ports: None,
                rule: RuleId(300),
            },
            NetworkRule {
                allow: true,
                target: NetworkTarget::Ip("2001:db8::1".parse().unwrap()),
                ports: Some(vec![]),
                rule: RuleId(70_000),
            },
            NetworkRule {
                allow: false,
                target: NetworkTarget::Cidr("10.0.0.7/8".parse().unwrap()),
                ports: None,
                rule: RuleId(u32::MAX - 2),
            },
            NetworkRule {
                allow: true,
                target: NetworkTarget::Cidr("2600::/32".parse().unwrap()),
                ports: Some(vec![span(1, 65535)]),
                rule: RuleId(5),
            },
            NetworkRule {
                allow: true,
                target: NetworkTarget::Socket("/run/ünïcode.sock".into()),
                ports: None,
                rule: RuleId(6),
            },
            NetworkRule {
                allow: true,
                target: NetworkTarget::AnySocket,
                ports: None,
                rule: RuleId(7),
            },
        ];
        let mut packed = NetRules::default();
        for r in &rules {
            packed.push(r);
        }
        assert_eq!(packed.unpacked(), rules);
        assert_eq!(packed.all(), rules.as_slice());
        // The wire form is the list itself.
        let json = serde_json::to_string(&packed).unwrap();
        assert_eq!(json, serde_json::to_string(&rules).unwrap());
        let back: NetRules = serde_json::from_str(&json).unwrap();
        assert_eq!(back.unpacked(), rules);
    }

    #[test]
    fn a_long_list_is_compressed_and_reads_back_the_same() {
        let rules: Vec<NetworkRule> = (0..3_000u32)
            .map(|i| NetworkRule {
                allow: i % 3 != 0,
                target: if i % 2 == 0 {
                    NetworkTarget::Domain(format!("*.host{i}.example.com"))
                } else {
                    NetworkTarget::Cidr(format!("10.{}.{}.0/24", i % 256, i / 256).parse().unwrap())
                },
                ports: (i % 5 == 0).then(|| vec![PortSpan { lo: 443, hi: 443 }]),
                rule: RuleId(if i == 1_500 { 7 } else { i * 2 }),
            })
            .collect();
        let mut packed = NetRules::default();
        for r in &rules {
            packed.push(r);
        }
        let raw = packed.packed.len();
        packed.shrink();
        assert_eq!(packed.raw, Some(raw));
        assert!(
            packed.packed.len() * 2 < raw,
            "{} of {raw}",
            packed.packed.len()
        );
        assert_eq!(packed.len(), rules.len());
        assert_eq!(packed.iter().count(), rules.len());
        assert_eq!(packed.unpacked(), rules);
        assert_eq!(packed.all(), rules.as_slice());
        // Its wire form is still the list; a rule pushed after is kept.
        assert_eq!(
            serde_json::to_string(&packed).unwrap(),
            serde_json::to_string(&rules).unwrap()
        );
        let more = NetworkRule {
            allow: false,
            target: NetworkTarget::AnySocket,
            ports: None,
            rule: RuleId(1),
        };
        packed.push(&more);
        packed.shrink();
        let mut all = rules.clone();
        all.push(more);
        assert_eq!(packed.unpacked(), all);
        // A short list stays as it is.
        let mut short = NetRules::default();
        short.push(rules.first().unwrap());
        short.shrink();
        assert_eq!(short.raw, None);
    }
}
