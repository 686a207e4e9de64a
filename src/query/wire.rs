//! The JSON form of a query as one flat record: `kind` says which fields
//! belong; any other field present is an error, as is a missing one.

use serde::Deserialize;

use super::{Annotations, Assessment, Query, Via};
use crate::vocab::PromptCategory;

#[derive(Clone, Copy, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(super) enum Kind {
    Connect,
    Dns,
    Resolved,
    Socket,
    Listen,
    Upstream,
    Tool,
    App,
    Write,
    Read,
    Exec,
    Mcp,
    Prompt,
    Review,
    WebSearch,
}

#[derive(Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct Wire {
    kind: Option<Kind>,
    host: Option<String>,
    port: Option<i64>,
    via: Option<Via>,
    name: Option<String>,
    addrs: Option<Vec<String>>,
    path: Option<String>,
    addr: Option<String>,
    permission: Option<String>,
    program: Option<String>,
    workspace: Option<String>,
    home: Option<String>,
    argv: Option<Vec<String>>,
    escalate: Option<bool>,
    server: Option<String>,
    tool: Option<String>,
    annotations: Option<Annotations>,
    category: Option<PromptCategory>,
    action: Option<Box<Query>>,
    assessment: Option<Assessment>,
}

/// Takes a required field.
fn req<T>(v: &mut Option<T>, name: &str) -> Result<T, String> {
    v.take().ok_or_else(|| format!("missing field `{name}`"))
}

impl Wire {
    pub(super) fn into_query(mut self) -> Result<Query, String> {
        let w = &mut self;
        let kind = req(&mut w.kind, "kind")?;
        let q = match kind {
            Kind::Connect => Query::Connect {
                host: req(&mut w.host, "host")?,
                port: req(&mut w.port, "port")?,
                via: w.via.take().unwrap_or_default(),
            },
            Kind::Dns => Query::Dns {
                name: req(&mut w.name, "name")?,
            },
            Kind::Resolved => Query::Resolved {
                host: req(&mut w.host, "host")?,
                addrs: req(&mut w.addrs, "addrs")?,
                port: w.port.take(),
            },
            Kind::Socket => Query::Socket {
                path: req(&mut w.path, "path")?,
            },
            Kind::Listen => Query::Listen {
                addr: req(&mut w.addr, "addr")?,
            },
            Kind::Upstream => Query::Upstream,
            Kind::Tool => Query::Tool {
                permission: req(&mut w.permission, "permission")?,
            },
            Kind::App => Query::App {
                program: req(&mut w.program, "program")?,
            },
            Kind::Write => Query::Write {
                path: req(&mut w.path, "path")?,
                workspace: w.workspace.take(),
                home: w.home.take(),
            },
            Kind::Read => Query::Read {
                path: req(&mut w.path, "path")?,
                workspace: w.workspace.take(),
                home: w.home.take(),
            },
            Kind::Exec => Query::Exec {
                argv: req(&mut w.argv, "argv")?,
                escalate: w.escalate.take().unwrap_or_default(),
            },
            Kind::Mcp => Query::Mcp {
                server: req(&mut w.server, "server")?,
                tool: req(&mut w.tool, "tool")?,
                annotations: w.annotations.take().unwrap_or_default(),
            },
            Kind::Prompt => Query::Prompt {
                category: req(&mut w.category, "category")?,
            },
            Kind::Review => Query::Review {
                action: req(&mut w.action, "action")?,
                assessment: w.assessment.take().unwrap_or_default(),
            },
            Kind::WebSearch => Query::WebSearch,
        };
        // Whatever the kind did not take does not belong to it.
        let left = [
            ("host", w.host.is_some()),
            ("port", w.port.is_some()),
            ("via", w.via.is_some()),
            ("name", w.name.is_some()),
            ("addrs", w.addrs.is_some()),
            ("path", w.path.is_some()),
            ("addr", w.addr.is_some()),
            ("permission", w.permission.is_some()),
            ("program", w.program.is_some()),
            ("workspace", w.workspace.is_some()),
            ("home", w.home.is_some()),
            ("argv", w.argv.is_some()),
            ("escalate", w.escalate.is_some()),
            ("server", w.server.is_some()),
            ("tool", w.tool.is_some()),
            ("annotations", w.annotations.is_some()),
            ("category", w.category.is_some()),
            ("action", w.action.is_some()),
            ("assessment", w.assessment.is_some()),
        ];
        match left.iter().find(|(_, present)| *present) {
            Some((field, _)) => Err(format!("unknown field `{field}` for kind `{}`", q.kind())),
            None => Ok(q),
        }
    }
}
