//! Normalisation shared by the checker, the compiler and the engine: hosts
//! (docs/language.md#host-normalisation), address classes (docs/language.md#non-public-addresses) and paths. Decide on the value the
//! socket or resolver will actually use, and normalise it exactly once.

pub mod addr;
pub mod authority;
pub mod host;
pub mod path;
pub mod pattern;

pub use addr::{canonical_ip, is_loopback, is_non_public};
pub use authority::{HostPortError, split_authority, split_host_port};
pub use host::{Host, HostBuf, HostError, normalize_host};
pub use path::{is_normal_absolute_path, lexical_path, normalize_absolute_path};
