//! Host normalisation: never panics, and normalising a normalised host
//! changes nothing.
#![no_main]
use gatehouse::normalize::host::{OwnedHost, normalize_host_owned};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(host) = std::str::from_utf8(data) else { return };
    match normalize_host_owned(host) {
        Ok(OwnedHost::Name(n)) => assert_eq!(normalize_host_owned(&n), Ok(OwnedHost::Name(n.clone()))),
        Ok(OwnedHost::Ip(ip)) => {
            let text = if ip.is_ipv6() { format!("[{ip}]") } else { ip.to_string() };
            assert_eq!(normalize_host_owned(&text), Ok(OwnedHost::Ip(ip)));
        }
        Err(_) => {}
    }
});
