//! `policyc compile`: write the compiled set as an artifact, or signed as
//! a bundle (`--sign KEY`).

use crate::Exit;
use crate::cli::CompileArgs;
use crate::output::count;

pub fn run(a: &CompileArgs) -> Exit {
    let sources = match crate::load::paths(&a.paths) {
        Ok(s) => s,
        Err(e) => return e,
    };
    let (_, set) = match crate::load::compiled(sources) {
        Ok(x) => x,
        Err(e) => return e,
    };
    let bytes = match set.to_artifact() {
        Ok(b) => b,
        Err(e) => {
            errln!("error: {e}");
            return Exit::Failed;
        }
    };
    let (bytes, signed) = match &a.sign {
        None => (bytes, String::new()),
        Some(key) => match crate::keys::secret(key) {
            Ok(k) => {
                let bundle = match a.serial {
                    Some(n) => k.sign_serial(&bytes, n),
                    None => k.sign(&bytes),
                };
                let serial = gatehouse::bundle::serial(&bundle).unwrap_or_default();
                (
                    bundle,
                    format!(", signed by key {}, serial {serial}", k.public().id()),
                )
            }
            Err(e) => return e,
        },
    };
    let out = &a.output;
    if let Err(e) = std::fs::write(out, &bytes) {
        errln!("error: cannot write `{out}`: {e}");
        return Exit::Failed;
    }
    outln!(
        "wrote {out}: {}, {}, revision {}{signed}",
        count(set.policies().count(), "policy", "policies"),
        count(bytes.len(), "byte", "bytes"),
        set.revision()
    );
    Exit::Ok
}
