//! `policyc keygen` and `policyc verify`, and reading key files for
//! `compile --sign` and `eval --trusted-key` (docs/bundles.md).

use gatehouse::bundle::{Keypair, PublicKey};

use crate::Exit;
use crate::output::count;

/// The secret key in `path`.
pub fn secret(path: &str) -> Result<Keypair, Exit> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| Exit::Usage(format!("cannot read the key `{path}`: {e}")))?;
    Keypair::parse(&text).map_err(|e| Exit::Usage(format!("`{path}`: {e}")))
}

/// The public keys in `paths`.
pub fn public_all(paths: &[String]) -> Result<Vec<PublicKey>, Exit> {
    paths
        .iter()
        .map(|path| {
            let text = std::fs::read_to_string(path)
                .map_err(|e| Exit::Usage(format!("cannot read the key `{path}`: {e}")))?;
            PublicKey::parse(&text).map_err(|e| Exit::Usage(format!("`{path}`: {e}")))
        })
        .collect()
}

/// Writes `text` to a new file (never over an existing one), with `mode`.
fn create(path: &str, text: &str, mode: u32) -> std::io::Result<()> {
    use std::io::Write as _;
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, mode);
    #[cfg(not(unix))]
    let _ = mode;
    options.open(path)?.write_all(text.as_bytes())
}

pub fn keygen(prefix: &str) -> Exit {
    let (secret_path, public_path) = (format!("{prefix}.key"), format!("{prefix}.pub"));
    for p in [&secret_path, &public_path] {
        if std::path::Path::new(p).exists() {
            return Exit::Usage(format!("`{p}` exists; keygen never overwrites a key"));
        }
    }
    let key = match Keypair::generate() {
        Ok(k) => k,
        Err(e) => {
            errln!("error: {e}");
            return Exit::Failed;
        }
    };
    if let Err(e) = create(&secret_path, &key.to_text(), 0o600) {
        errln!("error: cannot write `{secret_path}`: {e}");
        return Exit::Failed;
    }
    if let Err(e) = create(&public_path, &key.public().to_text(), 0o644) {
        errln!("error: cannot write `{public_path}`: {e}");
        return Exit::Failed;
    }
    outln!(
        "wrote {secret_path} (secret: keep it off the fleet) and {public_path}: key {}",
        key.public().id()
    );
    Exit::Ok
}

pub fn verify(trusted: &[String], bundle: &str) -> Exit {
    let keys = match public_all(trusted) {
        Ok(k) => k,
        Err(e) => return e,
    };
    let bytes = match std::fs::read(bundle) {
        Ok(b) => b,
        Err(e) => return Exit::Usage(format!("cannot read `{bundle}`: {e}")),
    };
    match gatehouse::bundle::verify(&bytes, &keys) {
        Ok(set) => {
            outln!(
                "ok: {bundle} is signed by trusted key {}: {}, revision {}, serial {}",
                gatehouse::bundle::signer_id(&bytes).unwrap_or_default(),
                count(set.policies().count(), "policy", "policies"),
                set.revision(),
                gatehouse::bundle::serial(&bytes).unwrap_or_default()
            );
            Exit::Ok
        }
        Err(e) => {
            errln!("error: `{bundle}` is refused: {e}");
            Exit::Failed
        }
    }
}
