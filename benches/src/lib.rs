//! Realistic generated rule sets for the benchmarks: registrable domains
//! and their subdomains (exact, `*.` and `**.` patterns), and address
//! prefixes shaped like cloud provider ranges, deterministic for a seed.

#![allow(clippy::indexing_slicing)]

/// A small deterministic generator (xorshift).
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Rng(seed.max(1))
    }
    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }
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
