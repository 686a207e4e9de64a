//! Any bytes through the whole pipeline: no panic, no hang, and a set that
//! compiles decides without panicking.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let mut sources = gatehouse::source::SourceMap::new();
    sources.add("fuzz.policy", text);
    let b = gatehouse::build(sources);
    let _ = b.render();
    if let Some(set) = b.set {
        for p in set.policies() {
            let _ = p.connect("github.com", 443, gatehouse::query::Via::Https);
            let _ = p.exec(&["bash".into(), "-lc".into(), "git push; rm -rf /".into()], true);
        }
    }
});
