//! `policyc export nftables|cilium|srt PATH... [--policy NAME] ...`: a
//! policy's network rules in another enforcement point's format, on stdout.

use crate::Exit;
use crate::cli::Export;

pub fn run(e: &Export) -> Exit {
    let (paths, policy) = match e {
        Export::Nftables { paths, policy, .. }
        | Export::Cilium { paths, policy, .. }
        | Export::Srt { paths, policy } => (paths, policy.as_deref()),
    };
    let sources = match crate::load::paths(paths) {
        Ok(s) => s,
        Err(e) => return e,
    };
    let (_, set) = match crate::load::compiled(sources) {
        Ok(x) => x,
        Err(e) => return e,
    };
    let text = match e {
        Export::Nftables {
            proxy, resolver, ..
        } => {
            let exits = match (addr("--proxy", proxy), addr("--resolver", resolver)) {
                (Ok(proxy), Ok(resolver)) => gatehouse::export::Exits { proxy, resolver },
                (Err(e), _) | (_, Err(e)) => return e,
            };
            gatehouse::export::nftables(&set, policy, &exits)
        }
        Export::Cilium {
            namespace,
            selector,
            ..
        } => {
            let mut labels = Vec::new();
            for s in selector {
                match s.split_once('=') {
                    Some((k, v)) if !k.is_empty() => labels.push((k.to_string(), v.to_string())),
                    _ => {
                        return Exit::Usage(format!("`--selector` takes KEY=VALUE, not `{s}`"));
                    }
                }
            }
            let options = gatehouse::export::CiliumOptions {
                namespace: namespace.clone(),
                selector: labels,
            };
            gatehouse::export::cilium(&set, policy, &options)
        }
        // The file rules srt cannot say are notes on stderr: the settings
        // file is still written (srt requires its `filesystem` part).
        Export::Srt { .. } => gatehouse::export::srt_settings_file(&set, policy).map(|s| {
            for n in &s.notes {
                errln!("note: {}: `{}`: {}", n.at, n.rule, n.why);
            }
            s.json
        }),
    };
    match text {
        Ok(text) => {
            out!("{text}");
            Exit::Ok
        }
        Err(e @ gatehouse::export::ExportError::Unexpressible { .. }) => {
            errln!("error: {e}");
            Exit::Failed
        }
        Err(e) => Exit::Usage(e.to_string()),
    }
}

fn addr(flag: &str, v: &str) -> Result<Option<std::net::SocketAddr>, Exit> {
    match v {
        "none" => Ok(None),
        v => v
            .parse()
            .map(Some)
            .map_err(|_| Exit::Usage(format!("`{flag}` takes IP:PORT or `none`, not `{v}`"))),
    }
}
