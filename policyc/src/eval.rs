//! `policyc eval`: one JSON decision per query line, streaming.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::io::{BufRead, BufWriter, Write};

use gatehouse::query::Query;
use gatehouse::{Policy, PolicySet};

use crate::Exit;
use crate::cli::EvalArgs;

pub fn run(a: &EvalArgs) -> Exit {
    let queries = &a.query;
    let file = a.queries.as_deref();
    // Every `--query` answers with one line: a blank one (or a comment)
    // would answer nothing and look like success.
    if let Some(q) = queries
        .iter()
        .find(|q| q.trim().is_empty() || q.trim_start().starts_with('#'))
    {
        return Exit::Usage(format!(
            "`--query {q:?}` holds no query; write one, for example `--query 'connect github.com:443'`"
        ));
    }
    let set = match a.artifact.as_deref() {
        Some(path) => match std::fs::read(path) {
            Ok(bytes) => {
                let trusted = match crate::keys::public_all(&a.trusted_key) {
                    Ok(t) => t,
                    Err(e) => return e,
                };
                if trusted.is_empty() && gatehouse::bundle::is_bundle(&bytes) {
                    errln!(
                        "warning: the signature of `{path}` was not checked: give --trusted-key to check it"
                    );
                }
                match gatehouse::bundle::load(&bytes, &trusted) {
                    Ok(set) => set,
                    Err(e) => {
                        errln!("error: cannot load `{path}`: {e}");
                        return Exit::Failed;
                    }
                }
            }
            Err(e) => return Exit::Usage(format!("cannot read `{path}`: {e}")),
        },
        None => {
            let sources = match crate::load::sources(&a.paths, &[]) {
                Ok(s) => s,
                Err(e) => return e,
            };
            match crate::load::compiled(sources) {
                Ok((_, set)) => set,
                Err(e) => return e,
            }
        }
    };
    let set = &set;
    let policy = match pick(set, a.policy.as_deref()) {
        Ok(p) => p,
        Err(e) => return e,
    };
    let stdout = std::io::stdout();
    let mut out = BufWriter::new(stdout.lock());
    let mut bad = false;
    let mut workspaces =
        crate::load::Workspaces::new(a.workspace.as_deref(), std::env::var("HOME").ok());
    let sink = match a.log.as_deref() {
        None => None,
        Some(path) => match std::fs::File::create(path) {
            Ok(f) => Some(gatehouse::log::JsonLinesSink::new(std::io::BufWriter::new(
                f,
            ))),
            Err(e) => return Exit::Usage(format!("cannot write `{path}`: {e}")),
        },
    };
    let telemetry = match crate::telemetry::start(a) {
        Ok(t) => t,
        Err(e) => return e,
    };
    let sink: Option<std::sync::Arc<dyn gatehouse::log::DecisionSink>> =
        match (sink, telemetry.sink()) {
            (None, None) => None,
            (Some(s), None) => Some(std::sync::Arc::new(s)),
            (None, Some(t)) => Some(t),
            (Some(s), Some(t)) => Some(std::sync::Arc::new(gatehouse::log::Tee(vec![
                std::sync::Arc::new(s),
                t,
            ]))),
        };
    // One buffer for every answer: a stream allocates per line only what
    // its query holds.
    let mut json = Vec::with_capacity(256);
    let mut formatted = Formatted::default();
    let mut line_out = |line: &str| -> std::io::Result<()> {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            return Ok(());
        }
        let sink = sink.as_deref();
        json.clear();
        if let Err(e) = answer(
            set,
            policy,
            line,
            &mut workspaces,
            sink,
            &mut formatted,
            &mut json,
        ) {
            bad = true;
            json.clear();
            serde_json::to_writer(&mut json, &serde_json::json!({ "error": e }))
                .map_err(std::io::Error::other)?;
        }
        json.push(b'\n');
        out.write_all(&json)
    };
    let io = match file {
        None => queries.iter().try_for_each(|q| line_out(q)),
        Some(path) => {
            let reader: Box<dyn BufRead> = if path == "-" {
                Box::new(std::io::stdin().lock())
            } else {
                match std::fs::File::open(path) {
                    Ok(f) => Box::new(std::io::BufReader::new(f)),
                    Err(e) => return Exit::Usage(format!("cannot read `{path}`: {e}")),
                }
            };
            let mut reader = reader;
            let mut line = String::with_capacity(256);
            loop {
                line.clear();
                match reader.read_line(&mut line) {
                    Ok(0) => break Ok(()),
                    Ok(_) => {
                        if let Err(e) = line_out(&line) {
                            break Err(e);
                        }
                    }
                    Err(e) => break Err(e),
                }
            }
        }
    };
    if let Err(e) = io.and_then(|()| out.flush()) {
        if e.kind() == std::io::ErrorKind::BrokenPipe {
            crate::output::gone(&e);
        }
        errln!("error: {e}");
        return Exit::Failed;
    }
    drop(out);
    drop(sink);
    telemetry.shutdown();
    if bad { Exit::BadQueries } else { Exit::Ok }
}

/// The policy to ask: `--policy NAME`, or the only one in the set.
pub fn pick<'a>(set: &'a PolicySet, name: Option<&str>) -> Result<&'a Policy, Exit> {
    set.select(name).map_err(|e| match e {
        gatehouse::SelectError::Several { names } => Exit::Usage(format!(
            "the set holds {} ({}); pick one with `--policy NAME`",
            crate::output::count(names.len(), "policy", "policies"),
            names.join(", ")
        )),
        other => Exit::Usage(other.to_string()),
    })
}

/// One query line (text form or JSON object) → one JSON decision, written
/// into `json`.
fn answer(
    set: &PolicySet,
    policy: &Policy,
    line: &str,
    workspaces: &mut crate::load::Workspaces,
    sink: Option<&dyn gatehouse::log::DecisionSink>,
    formatted: &mut Formatted,
    json: &mut Vec<u8>,
) -> Result<(), String> {
    let query = if line.starts_with('{') {
        Query::from_json(line).map_err(|e| format!("invalid JSON query: {e}"))?
    } else {
        gatehouse::Query::parse(line).map_err(|e| e.to_string())?
    };
    let ws = Some(workspaces.for_query(&query));
    let d = match sink {
        Some(sink) => set.decide_logged(policy, &query, ws, sink),
        None => policy.decide_in(&query, ws),
    };
    if let Some(done) = formatted.map.get(&d) {
        json.extend_from_slice(done);
        return Ok(());
    }
    serde_json::to_writer(&mut *json, &set.report(policy, &d)).map_err(|e| e.to_string())?;
    if formatted.map.len() < Formatted::MAX {
        formatted.map.insert(d, json.clone());
    }
    Ok(())
}

/// Answers already formatted, by decision. A decision's report depends on
/// the policy and the decision alone, and a stream has few distinct ones,
/// so each is formatted once; at most [`Formatted::MAX`] are kept.
#[derive(Default)]
struct Formatted {
    map: HashMap<gatehouse::Decision, Vec<u8>, BuildHasherDefault<WordHasher>>,
}

impl Formatted {
    const MAX: usize = 4096;
}

/// A multiply-rotate hasher for the few small integers of a decision (the
/// map's keys are ours, not the input's, so flooding is not a concern).
#[derive(Default)]
struct WordHasher(u64);

impl Hasher for WordHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u64(u64::from(b));
        }
    }
    fn write_u8(&mut self, n: u8) {
        self.write_u64(u64::from(n));
    }
    fn write_u16(&mut self, n: u16) {
        self.write_u64(u64::from(n));
    }
    fn write_u32(&mut self, n: u32) {
        self.write_u64(u64::from(n));
    }
    fn write_u64(&mut self, n: u64) {
        self.0 = (self.0.rotate_left(5) ^ n).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }
    fn write_usize(&mut self, n: usize) {
        self.write_u64(n as u64);
    }
}
