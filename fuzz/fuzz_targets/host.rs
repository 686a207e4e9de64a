//! Host and path normalisation: never panics, and normalising a normalised
//! host or path changes nothing. (Whether a normalised input is ever allowed
//! where the reference denies it is the `differential` target's question.)
#![no_main]
use gatehouse::normalize::{OwnedHost, normalize_host_owned};
use gatehouse::normalize::{is_normal_absolute_path, normalize_absolute_path};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    match normalize_host_owned(text) {
        Ok(OwnedHost::Name(n)) => assert_eq!(normalize_host_owned(&n), Ok(OwnedHost::Name(n.clone()))),
        Ok(OwnedHost::Ip(ip)) => {
            let text = if ip.is_ipv6() { format!("[{ip}]") } else { ip.to_string() };
            assert_eq!(normalize_host_owned(&text), Ok(OwnedHost::Ip(ip)));
        }
        Err(_) => {}
    }
    // Paths: every absolute path without NUL normalises; the result is `/`
    // or a normal absolute path (no `.`, `..` or empty segment), and
    // normalises to itself.
    match normalize_absolute_path(text) {
        Some(p) => {
            assert!(p == "/" || is_normal_absolute_path(&p), "{p:?}");
            assert_eq!(normalize_absolute_path(&p).as_deref(), Some(&*p));
        }
        None => assert!(!text.starts_with('/') || text.contains('\0'), "{text:?}"),
    }
});
