//! `gatehouse._gatehouse`: the engine for Python, under the idiomatic layer
//! of `python/gatehouse/__init__.py`.
//!
//! The boundary is small and flat on purpose: strings, integers, tuples and
//! bytes cross it, never Rust objects other than the two frozen handles
//! (`_PolicySet`, `_PolicyStore`). A decision comes back as a tuple of
//! static strings and small integers, which the Python layer turns into a
//! `Decision` only when asked. Nothing here panics on any input; every
//! failure is a `GatehouseError` (with the diagnostics as JSON) or a
//! deny with reason `internal_error`.

#![deny(missing_docs)]

use std::net::IpAddr;
use std::path::Path;

use gatehouse::fmt::{FormatError, format_source};
use gatehouse::query::Annotations;
use gatehouse::source::SourceMap;
use gatehouse::{Decision, Policy, PolicySet, PolicyStore, Query, Via, Workspace};
use pyo3::create_exception;
use pyo3::exceptions::{PyException, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyBytes;

create_exception!(
    _gatehouse,
    GatehouseError,
    PyException,
    "A policy set that does not build: args are (message, diagnostics as JSON)."
);

/// Where the deciding rule was written.
#[pyclass(frozen, get_all, name = "Rule", module = "gatehouse")]
struct PyRule {
    file: String,
    line: usize,
    column: usize,
    source: String,
    because: Option<String>,
}

#[pymethods]
impl PyRule {
    fn __repr__(&self) -> String {
        format!(
            "Rule({}:{}:{} `{}`)",
            self.file, self.line, self.column, self.source
        )
    }
}

/// An answer: immutable and hashable. Made in Rust with nothing converted
/// until a field is read (the fields are static strings and small numbers;
/// the rule is looked up only when asked for).
#[pyclass(frozen, name = "Decision", module = "gatehouse")]
struct PyDecision {
    d: Decision,
    set: PolicySet,
    policy: usize,
}

fn escalation(e: gatehouse::Escalation) -> &'static str {
    match e {
        gatehouse::Escalation::Ask => "ask",
        gatehouse::Escalation::Review => "review",
        _ => "none",
    }
}

#[pymethods]
impl PyDecision {
    /// `allow`, `deny`, `ask`, `review`, ... (the outcome's word).
    #[getter]
    fn outcome(&self) -> &'static str {
        self.d.outcome.as_str()
    }
    /// The stable reason code.
    #[getter]
    fn reason(&self) -> &'static str {
        self.d.reason.as_str()
    }
    /// The policy that decided.
    #[getter]
    fn policy(&self) -> &str {
        self.set
            .policies()
            .nth(self.policy)
            .map_or("", |p| p.name())
    }
    /// The deciding rule, or `None` for a default.
    #[getter]
    fn rule(&self) -> Option<PyRule> {
        let r = self.set.rule(self.d.rule?)?;
        Some(PyRule {
            file: r.file.to_string(),
            line: r.line,
            column: r.column,
            source: r.source.to_string(),
            because: r.because.map(str::to_string),
        })
    }
    #[getter]
    fn escalation(&self) -> Option<&'static str> {
        self.d.escalation.map(escalation)
    }
    #[getter]
    fn status(&self) -> Option<u16> {
        self.d.status
    }
    #[getter]
    fn risk(&self) -> Option<&'static str> {
        self.d.risk.map(|r| r.as_str())
    }
    #[getter]
    fn category(&self) -> Option<&'static str> {
        self.d.category.map(|c| c.as_str())
    }
    /// Whether the outcome is `allow`.
    #[getter]
    fn allowed(&self) -> bool {
        self.d.is_allow()
    }
    fn __bool__(&self) -> bool {
        self.d.is_allow()
    }
    fn __eq__(&self, other: &Bound<'_, PyAny>) -> bool {
        other
            .cast::<PyDecision>()
            .is_ok_and(|o| o.get().d == self.d && o.get().policy() == self.policy())
    }
    fn __hash__(&self) -> u64 {
        use std::hash::{Hash, Hasher};
        let mut h = std::collections::hash_map::DefaultHasher::new();
        self.d.hash(&mut h);
        self.policy().hash(&mut h);
        h.finish()
    }
    fn __repr__(&self) -> String {
        let rule = self
            .set
            .rule(self.d.rule.unwrap_or(gatehouse::RuleId(u32::MAX)))
            .map(|r| format!(", rule={}:{} `{}`", r.file, r.line, r.source))
            .unwrap_or_default();
        format!(
            "Decision({} because {}, policy={:?}{rule})",
            self.outcome(),
            self.reason(),
            self.policy()
        )
    }
}

type Dec = PyDecision;

fn sources_of(sources: Vec<(String, String)>) -> SourceMap {
    let mut map = SourceMap::new();
    for (name, text) in sources {
        map.add(name, text);
    }
    map
}

/// The diagnostics as JSON records, each with its human rendering (the
/// caret form `policyc check` prints) under `rendered`.
fn records(diagnostics: &[gatehouse::diag::Diagnostic], sources: &SourceMap) -> String {
    let records = gatehouse::diag::to_json_records(diagnostics, sources);
    let out: Vec<serde_json::Value> = records
        .iter()
        .zip(diagnostics)
        .map(|(r, d)| {
            let mut v = serde_json::to_value(r).unwrap_or(serde_json::Value::Null);
            if let Some(o) = v.as_object_mut() {
                let text = gatehouse::diag::render_human(std::slice::from_ref(d), sources);
                o.insert("rendered".into(), serde_json::Value::String(text));
            }
            v
        })
        .collect();
    serde_json::to_string(&out).unwrap_or_else(|_| "[]".into())
}

fn invalid(diagnostics: &[gatehouse::diag::Diagnostic], sources: &SourceMap) -> PyErr {
    let rendered = gatehouse::diag::render_human(diagnostics, sources);
    GatehouseError::new_err((rendered, records(diagnostics, sources)))
}

fn build(sources: SourceMap) -> PyResult<PolicySet> {
    let b = gatehouse::build(sources);
    match &b.set {
        Some(set) if !b.has_errors() => Ok(set.clone()),
        _ => Err(invalid(&b.diagnostics, &b.sources)),
    }
}

/// A compiled, immutable policy set. Cheap to share between threads.
#[pyclass(frozen, name = "_PolicySet", module = "gatehouse._gatehouse")]
struct PySet {
    set: PolicySet,
}

impl PySet {
    fn policy(&self, index: usize) -> Option<&Policy> {
        self.set.policies().nth(index)
    }
    /// A decision of the policy at `index` (Python only holds indexes from
    /// `names()`; an unknown one is an error, never a decision).
    fn with(&self, index: usize, f: impl FnOnce(&Policy) -> Decision) -> PyResult<Dec> {
        match self.policy(index) {
            Some(p) => Ok(PyDecision {
                d: f(p),
                set: self.set.clone(),
                policy: index,
            }),
            None => Err(GatehouseError::new_err((
                format!("no policy number {index} in this set"),
                "[]".to_string(),
            ))),
        }
    }
}

#[pymethods]
impl PySet {
    #[staticmethod]
    fn from_sources(sources: Vec<(String, String)>) -> PyResult<PySet> {
        build(sources_of(sources)).map(|set| PySet { set })
    }

    #[staticmethod]
    fn from_artifact(bytes: &[u8]) -> PyResult<PySet> {
        PolicySet::from_artifact(bytes)
            .map(|set| PySet { set })
            .map_err(|e| GatehouseError::new_err((e.to_string(), "[]".to_string())))
    }

    fn to_artifact<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyBytes>> {
        let bytes = self
            .set
            .to_artifact()
            .map_err(|e| GatehouseError::new_err((e.to_string(), "[]".to_string())))?;
        Ok(PyBytes::new(py, &bytes))
    }

    fn names(&self) -> Vec<String> {
        self.set.policies().map(|p| p.name().to_string()).collect()
    }

    fn revision(&self) -> String {
        self.set.revision().to_string()
    }

    /// (file, line, column, source, because) of a rule id.
    fn rule(&self, id: u32) -> Option<(String, usize, usize, String, Option<String>)> {
        self.set.rule(gatehouse::RuleId(id)).map(|r| {
            (
                r.file.to_string(),
                r.line,
                r.column,
                r.source.to_string(),
                r.because.map(str::to_string),
            )
        })
    }

    #[pyo3(signature = (policy, query, workspace=None))]
    fn decide_json(&self, policy: usize, query: &str, workspace: Option<&str>) -> PyResult<Dec> {
        let q = Query::from_json(query).map_err(|e| PyValueError::new_err(e.to_string()))?;
        self.decide(policy, &q, workspace)
    }

    #[pyo3(signature = (policy, query, workspace=None))]
    fn decide_text(&self, policy: usize, query: &str, workspace: Option<&str>) -> PyResult<Dec> {
        let q = Query::parse(query).map_err(|e| PyValueError::new_err(e.to_string()))?;
        self.decide(policy, &q, workspace)
    }

    fn connect(&self, policy: usize, host: &str, port: i64, via: &str) -> PyResult<Dec> {
        let via = Via::parse(via).ok_or_else(|| {
            PyValueError::new_err(format!(
                "via must be one of http, https, socks5, socks5_udp, not {via:?}"
            ))
        })?;
        match u16::try_from(port) {
            Ok(port) => self.with(policy, |p| p.connect(host, port, via)),
            // Out of range is a decision (`invalid_port`), not an error.
            Err(_) => self.with(policy, |p| {
                p.decide(&Query::Connect {
                    host: host.to_string(),
                    port,
                    via,
                })
            }),
        }
    }

    fn dns(&self, policy: usize, name: &str) -> PyResult<Dec> {
        self.with(policy, |p| p.dns(name))
    }

    #[pyo3(signature = (policy, name, addrs, port=None))]
    fn resolved(
        &self,
        policy: usize,
        name: &str,
        addrs: Vec<String>,
        port: Option<i64>,
    ) -> PyResult<Dec> {
        let parsed: Option<Vec<IpAddr>> = addrs.iter().map(|a| a.parse().ok()).collect();
        match (parsed, port.map(u16::try_from).transpose()) {
            (Some(ips), Ok(port)) => self.with(policy, |p| p.resolved_addrs(name, &ips, port)),
            // Anything unusual goes the owned way, which decides it.
            _ => self.with(policy, |p| {
                p.decide(&Query::Resolved {
                    host: name.to_string(),
                    addrs,
                    port,
                })
            }),
        }
    }

    fn tool(&self, policy: usize, permission: &str) -> PyResult<Dec> {
        self.with(policy, |p| p.tool(permission))
    }

    fn app(&self, policy: usize, program: &str) -> PyResult<Dec> {
        self.with(policy, |p| p.app(program))
    }

    fn exec(&self, policy: usize, argv: Vec<String>, escalate: bool) -> PyResult<Dec> {
        self.with(policy, |p| p.exec(&argv, escalate))
    }

    fn write(&self, policy: usize, path: &str, workspace: &str) -> PyResult<Dec> {
        let ws = Workspace::bind(Path::new(workspace));
        self.with(policy, |p| p.write(path, &ws))
    }

    #[pyo3(signature = (policy, server, tool, destructive=None, read_only=None, open_world=None))]
    fn mcp(
        &self,
        policy: usize,
        server: &str,
        tool: &str,
        destructive: Option<bool>,
        read_only: Option<bool>,
        open_world: Option<bool>,
    ) -> PyResult<Dec> {
        let hints = Annotations {
            destructive_hint: destructive,
            read_only_hint: read_only,
            open_world_hint: open_world,
        };
        self.with(policy, |p| p.mcp(server, tool, &hints))
    }
}

impl PySet {
    /// As `policyc eval`: the workspace given, else the one the query
    /// names, is bound (its `.git` pointer read) before deciding.
    fn decide(&self, policy: usize, q: &Query, workspace: Option<&str>) -> PyResult<Dec> {
        let named = match q {
            Query::Write { workspace, .. } | Query::Read { workspace, .. } => workspace.as_deref(),
            _ => None,
        };
        let ws = workspace.or(named).map(|w| Workspace::bind(Path::new(w)));
        self.with(policy, |p| p.decide_in(q, ws.as_ref()))
    }
}

/// The live policy set of a running program: readers load lock-free, an
/// update that does not build is refused and the old set stays.
#[pyclass(frozen, name = "_PolicyStore", module = "gatehouse._gatehouse")]
struct PyStore {
    store: PolicyStore,
}

#[pymethods]
impl PyStore {
    #[new]
    fn new(set: &PySet) -> PyStore {
        PyStore {
            store: PolicyStore::new(set.set.clone()),
        }
    }

    fn load(&self) -> PySet {
        PySet {
            set: PolicySet::clone(&self.store.load()),
        }
    }

    fn update(&self, sources: Vec<(String, String)>) -> PyResult<()> {
        let set = build(sources_of(sources))?;
        self.store.replace(set);
        Ok(())
    }

    fn replace(&self, set: &PySet) {
        self.store.replace(set.set.clone());
    }
}

/// Every diagnostic of a set of sources: (JSON records, rendered text).
#[pyfunction]
fn check(sources: Vec<(String, String)>) -> (String, String) {
    let b = gatehouse::build(sources_of(sources));
    (records(&b.diagnostics, &b.sources), b.render())
}

/// A policy test: file, line, column, test, policy, query text, query
/// JSON, expected outcome, expected reason.
type Case = (
    String,
    usize,
    usize,
    String,
    Option<String>,
    String,
    String,
    String,
    Option<String>,
);

/// Every `expect` of the `test` blocks of a set of sources; the set must
/// build.
#[pyfunction]
fn tests(sources: Vec<(String, String)>) -> PyResult<Vec<Case>> {
    let b = gatehouse::build(sources_of(sources));
    if b.has_errors() {
        return Err(invalid(&b.diagnostics, &b.sources));
    }
    Ok(b.tests()
        .into_iter()
        .map(|c| {
            let json = serde_json::to_string(&c.query).unwrap_or_default();
            (
                c.file,
                c.line,
                c.column,
                c.test,
                c.policy,
                c.query_text,
                json,
                c.expected.outcome,
                c.expected.because,
            )
        })
        .collect())
}

/// The canonical layout of one policy file.
#[pyfunction]
#[pyo3(signature = (text, name="policy"))]
fn fmt(text: &str, name: &str) -> PyResult<String> {
    let mut sources = SourceMap::new();
    let id = sources.add(name, text);
    let Some(file) = sources.get(id) else {
        return Err(GatehouseError::new_err((
            "internal error".to_string(),
            "[]".to_string(),
        )));
    };
    match format_source(id, file) {
        Ok(out) => Ok(out),
        Err(FormatError::Syntax(diags)) => Err(invalid(&diags, &sources)),
        Err(e) => Err(GatehouseError::new_err((e.to_string(), "[]".to_string()))),
    }
}

/// For the benchmarks: decides `connect HOST:443` for every host in Rust,
/// without crossing the boundary per query, and returns the nanoseconds
/// taken and how many were allowed, so that the binding's per-call overhead
/// is measured against the Rust call on the same stream.
#[pyfunction]
fn _bench_connect(set: &PySet, policy: usize, hosts: Vec<String>, rounds: usize) -> (u128, usize) {
    let Some(p) = set.policy(policy) else {
        return (0, 0);
    };
    let start = std::time::Instant::now();
    let mut allowed = 0;
    for _ in 0..rounds {
        for h in &hosts {
            allowed += usize::from(
                p.connect(std::hint::black_box(h), 443, Via::Https)
                    .is_allow(),
            );
        }
    }
    (start.elapsed().as_nanos(), allowed)
}

#[pyfunction]
fn version() -> &'static str {
    env!("CARGO_PKG_VERSION")
}

#[pymodule]
fn _gatehouse(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PySet>()?;
    m.add_class::<PyStore>()?;
    m.add_class::<PyDecision>()?;
    m.add_class::<PyRule>()?;
    m.add_function(wrap_pyfunction!(check, m)?)?;
    m.add_function(wrap_pyfunction!(fmt, m)?)?;
    m.add_function(wrap_pyfunction!(tests, m)?)?;
    m.add_function(wrap_pyfunction!(version, m)?)?;
    m.add_function(wrap_pyfunction!(_bench_connect, m)?)?;
    m.add("GatehouseError", m.py().get_type::<GatehouseError>())?;
    Ok(())
}
