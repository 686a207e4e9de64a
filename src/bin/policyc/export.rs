//! `policyc export nftables PATH... [--policy NAME] [--proxy IP:PORT]
//! [--resolver IP:PORT]`: the ip/cidr layer of a policy as an nftables
//! ruleset, on stdout.

use crate::Exit;
use crate::cli::Export;

pub fn run(e: &Export) -> Exit {
    let Export::Nftables {
        policy,
        proxy,
        resolver,
        paths,
    } = e;
    let addr = |flag: &str, v: &str| -> Result<Option<std::net::SocketAddr>, Exit> {
        match v {
            "none" => Ok(None),
            v => v
                .parse()
                .map(Some)
                .map_err(|_| Exit::Usage(format!("`{flag}` takes IP:PORT or `none`, not `{v}`"))),
        }
    };
    let exits = match (addr("--proxy", proxy), addr("--resolver", resolver)) {
        (Ok(proxy), Ok(resolver)) => gatehouse::export::Exits { proxy, resolver },
        (Err(e), _) | (_, Err(e)) => return e,
    };
    let sources = match crate::load::paths(paths) {
        Ok(s) => s,
        Err(e) => return e,
    };
    let (build, _) = match crate::load::compiled(sources) {
        Ok(x) => x,
        Err(e) => return e,
    };
    match gatehouse::export::nftables(&build, policy.as_deref(), &exits) {
        Ok(text) => {
            out!("{text}");
            Exit::Ok
        }
        Err(e) => Exit::Usage(e.to_string()),
    }
}
