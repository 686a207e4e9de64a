//! Query lines, text or JSON: parsing never panics, and a parsed query is
//! decided without panicking; its text form reads back as itself.
#![no_main]
use libfuzzer_sys::fuzz_target;
use std::sync::OnceLock;

fn set() -> &'static gatehouse::PolicySet {
    static SET: OnceLock<gatehouse::PolicySet> = OnceLock::new();
    SET.get_or_init(|| {
        let text = r#"policy p {
  network {
    allow domain **.example.com port 443
    deny cidr 10.0.0.0/8
    allow ip 127.0.0.1
  }
  commands {
    prompt git push
  }
  guardian {
    risk high destructive command ~ r"rm\s+-rf"
  }
}
"#;
        gatehouse::PolicySet::from_source("p.policy", text).unwrap_or_else(|e| panic!("{e}"))
    })
}

fuzz_target!(|data: &[u8]| {
    let Ok(line) = std::str::from_utf8(data) else { return };
    let parsed = if line.trim_start().starts_with('{') {
        gatehouse::query::Query::from_json(line).ok()
    } else {
        gatehouse::Query::parse(line).ok()
    };
    if let Some(q) = parsed {
        let Some(p) = set().single() else { return };
        let _ = p.decide(&q);
        let text = q.to_string();
        assert_eq!(gatehouse::Query::parse(&text).ok().as_ref(), Some(&q), "`{text}` does not read back");
    }
});
