//! Reading a policy file: a regular file, within its size cap, that no
//! user but root and the daemon's could change (a child of `policy`).

use std::path::Path;

use super::{PolicyError, Untrusted, trusted};

/// The largest policy text read (the engine's own source limit).
const MAX_POLICY_BYTES: u64 = 8 * 1024 * 1024;
/// The largest compiled artifact or bundle read from the policy path (the
/// fleet download's limit too): a policy at the text limit compiles to
/// about 10 MB (docs/artifacts-and-logs.md).
const MAX_COMPILED_BYTES: u64 = 64 * 1024 * 1024;

/// Reads the policy file: a regular file of at most [`MAX_POLICY_BYTES`]
/// of text, or [`MAX_COMPILED_BYTES`] of compiled artifact or bundle (a
/// FIFO or a device at the path is refused, never waited on) that no user
/// but root and the daemon's could change ([`Untrusted`]). The path
/// is opened without blocking and the type is read from the descriptor
/// (`fstat`), never checked on the path first: a FIFO swapped in between
/// a check and the open would block the watcher for ever (issue 35,
/// finding 6).
pub(crate) fn read_policy(path: &Path) -> Result<Vec<u8>, PolicyError> {
    use rustix::fs::{Mode, OFlags};
    use std::io::Read as _;
    let read = |source| PolicyError::Read {
        path: path.to_path_buf(),
        source,
    };
    // Nobody but root and the daemon's user could change it (a name that
    // cannot be looked at is the read's own error, as it was).
    match trusted::check(path) {
        Ok(()) => {}
        Err(Untrusted::Io { source, .. }) => return Err(read(source)),
        Err(e) => return Err(PolicyError::Untrusted(Box::new(e))),
    }
    let fd = rustix::fs::open(
        path,
        OFlags::RDONLY | OFlags::NONBLOCK | OFlags::CLOEXEC | OFlags::NOCTTY,
        Mode::empty(),
    )
    .map_err(|e| read(e.into()))?;
    let file = std::fs::File::from(fd);
    if !file.metadata().map_err(read)?.is_file() {
        return Err(PolicyError::NotRegularFile {
            path: path.to_path_buf(),
        });
    }
    let mut bytes = Vec::new();
    file.take(MAX_COMPILED_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(read)?;
    let compiled = bytes.starts_with(gatehouse::artifact::MAGIC)
        || bytes.starts_with(gatehouse::bundle::BUNDLE_MAGIC);
    let limit = if compiled {
        MAX_COMPILED_BYTES
    } else {
        MAX_POLICY_BYTES
    };
    if bytes.len() as u64 > limit {
        return Err(PolicyError::TooLarge {
            path: path.to_path_buf(),
            limit,
        });
    }
    Ok(bytes)
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
mod tests {
    use super::*;

    /// A FIFO at the policy path (no writer: a blocking open would wait
    /// for ever) is refused at once, from the descriptor's own type.
    #[test]
    fn a_fifo_is_refused_without_waiting() {
        let dir = std::env::temp_dir().join(format!("gatehouse-fifo-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let fifo = dir.join("policy.fifo");
        let _ = std::fs::remove_file(&fifo);
        rustix::fs::mknodat(
            rustix::fs::CWD,
            &fifo,
            rustix::fs::FileType::Fifo,
            rustix::fs::Mode::from_raw_mode(0o600),
            0,
        )
        .expect("mkfifo");
        let (tx, rx) = std::sync::mpsc::channel();
        let path = fifo.clone();
        std::thread::spawn(move || {
            let _ = tx.send(read_policy(&path));
        });
        let got = rx
            .recv_timeout(std::time::Duration::from_secs(5))
            .expect("read_policy waited on a FIFO");
        assert!(
            matches!(got, Err(PolicyError::NotRegularFile { .. })),
            "{got:?}"
        );
        let file = dir.join("p.policy");
        std::fs::write(&file, "policy p { }\n").unwrap();
        assert_eq!(read_policy(&file).unwrap(), b"policy p { }\n");
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// Text over 8 MiB is refused; a compiled artifact or bundle may be
    /// larger (a policy at the text cap compiles to about 10 MB), up to
    /// its own cap.
    #[test]
    fn text_and_compiled_files_have_their_own_caps() {
        let dir = std::env::temp_dir().join(format!("gatehouse-caps-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let at = |name: &str, head: &[u8], len: u64| {
            let path = dir.join(name);
            let mut f = std::fs::File::create(&path).unwrap();
            std::io::Write::write_all(&mut f, head).unwrap();
            f.set_len(len).unwrap();
            read_policy(&path).map(|b| b.len() as u64)
        };
        let limit = |r: Result<u64, PolicyError>| match r {
            Err(PolicyError::TooLarge { limit, .. }) => limit,
            other => panic!("{other:?}"),
        };
        assert_eq!(
            at("t", b"policy", MAX_POLICY_BYTES).unwrap(),
            MAX_POLICY_BYTES
        );
        assert_eq!(
            limit(at("t", b"policy", MAX_POLICY_BYTES + 1)),
            MAX_POLICY_BYTES
        );
        let big = MAX_POLICY_BYTES * 4;
        for magic in [
            &gatehouse::artifact::MAGIC[..],
            &gatehouse::bundle::BUNDLE_MAGIC[..],
        ] {
            assert_eq!(at("c", magic, big).unwrap(), big);
            assert_eq!(
                limit(at("c", magic, MAX_COMPILED_BYTES + 1)),
                MAX_COMPILED_BYTES
            );
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
}
