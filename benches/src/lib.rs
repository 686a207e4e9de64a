//! Realistic generated rule sets for the benchmarks: registrable domains
//! and their subdomains (exact, `*.` and `**.` patterns), and address
//! prefixes shaped like cloud provider ranges, deterministic for a seed.

#![deny(missing_docs)]
#![allow(clippy::indexing_slicing)]

/// A small deterministic generator (xorshift).
pub struct Rng(u64);

impl Rng {
    /// A generator seeded with `seed` (the same seed, the same stream).
    pub fn new(seed: u64) -> Self {
        Rng(seed.max(1))
    }
    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }
    /// A number in `0..n`.
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n.max(1)
    }
}

const TLDS: &[&str] = &[
    "com", "net", "org", "io", "dev", "co.uk", "de", "app", "cloud", "ai",
];
const SYLLABLES: &[&str] = &[
    "ka", "lo", "mi", "ne", "ra", "to", "vu", "zen", "pro", "tek", "net", "hub", "data", "cdn",
    "api",
];

/// A registrable-looking domain (`rakotek.io`).
pub fn domain(rng: &mut Rng) -> String {
    let n = 2 + rng.below(3) as usize;
    let label: String = (0..n)
        .map(|_| SYLLABLES[rng.below(SYLLABLES.len() as u64) as usize])
        .collect();
    format!(
        "{label}{}.{}",
        rng.below(1000),
        TLDS[rng.below(TLDS.len() as u64) as usize]
    )
}

/// The policy text of a network block with `n` domain rules (a mix of
/// exact, `*.` and `**.`, a tenth of them denies) and the registrable
/// domains used.
pub fn domain_policy(n: usize, seed: u64) -> (String, Vec<String>) {
    let mut rng = Rng::new(seed);
    let mut text = String::from("policy bench {\n  network {\n    default deny\n");
    let mut domains = Vec::with_capacity(n);
    for i in 0..n {
        let d = domain(&mut rng);
        let (effect, pattern) = match i % 10 {
            0 => ("deny", format!("**.{d}")),
            1..=4 => ("allow", d.clone()),
            5..=7 => ("allow", format!("*.{d}")),
            _ => ("allow", format!("**.{d}")),
        };
        text.push_str(&format!("    {effect} domain {pattern}\n"));
        domains.push(d);
    }
    text.push_str("  }\n}\n");
    (text, domains)
}

/// The policy text of `n` CIDR rules shaped like cloud ranges (IPv4 /16–/28,
/// IPv6 /32–/64, a tenth of them denies), with an address inside each.
pub fn cidr_policy(n: usize, seed: u64) -> (String, Vec<String>) {
    let mut rng = Rng::new(seed);
    let mut text = String::from("policy bench {\n  network {\n    default deny\n    local allow\n");
    let mut inside = Vec::with_capacity(n);
    for i in 0..n {
        let effect = if i % 10 == 0 { "deny" } else { "allow" };
        if i % 4 == 3 {
            let len = 32 + 8 * rng.below(5) as u32;
            let hi = 0x2600_0000_0000_0000u128 | (u128::from(rng.next_u64()) << 64);
            let net = std::net::Ipv6Addr::from(hi & (u128::MAX << (128 - len)));
            text.push_str(&format!("    {effect} cidr {net}/{len}\n"));
            inside.push(std::net::Ipv6Addr::from(u128::from(net) | 0x1234).to_string());
        } else {
            let len = 16 + rng.below(13) as u32;
            let x = (rng.next_u64() as u32) | 0x0100_0000;
            let net = std::net::Ipv4Addr::from(x & (u32::MAX << (32 - len)));
            text.push_str(&format!("    {effect} cidr {net}/{len}\n"));
            inside.push(std::net::Ipv4Addr::from(u32::from(net) | 1).to_string());
        }
    }
    text.push_str("  }\n}\n");
    (text, inside)
}

/// `n` domain rules and `n` CIDR rules in one network block (the pipeline
/// and memory benchmarks).
pub fn mixed_policy(n: usize) -> String {
    let (domains, _) = domain_policy(n, 7);
    let (cidrs, _) = cidr_policy(n, 11);
    let rules: String = cidrs
        .lines()
        .filter(|l| l.contains(" cidr "))
        .map(|l| format!("{l}\n"))
        .collect();
    domains.replacen(
        "    default deny\n",
        &format!("    default deny\n{rules}"),
        1,
    )
}

/// What a query of a realistic stream is meant to be (issue 19: every
/// category is timed on its own too).
#[derive(Clone, Copy, Debug, Eq, PartialEq, Hash)]
pub enum Category {
    /// A name an exact or `**.` rule names.
    ExactHit,
    /// A subdomain, one to three labels under a `*.` or `**.` rule.
    SubdomainHit,
    /// A name no rule matches, sharing a suffix with the rules (their
    /// public suffix, a sibling of a rule's name, a look-alike label).
    Miss,
    /// A name under a deny rule.
    Deny,
}

impl Category {
    /// Every category, in report order.
    pub const ALL: [Category; 4] = [
        Category::ExactHit,
        Category::SubdomainHit,
        Category::Miss,
        Category::Deny,
    ];
    /// The category's name in reports.
    pub fn as_str(self) -> &'static str {
        match self {
            Category::ExactHit => "exact_hit",
            Category::SubdomainHit => "subdomain_hit",
            Category::Miss => "miss",
            Category::Deny => "deny",
        }
    }
}

const SUBLABELS: &[&str] = &[
    "api",
    "www",
    "cdn",
    "static",
    "auth",
    "login",
    "objects",
    "eu-west-1",
    "us-east-2",
    "edge",
    "registry",
    "gw",
    "v2",
    "assets",
    "img",
    "media",
    "s3",
    "files",
    "ws",
    "pkg",
];

/// A stream of `n` distinct queries shaped like egress traffic to a policy
/// of [`domain_policy`] (`domains` as it returned them, rule `i` being
/// `domains[i]` with the pattern kind of `i % 10`): names of 2–6 labels and
/// 15–45 characters, multi-part public suffixes (`co.uk`), hits at several
/// depths, misses that share suffixes with rules; in equal parts by
/// [`Category`] where the rules have names enough (with ten rules there are
/// only a few exact names), shuffled.
pub fn name_stream(domains: &[String], n: usize, seed: u64) -> Vec<(Category, String)> {
    let mut rng = Rng::new(seed);
    let mut seen = std::collections::HashSet::new();
    let mut out = Vec::with_capacity(n);
    let sub = |rng: &mut Rng, depth: usize| -> String {
        (0..depth)
            .map(|_| {
                let l = SUBLABELS[rng.below(SUBLABELS.len() as u64) as usize];
                if rng.below(3) == 0 {
                    format!("{l}{}", rng.below(100))
                } else {
                    l.to_string()
                }
            })
            .collect::<Vec<_>>()
            .join(".")
    };
    // Rules by kind (the index's pattern kind in `domain_policy`).
    let idx = |rng: &mut Rng, ok: &dyn Fn(usize) -> bool| -> usize {
        loop {
            let i = rng.below(domains.len() as u64) as usize;
            if ok(i % 10) {
                return i;
            }
        }
    };
    let shaped = |q: &str| {
        let labels = q.split('.').count();
        (2..=6).contains(&labels) && (15..=45).contains(&q.len())
    };
    let mut tries = 0usize;
    while out.len() < n && tries < n * 200 {
        tries += 1;
        // In turn by try, not by query: with few rules there are only so
        // many exact names, and the other categories fill the stream.
        let cat = Category::ALL[tries % 4];
        let q = match cat {
            // Exact (kinds 1..=4) or the apex of `**.` (8, 9).
            Category::ExactHit => {
                domains[idx(&mut rng, &|k| (1..=4).contains(&k) || k >= 8)].clone()
            }
            // One to three labels under `*.` (5..=7) or `**.` (8, 9).
            Category::SubdomainHit => {
                let d = &domains[idx(&mut rng, &|k| k >= 5)];
                let depth = 1 + rng.below(3) as usize;
                format!("{}.{d}", sub(&mut rng, depth))
            }
            Category::Deny => {
                let d = &domains[idx(&mut rng, &|k| k == 0)];
                if rng.below(4) == 0 {
                    d.clone()
                } else {
                    let depth = 1 + rng.below(2) as usize;
                    format!("{}.{d}", sub(&mut rng, depth))
                }
            }
            Category::Miss => {
                let i = idx(&mut rng, &|k| k != 0);
                let d = &domains[i];
                let (label, suffix) = d.split_once('.').unwrap_or((d, "com"));
                match rng.below(3) {
                    // A sibling under the same public suffix.
                    0 => format!("{}.{label}x{}.{suffix}", sub(&mut rng, 1), rng.below(100)),
                    // A subdomain of an exact-only rule.
                    1 if (1..=4).contains(&(i % 10)) => format!("{}.{d}", sub(&mut rng, 1)),
                    // A look-alike ending in the rule's name.
                    _ => format!("{}-{label}.{suffix}", sub(&mut rng, 1).replace('.', "-")),
                }
            }
        };
        if shaped(&q) && seen.insert(q.clone()) {
            out.push((cat, q));
        }
    }
    // Shuffled, so that no category is timed in a run of its own kind.
    for i in (1..out.len()).rev() {
        let j = rng.below(i as u64 + 1) as usize;
        out.swap(i, j);
    }
    out
}

/// A stream of `n` distinct random IPv4 addresses for a policy of
/// [`cidr_policy`] (`text` as it returned it): about half inside its IPv4
/// prefixes (anywhere in them, not their first address), the rest
/// anywhere in public-looking space.
pub fn addr_stream(text: &str, n: usize, seed: u64) -> Vec<std::net::Ipv4Addr> {
    let prefixes: Vec<(u32, u32)> = text
        .lines()
        .filter_map(|l| {
            let (addr, len) = l.split_whitespace().nth(2)?.split_once('/')?;
            let a: std::net::Ipv4Addr = addr.parse().ok()?;
            let len: u32 = len.parse().ok()?;
            Some((u32::from(a), len))
        })
        .collect();
    let mut rng = Rng::new(seed);
    let mut seen = std::collections::HashSet::new();
    let mut out = Vec::with_capacity(n);
    while out.len() < n {
        let x = if out.len() % 2 == 0 && !prefixes.is_empty() {
            let (net, len) = prefixes[rng.below(prefixes.len() as u64) as usize];
            let host_bits = 32 - len;
            let mask = if host_bits == 32 {
                u32::MAX
            } else {
                (1u32 << host_bits) - 1
            };
            net | (rng.next_u64() as u32 & mask)
        } else {
            rng.next_u64() as u32 | 0x0100_0000
        };
        if seen.insert(x) {
            out.push(std::net::Ipv4Addr::from(x));
        }
    }
    out
}
