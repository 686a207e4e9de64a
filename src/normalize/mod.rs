//! Normalisation shared by the checker, the compiler and the engine: hosts
//! (docs/language.md#host-normalisation), address classes (docs/language.md#non-public-addresses) and paths. Decide on the value the
//! socket or resolver will actually use, and normalise it exactly once.

//!
//! An embedder that must act on what the engine decided (dial the address,
//! answer the name) uses these same functions, so that the two never read
//! one input two ways.
//!
//! ```
//! use gatehouse::normalize::{Host, HostBuf, canonical_ip, normalize_host, split_authority};
//!
//! let mut buf = HostBuf::new();
//! assert_eq!(normalize_host("GitHub.COM.", &mut buf), Ok(Host::Name("github.com")));
//! let mut buf = HostBuf::new();
//! let Ok(Host::Ip(ip)) = normalize_host("[::ffff:10.1.2.3]", &mut buf) else { panic!() };
//! assert_eq!(canonical_ip(ip).to_string(), "10.1.2.3");
//! assert_eq!(split_authority("[::1]:8443", 443), Some(("[::1]", 8443)));
//! ```

pub(crate) mod addr;
pub(crate) mod authority;
pub(crate) mod glob;
pub(crate) mod host;
pub(crate) mod path;
pub(crate) mod pattern;
mod scan;

pub use addr::{
    canonical_ip, canonical_net, is_loopback, is_non_public, non_public_v4, non_public_v6_in_global,
};
#[cfg(feature = "diff")]
pub(crate) use addr::{canonical_prefixes, non_public_v4_prefixes, non_public_v6_prefixes};
pub use authority::{HostPortError, split_authority, split_host_port};

/// `localhost` and every `*.localhost` name (RFC 6761): local by name, as
/// the decision order and the checker read them. The name is normalised.
pub(crate) fn is_localhost_name(name: &str) -> bool {
    name == "localhost" || name.ends_with(".localhost")
}
pub use glob::{Anchor, FilePattern, FilePatternError, Segment};
pub use host::{
    Host, HostBuf, HostError, MAX_NAME, OwnedHost, normalize_host, normalize_host_owned,
};
pub(crate) use host::{Labels, Split, normalize_split, word};
pub use path::{is_normal_absolute_path, normalize_absolute_path};
pub use pattern::PatternError;
