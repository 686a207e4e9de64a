//! Reads PATH arguments (files, or directories read recursively for
//! `*.policy`) into a source map.

use std::path::{Path, PathBuf};

use gatehouse::source::SourceMap;

use crate::Exit;
use crate::cli::Paths;
use crate::exclude::Excludes;

fn collect(path: &Path, excludes: &Excludes, out: &mut Vec<PathBuf>) -> std::io::Result<()> {
    if path.is_dir() {
        let mut entries: Vec<PathBuf> = std::fs::read_dir(path)?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .collect();
        entries.sort();
        for e in entries {
            if excludes.excludes(&e) {
                continue;
            }
            if e.is_dir() || e.extension().is_some_and(|x| x == "policy") {
                collect(&e, excludes, out)?;
            }
        }
    } else {
        out.push(path.to_path_buf());
    }
    Ok(())
}

/// Every file named by `paths`, read into a source map, in a stable order.
/// Exclusions apply inside directories; a file named on the command line is
/// always read.
pub fn sources(paths: &[String], exclude: &[String]) -> Result<SourceMap, Exit> {
    let excludes = Excludes::new(exclude);
    let mut files = Vec::new();
    for p in paths {
        let path = Path::new(p);
        if !path.exists() {
            return Err(Exit::Usage(format!("`{p}` does not exist")));
        }
        collect(path, &excludes, &mut files)
            .map_err(|e| Exit::Usage(format!("cannot read `{p}`: {e}")))?;
    }
    // Nothing to read is an error, never an `ok` (issue 37, item 7): a
    // mistyped directory must not pass a hook.
    if files.is_empty() {
        return Err(Exit::Usage(format!(
            "no .policy file in {}{}",
            paths.join(", "),
            if exclude.is_empty() {
                ""
            } else {
                " once --exclude has applied"
            }
        )));
    }
    let mut map = SourceMap::new();
    for f in files {
        let text = std::fs::read_to_string(&f)
            .map_err(|e| Exit::Usage(format!("cannot read `{}`: {e}", f.display())))?;
        map.add(f.display().to_string(), text);
    }
    Ok(map)
}

/// The files that `--exclude` leaves of `paths`.
pub fn paths(p: &Paths) -> Result<SourceMap, Exit> {
    sources(&p.paths, &p.exclude)
}

/// Builds the set, or prints its diagnostics on stderr and fails.
pub fn compiled(sources: SourceMap) -> Result<(gatehouse::Build, gatehouse::PolicySet), Exit> {
    let b = gatehouse::build(sources);
    match b.set.clone() {
        Some(set) if !b.has_errors() => Ok((b, set)),
        _ => {
            err!("{}", b.render());
            Err(Exit::Failed)
        }
    }
}

/// Workspaces bound for `write` and `read` queries: the one a query names,
/// else `--workspace`, else the current directory. Each is bound once (its
/// `.git` pointer read once), with `home` for `~` rules (`policyc eval`
/// binds `$HOME`; tests bind none, so that they decide alike everywhere).
pub struct Workspaces {
    default: String,
    home: Option<String>,
    bound: std::collections::HashMap<String, gatehouse::Workspace>,
    default_bound: Option<gatehouse::Workspace>,
}

impl Workspaces {
    pub fn new(default: Option<&str>, home: Option<String>) -> Self {
        let default = match default {
            Some(d) => d.to_string(),
            None => std::env::current_dir()
                .map(|d| d.display().to_string())
                .unwrap_or_default(),
        };
        Workspaces {
            default,
            home,
            bound: std::collections::HashMap::new(),
            default_bound: None,
        }
    }

    /// The workspace a query is decided in, bound once per root. The
    /// default one is kept apart, so that a stream of queries without a
    /// workspace of their own neither copies nor hashes a root per line.
    pub fn for_query(&mut self, q: &gatehouse::query::Query) -> &gatehouse::Workspace {
        let home = &self.home;
        match q {
            gatehouse::query::Query::Write {
                workspace: Some(w), ..
            }
            | gatehouse::query::Query::Read {
                workspace: Some(w), ..
            } => self.bound.entry(w.clone()).or_insert_with(|| {
                gatehouse::Workspace::bind(Path::new(w)).with_home(home.clone())
            }),
            _ => {
                let root = &self.default;
                self.default_bound.get_or_insert_with(|| {
                    gatehouse::Workspace::bind(Path::new(root)).with_home(home.clone())
                })
            }
        }
    }
}
