//! Any bytes as a compiled artifact: refused cleanly, never a panic; a
//! loaded set decides without panicking.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(set) = gatehouse::PolicySet::from_artifact(data) {
        for p in set.policies() {
            let _ = p.connect("api.example.com", 443, gatehouse::query::Via::Https);
            let _ = p.dns("example.com");
        }
    }
});
