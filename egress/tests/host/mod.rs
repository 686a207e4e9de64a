//! Host mode (issue 30) against the real kernel, in network namespaces the
//! tests create (never the machine's own network): the nftables table
//! (`nft.rs`), and the daemon serving three sandboxes end to end with real
//! clients that have no proxy settings (`e2e.rs`).

mod boundary;
mod control;
mod daemon;
mod e2e;
mod netns;
mod nft;
mod revoke;
mod world;

pub(crate) use netns::Netns;
