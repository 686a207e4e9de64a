//! The daemon's tests, one binary: end to end on loopback by front door
//! (`e2e/`), allocations per request, the ext-authz server, fleets of
//! signed bundles, host mode against the real kernel (`host.rs`, in
//! network namespaces the test makes), and the layers of `egress/src`
//! (`layers.rs`).

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic
)]

mod allocations;
mod ext_authz;
mod fleet;
mod host;
mod layers;

/// End to end, on loopback only: real `curl`, `dig` and `openssl s_server`
/// against the proxy and the resolver.
mod e2e {
    mod support;

    mod connect;
    mod daemon;
    mod dns;
    mod http;
    mod socks;
    mod upstream;
}
