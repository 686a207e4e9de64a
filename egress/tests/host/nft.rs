//! Host mode (issue 30) against the real kernel: the nftables table the
//! daemon owns, applied with nft in a network namespace this test creates
//! (never the machine's own), read back, and replaced in one transaction.

use std::net::IpAddr;
use std::process::{Command, Stdio};

use gatehouse_egress::host::nft::{self, Ports, TABLE};

use super::Netns;

/// The contents for these sources and networks, with no kernel layer.
fn contents<'a>(sources: &[IpAddr], networks: &'a [ipnet::IpNet]) -> nft::Contents<'a> {
    nft::Contents {
        sources: sources.to_vec(),
        networks,
        layer: Vec::new(),
        interfaces: &[],
    }
}

/// A set's name and elements.
type SetRead = (String, Vec<String>);

/// The table as the kernel holds it: (chain, hook) pairs, each set's
/// elements, and the number of rules.
fn read_back(ns: &Netns) -> (Vec<(String, String)>, Vec<SetRead>, usize) {
    let listed: serde_json::Value =
        serde_json::from_str(&ns.nft(&["-j", "list", "table", "inet", TABLE], "")).unwrap();
    let (mut chains, mut sets, mut rules) = (Vec::new(), Vec::new(), 0);
    for o in listed["nftables"].as_array().unwrap() {
        if let Some(c) = o.get("chain") {
            chains.push((
                c["name"].as_str().unwrap().into(),
                c["hook"].as_str().unwrap_or("-").into(),
            ));
        } else if let Some(s) = o.get("set") {
            let elems = s
                .get("elem")
                .and_then(|e| e.as_array())
                .map(|a| a.iter().map(|e| e.as_str().unwrap().to_string()).collect())
                .unwrap_or_default();
            sets.push((s["name"].as_str().unwrap().into(), elems));
        } else if o.get("rule").is_some() {
            rules += 1;
        }
    }
    (chains, sets, rules)
}

#[test]
fn the_host_table_is_applied_read_back_and_replaced_whole() {
    let ns = Netns::new("nft");
    let ports = Ports {
        transparent: 15001,
        dns: 15053,
    };
    let first: Vec<IpAddr> = ["10.200.1.2", "10.200.2.2", "fd00:200:1::2"]
        .iter()
        .map(|a| a.parse().unwrap())
        .collect();
    ns.nft(
        &["-j", "-f", "-"],
        &nft::to_json(&nft::ruleset(&contents(&first, &[]), ports, true)).unwrap(),
    );
    let (chains, sets, rules) = read_back(&ns);
    assert_eq!(
        chains,
        [
            ("prerouting", "prerouting"),
            ("hold", "prerouting"),
            ("input", "input"),
            ("ifaces_in", "-"),
            ("forward", "forward"),
            ("layer", "-")
        ]
        .map(|(a, b)| (a.to_string(), b.to_string()))
    );
    assert_eq!(
        sets,
        [
            (
                "sandboxes_v4".to_string(),
                vec!["10.200.1.2".to_string(), "10.200.2.2".into()]
            ),
            (
                "sandboxes_v6".to_string(),
                vec!["fd00:200:1::2".to_string()]
            ),
            ("pass_v4".to_string(), vec![]),
            ("pass_v6".to_string(), vec![]),
        ]
    );
    // Per family: DNS over UDP and TCP redirected, the kernel passes, every
    // other TCP redirected, two input accepts and a drop, the jump to the
    // kernel layer, an established kernel-passed flow, a forward pass (that
    // marks its flow) and a drop; IPv6 neighbour discovery; the jump to
    // the sandbox interfaces' input rules (none here); and the kernel
    // layer's two verdict-map lookups.
    assert_eq!(rules, 2 * 11 + 2 + 2);
    let text = ns.nft(&["list", "table", "inet", TABLE], "");
    for want in [
        "ip saddr @sandboxes_v4 udp dport 53 redirect to :15053",
        "ip saddr @sandboxes_v4 tcp dport 53 redirect to :15053",
        "ip saddr @sandboxes_v4 meta l4proto tcp redirect to :15001",
        "ip saddr @sandboxes_v4 ip saddr . ip daddr . tcp dport @pass_v4 accept",
        "type ipv4_addr . ipv4_addr . inet_service",
        "ip saddr @sandboxes_v4 tcp dport { 15001, 15053 } accept",
        "ip6 saddr @sandboxes_v6 meta l4proto ipv6-icmp accept",
        "ip saddr @sandboxes_v4 drop",
        "type nat hook prerouting priority dstnat; policy accept;",
        "ip saddr @sandboxes_v4 ct state established,related ct mark 0x67680001 accept",
        "ip saddr @sandboxes_v4 ip saddr . ip daddr . tcp dport @pass_v4 ct mark set 0x67680001 accept",
    ] {
        assert!(text.contains(want), "{want}\n{text}");
    }

    // Applied again with other sandboxes, the table is replaced whole in
    // one transaction: nothing of the first remains, nothing is doubled.
    let second: Vec<IpAddr> = vec!["10.200.3.2".parse().unwrap()];
    ns.nft(
        &["-j", "-f", "-"],
        &nft::to_json(&nft::ruleset(&contents(&second, &[]), ports, true)).unwrap(),
    );
    let (chains, sets, rules) = read_back(&ns);
    assert_eq!(chains.len(), 6);
    assert_eq!(
        sets,
        [
            ("sandboxes_v4".to_string(), vec!["10.200.3.2".to_string()]),
            ("sandboxes_v6".to_string(), vec![]),
            ("pass_v4".to_string(), vec![]),
            ("pass_v6".to_string(), vec![]),
        ]
    );
    assert_eq!(rules, 26);
    // A broken batch changes nothing: the transaction is refused whole.
    let mut broken: serde_json::Value = serde_json::from_str(
        &nft::to_json(&nft::ruleset(&contents(&first, &[]), ports, true)).unwrap(),
    )
    .unwrap();
    broken["nftables"]
        .as_array_mut()
        .unwrap()
        .push(serde_json::json!({"add": {"rule": {"family": "inet", "table": TABLE, "chain": "nowhere", "expr": [{"drop": null}]}}}));
    let status = Command::new("ip")
        .args(["netns", "exec", &ns.0, "nft", "-j", "-f", "-"])
        .stdin(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .and_then(|mut c| {
            use std::io::Write as _;
            c.stdin
                .take()
                .unwrap()
                .write_all(broken.to_string().as_bytes())?;
            c.wait()
        })
        .unwrap();
    assert!(!status.success());
    assert_eq!(read_back(&ns).1[0].1, vec!["10.200.3.2".to_string()]);
}

#[test]
fn networks_hold_every_source_in_them_and_outsiders_one_by_one() {
    let ns = Netns::new("nftnet");
    let ports = Ports {
        transparent: 15001,
        dns: 15053,
    };
    let sources: Vec<IpAddr> = ["10.200.1.2", "10.201.0.9", "10.200.7.7"]
        .iter()
        .map(|a| a.parse().unwrap())
        .collect();
    let networks = [
        "10.200.0.0/16".parse().unwrap(),
        "fd00:200::/48".parse().unwrap(),
    ];
    ns.nft(
        &["-j", "-f", "-"],
        &nft::to_json(&nft::ruleset(&contents(&sources, &networks), ports, true)).unwrap(),
    );
    let v4 = ns.nft(&["list", "set", "inet", TABLE, "sandboxes_v4"], "");
    assert!(
        v4.contains("10.200.0.0/16") && v4.contains("10.201.0.9"),
        "{v4}"
    );
    assert!(!v4.contains("10.200.1.2"), "{v4}");
    let v6 = ns.nft(&["list", "set", "inet", TABLE, "sandboxes_v6"], "");
    assert!(v6.contains("fd00:200::/48"), "{v6}");
}

/// One sandbox's layer of `policy`.
fn sandbox(id: &str, sources: &[IpAddr], policy: &str) -> nft::SandboxLayer {
    use gatehouse_egress::host::kernel::layer_for;
    let set = gatehouse::PolicySet::from_source("p.policy", policy).unwrap();
    nft::SandboxLayer {
        id: id.into(),
        sources: sources.to_vec(),
        layer: std::sync::Arc::new(layer_for(set.single().unwrap())),
    }
}

#[test]
fn the_kernel_layer_follows_the_policy_and_updates_keep_or_flush_passes() {
    use gatehouse_egress::host::layout::Installed;
    let ns = Netns::new("nftlayer");
    let ports = Ports {
        transparent: 15001,
        dns: 15053,
    };
    let policy = "policy p {\n  network {\n    allow domain ssh.test port 22\n    deny cidr 11.0.0.0/29 port 22, 2000-2010\n    allow ip 10.9.9.9\n  }\n}\n";
    let me: Vec<IpAddr> = vec!["10.200.1.2".parse().unwrap()];
    let other: Vec<IpAddr> = vec!["10.200.2.2".parse().unwrap(), "fd00::2".parse().unwrap()];
    let c = nft::Contents {
        sources: me.iter().chain(&other).copied().collect(),
        networks: &[],
        layer: vec![sandbox("me", &me, policy), sandbox("other", &other, policy)],
        interfaces: &[],
    };
    let mut installed = Installed::of(&c).unwrap();
    ns.nft(
        &["-j", "-f", "-"],
        &nft::to_json(&nft::ruleset(&c, ports, true)).unwrap(),
    );
    // Both sandboxes have the same layer: one chain, which each source
    // jumps to from the verdict maps.
    let chain = c.layer[0].layer.chain();
    assert_eq!(installed.chains(), 1);
    let text = ns.nft(&["list", "chain", "inet", TABLE, &chain], "");
    for want in [
        // The exact exception comes first, then the deny rule, then
        // non-public destinations (local deny), as one set a family.
        "ip daddr 10.9.9.9 meta l4proto tcp return",
        "ip daddr 11.0.0.0/29 tcp dport { 22, 2000-2010 } drop",
        "ip daddr { 0.0.0.0/8, 10.0.0.0/8,",
        "ip6 daddr { ::/3,",
    ] {
        assert!(text.contains(want), "{want}\n{text}");
    }
    let exception = text.find("10.9.9.9").unwrap();
    assert!(exception < text.find("10.0.0.0/8").unwrap());
    let maps = ns.nft(&["list", "chain", "inet", TABLE, "layer"], "");
    assert!(maps.contains("ip saddr vmap @layer_v4"), "{maps}");
    let v4 = ns.nft(&["list", "map", "inet", TABLE, "layer_v4"], "");
    assert!(
        v4.contains(&format!("10.200.1.2 : jump {chain}"))
            && v4.contains(&format!("10.200.2.2 : jump {chain}")),
        "{v4}"
    );
    // A pass, then a change that keeps it, then a revocation that deletes it.
    let pass = nft::Pass {
        source: me[0],
        addr: "11.0.0.3".parse().unwrap(),
        port: 22,
        ttl: 60,
    };
    ns.nft(
        &["-j", "-f", "-"],
        &nft::to_json(&nft::passes(&[pass])).unwrap(),
    );
    let listed = || ns.nft(&["list", "set", "inet", TABLE, "pass_v4"], "");
    assert!(listed().contains("11.0.0.3"));
    // One sandbox's policy changes: its new layer's chain is added, its
    // element points there, and nothing of the other sandbox is written.
    let off = sandbox("me", &me, "policy o {\n  network off\n}\n");
    let c = nft::Contents {
        sources: me.clone(),
        networks: &[],
        layer: vec![off.clone()],
        interfaces: &[],
    };
    let (rules, delta) = installed.change(&c, &[], ports).unwrap();
    let json = nft::to_json(&rules).unwrap();
    assert!(!json.contains("10.200.2.2"), "{json}");
    ns.nft(&["-j", "-f", "-"], &json);
    installed.commit(delta);
    assert_eq!(installed.chains(), 2);
    assert!(listed().contains("11.0.0.3"));
    let v4 = ns.nft(&["list", "map", "inet", TABLE, "layer_v4"], "");
    assert!(
        v4.contains(&format!("10.200.1.2 : jump {}", off.layer.chain()))
            && v4.contains(&format!("10.200.2.2 : jump {chain}")),
        "{v4}"
    );
    let text = ns.nft(&["list", "chain", "inet", TABLE, &off.layer.chain()], "");
    assert!(
        text.contains("ip daddr 0.0.0.0/0 meta l4proto tcp drop"),
        "{text}"
    );
    // The same change again writes nothing; the other sandbox leaving
    // takes its elements and, now unused, the first chain out.
    let (rules, _) = installed.change(&c, &[], ports).unwrap();
    assert!(rules.is_empty());
    let c = nft::Contents {
        sources: me.clone(),
        networks: &[],
        layer: Vec::new(),
        interfaces: &[],
    };
    let (rules, delta) = installed.change(&c, &["other".into()], ports).unwrap();
    ns.nft(&["-j", "-f", "-"], &nft::to_json(&rules).unwrap());
    installed.commit(delta);
    assert_eq!(installed.chains(), 1);
    let all = ns.nft(&["list", "table", "inet", TABLE], "");
    assert!(
        !all.contains(&chain) && !all.contains("10.200.2.2") && !all.contains("fd00::2"),
        "{all}"
    );
    // A revocation deletes exactly its elements (whether or not they are
    // still there: a second delete does not fail the transaction).
    let gone = [(me[0], "11.0.0.3".parse().unwrap(), 22u16)];
    for _ in 0..2 {
        ns.nft(
            &["-j", "-f", "-"],
            &nft::to_json(&nft::revoke(&gone).to_nftables()).unwrap(),
        );
    }
    assert!(!listed().contains("11.0.0.3"));
    assert!(
        ns.nft(&["list", "set", "inet", TABLE, "sandboxes_v4"], "")
            .contains("10.200.1.2")
    );
}

/// A change of `networks` writes the sources held whole, and a sandbox not
/// in the new contents leaves with its elements and its chain.
#[test]
fn a_change_of_networks_rewrites_the_sources_and_drops_who_left() {
    use gatehouse_egress::host::layout::Installed;
    let ns = Netns::new("nftall");
    let ports = Ports {
        transparent: 15001,
        dns: 15053,
    };
    let a: Vec<IpAddr> = vec!["10.200.1.2".parse().unwrap()];
    let b: Vec<IpAddr> = vec!["10.201.0.9".parse().unwrap()];
    let open = "policy p {\n  network {\n    allow domain x.test\n  }\n}\n";
    let off = "policy o {\n  network off\n}\n";
    let c = nft::Contents {
        sources: a.iter().chain(&b).copied().collect(),
        networks: &[],
        layer: vec![sandbox("a", &a, open), sandbox("b", &b, off)],
        interfaces: &[],
    };
    let mut installed = Installed::of(&c).unwrap();
    ns.nft(
        &["-j", "-f", "-"],
        &nft::to_json(&nft::ruleset(&c, ports, true)).unwrap(),
    );
    assert_eq!(installed.chains(), 2);
    let networks = ["10.200.0.0/16".parse().unwrap()];
    assert!(installed.needs_all(&networks, &[]));
    // `b` leaves; `a` is now covered by a network.
    let c = nft::Contents {
        sources: a.clone(),
        networks: &networks,
        layer: vec![sandbox("a", &a, open)],
        interfaces: &[],
    };
    let (rules, delta) = installed.change(&c, &[], ports).unwrap();
    ns.nft(&["-j", "-f", "-"], &nft::to_json(&rules).unwrap());
    installed.commit(delta);
    assert_eq!(installed.chains(), 1);
    assert!(!installed.needs_all(&networks, &[]));
    let v4 = ns.nft(&["list", "set", "inet", TABLE, "sandboxes_v4"], "");
    assert!(
        v4.contains("10.200.0.0/16") && !v4.contains("10.200.1.2") && !v4.contains("10.201.0.9"),
        "{v4}"
    );
    let all = ns.nft(&["list", "table", "inet", TABLE], "");
    assert!(!all.contains("10.201.0.9"), "{all}");
    assert!(
        all.contains(&format!("10.200.1.2 : jump {}", c.layer[0].layer.chain())),
        "{all}"
    );
    // The bridge table's copy of the sources follows.
    let bridge = ns.nft(&["list", "table", "bridge", nft::BRIDGE_TABLE], "");
    assert!(
        bridge.contains("10.200.0.0/16") && !bridge.contains("10.201.0.9"),
        "{bridge}"
    );
}

/// The daemon's element changes go over netlink (`nft` reads every element
/// of the table before deleting one): a sandbox leaving and one arriving,
/// read back with nft; a batch the kernel refuses changes nothing.
#[test]
fn element_changes_over_netlink_are_one_transaction() {
    use gatehouse_egress::host::layout::Installed;
    use gatehouse_egress::host::netlink::NetlinkError;
    use std::time::Duration;
    let ns = Netns::new("nftnl");
    let ports = Ports {
        transparent: 15001,
        dns: 15053,
    };
    let policy = "policy p {\n  network {\n    deny cidr 11.0.0.0/29\n  }\n}\n";
    let me: Vec<IpAddr> = vec!["10.200.1.2".parse().unwrap()];
    let other: Vec<IpAddr> = vec!["10.200.2.2".parse().unwrap(), "fd00::2".parse().unwrap()];
    // The sources are covered by `networks`: their interval sets do not
    // change, and only the verdict maps' elements are written.
    let networks: Vec<ipnet::IpNet> = vec![
        "10.200.0.0/16".parse().unwrap(),
        "fd00::/16".parse().unwrap(),
    ];
    let c = nft::Contents {
        sources: me.iter().chain(&other).copied().collect(),
        networks: &networks,
        layer: vec![sandbox("me", &me, policy), sandbox("other", &other, policy)],
        interfaces: &[],
    };
    let mut installed = Installed::of(&c).unwrap();
    ns.nft(
        &["-j", "-f", "-"],
        &nft::to_json(&nft::ruleset(&c, ports, true)).unwrap(),
    );
    let chain = c.layer[0].layer.chain();
    let maps = || {
        ns.nft(&["list", "map", "inet", TABLE, "layer_v4"], "")
            + &ns.nft(&["list", "map", "inet", TABLE, "layer_v6"], "")
    };
    // `other` leaves and `new` arrives with the same layer: elements only.
    let new: Vec<IpAddr> = vec!["10.200.3.2".parse().unwrap()];
    let c2 = nft::Contents {
        sources: me.iter().chain(&new).copied().collect(),
        networks: &networks,
        layer: vec![sandbox("new", &new, policy)],
        interfaces: &[],
    };
    let (rules, delta) = installed.change(&c2, &["other".into()], ports).unwrap();
    let ops = rules.element_ops().expect("a change of elements only");
    assert!(ops.0.iter().any(|o| !o.add) && ops.0.iter().any(|o| o.add));
    ns.inside(move || ops.apply(Duration::from_secs(2)))
        .unwrap();
    installed.commit(delta);
    let text = maps();
    assert!(
        text.contains(&format!("10.200.3.2 : jump {chain}"))
            && text.contains(&format!("10.200.1.2 : jump {chain}"))
            && !text.contains("10.200.2.2")
            && !text.contains("fd00::2"),
        "{text}"
    );
    // A batch with one element the kernel refuses (deleting one that is not
    // there) is refused whole: its add does not land either.
    let refused = gatehouse_egress::host::netlink::Ops(vec![
        gatehouse_egress::host::netlink::Op {
            add: true,
            family: 1,
            table: TABLE.into(),
            set: "layer_v4".into(),
            key: "10.200.7.7".parse().unwrap(),
            jump: Some(chain.clone()),
        },
        gatehouse_egress::host::netlink::Op {
            add: false,
            family: 1,
            table: TABLE.into(),
            set: "layer_v4".into(),
            key: "10.200.8.8".parse().unwrap(),
            jump: None,
        },
    ]);
    let e = ns.inside(move || refused.apply(Duration::from_secs(2)));
    assert!(matches!(e, Err(NetlinkError::Refused(2))), "{e:?}");
    assert!(!maps().contains("10.200.7.7"));
    // A change that adds a chain is not elements only: nft makes it.
    let off = sandbox("me", &me, "policy o {\n  network off\n}\n");
    let c3 = nft::Contents {
        sources: me.clone(),
        networks: &networks,
        layer: vec![off],
        interfaces: &[],
    };
    let (rules, _) = installed.change(&c3, &[], ports).unwrap();
    assert!(rules.element_ops().is_none());
    // Nor is one whose sources leave the networks (their interval sets).
    let outside: Vec<IpAddr> = vec!["192.0.2.9".parse().unwrap()];
    let c4 = nft::Contents {
        sources: me.iter().chain(&outside).copied().collect(),
        networks: &networks,
        layer: vec![sandbox("outside", &outside, policy)],
        interfaces: &[],
    };
    let (rules, _) = installed.change(&c4, &[], ports).unwrap();
    assert!(nft::to_json(&rules).unwrap().contains("sandboxes_v4"));
    assert!(rules.element_ops().is_none());
}
