//! Host mode (issue 30): one daemon for every sandbox on a host. This
//! module holds the sandbox table — which source addresses are which
//! sandbox, and the policy each one is decided with — and [`nft`] the
//! nftables ruleset the daemon owns for them.
//!
//! The table is a TOML file (docs/host.md):
//!
//! ```toml
//! [[sandbox]]
//! id = "ci-1"                                  # letters, digits, `-`, `_`; at most 32
//! addresses = ["10.200.1.2", "fd00:200:1::2"]  # the sandbox's source addresses
//! policy = "/etc/gatehouse/ci.policy"          # text, artifact or signed bundle
//! policy_name = "ci"                           # optional: which policy of the set
//! ```
//!
//! A source address belongs to at most one sandbox; an address of no
//! sandbox is denied everything.

mod addr;
pub mod answered;
mod boundary;
pub mod client;
pub mod control;
mod expr;
pub mod kernel;
pub mod layout;
pub mod netlink;
pub mod nft;
pub mod passes;
mod ports;
pub mod resolver;
mod run;
mod shards;
pub mod state;
mod table;
pub mod transparent;

pub use run::{HostConfig, HostRunning, HostStartError, start};
pub use table::{
    HostError, MAX_ID, NO_INTERFACES, Sandbox, SandboxTable, Shared, canonical, client_of,
    valid_id, valid_interface,
};
