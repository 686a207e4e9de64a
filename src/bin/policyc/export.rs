//! `policyc export nftables PATH... [--policy NAME] [--proxy IP:PORT]
//! [--resolver IP:PORT]`: the ip/cidr layer of a policy as an nftables
//! ruleset, on stdout.

use crate::Exit;

pub fn run(args: &[String]) -> Exit {
    let Some((format, rest)) = args.split_first() else {
        return Exit::Usage("export what? `policyc export nftables PATH...`".into());
    };
    if format != "nftables" {
        let hint = gatehouse::diag::did_you_mean(format, ["nftables"])
            .map(|h| format!(" ({h})"))
            .unwrap_or_default();
        return Exit::Usage(format!("unknown export format `{format}`{hint}"));
    }
    let (a, sources) =
        match crate::load::args_and_sources(rest, &[], &["--policy", "--proxy", "--resolver"]) {
            Ok(x) => x,
            Err(e) => return e,
        };
    let addr = |flag: &str, default: &str| -> Result<Option<std::net::SocketAddr>, Exit> {
        match a.value(flag).unwrap_or(default) {
            "none" => Ok(None),
            v => v
                .parse()
                .map(Some)
                .map_err(|_| Exit::Usage(format!("`{flag}` takes IP:PORT or `none`, not `{v}`"))),
        }
    };
    let exits = match (
        addr("--proxy", "127.0.0.1:3128"),
        addr("--resolver", "127.0.0.1:5353"),
    ) {
        (Ok(proxy), Ok(resolver)) => gatehouse::export::Exits { proxy, resolver },
        (Err(e), _) | (_, Err(e)) => return e,
    };
    let (build, _) = match crate::load::compiled(sources) {
        Ok(x) => x,
        Err(e) => return e,
    };
    match gatehouse::export::nftables(&build, a.value("--policy"), &exits) {
        Ok(text) => {
            out!("{text}");
            Exit::Ok
        }
        Err(e) => Exit::Usage(e.to_string()),
    }
}
