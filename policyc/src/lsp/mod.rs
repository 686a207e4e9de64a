//! `policyc lsp`: a language server over standard input and output.
//!
//! Documents are kept whole (full sync). A document is checked together
//! with the other `*.policy` files of its directory (open buffers first,
//! the disk otherwise), as `policyc check DIR` would, so that requirements
//! and tests across files behave as they will in CI; when those other files
//! have errors of their own, the document is checked alone. The checks,
//! diagnostics, formatter and tests are the library's, so the editor says
//! exactly what `policyc check`, `fmt` and `test` say.
//!
//! Capabilities: diagnostics on open and change (with related locations),
//! formatting, hover (from docs/language.md), completion, go-to-definition
//! from a test's `policy NAME`, document symbols, and a "Run test" code lens
//! per test block (`gatehouse.runTest`, also callable as a command).

mod docs;
mod features;
mod text;

use std::collections::HashMap;

use lsp_server::{Connection, Message, Notification, Request, Response};
use serde_json::{Value, json};

use crate::Exit;
use text::at;

/// The command the code lenses run.
pub const RUN_TEST: &str = "gatehouse.runTest";

pub fn run() -> Exit {
    let (connection, threads) = Connection::stdio();
    let result = serve(&connection);
    drop(connection);
    let joined = threads.join().map_err(|e| e.to_string());
    match (result.map_err(|e| e.to_string()), joined) {
        (Ok(()), Ok(())) => Exit::Ok,
        (Err(e), _) | (_, Err(e)) => {
            errln!("error: policyc lsp: {e}");
            Exit::Failed
        }
    }
}

fn serve(connection: &Connection) -> Result<(), lsp_server::ProtocolError> {
    let (id, _params) = connection.initialize_start()?;
    let capabilities = json!({
        "textDocumentSync": { "openClose": true, "change": 1 },
        "hoverProvider": true,
        "completionProvider": { "triggerCharacters": [" ", "."] },
        "definitionProvider": true,
        "documentSymbolProvider": true,
        "documentFormattingProvider": true,
        "codeLensProvider": { "resolveProvider": false },
        "executeCommandProvider": { "commands": [RUN_TEST] },
    });
    connection.initialize_finish(
        id,
        json!({
            "capabilities": capabilities,
            "serverInfo": { "name": "policyc", "version": env!("CARGO_PKG_VERSION") },
        }),
    )?;
    let mut server = Server {
        docs: HashMap::new(),
        out: connection,
    };
    for msg in &connection.receiver {
        match msg {
            Message::Request(req) => {
                if connection.handle_shutdown(&req)? {
                    return Ok(());
                }
                let id = req.id.clone();
                let response = match server.request(&req) {
                    Ok(v) => Response::new_ok(id, v),
                    Err((code, message)) => Response::new_err(id, code, message),
                };
                server.send(Message::Response(response));
            }
            Message::Notification(n) => server.notification(&n),
            Message::Response(_) => {}
        }
    }
    Ok(())
}

/// JSON-RPC error codes.
const INVALID_PARAMS: i32 = -32602;
const METHOD_NOT_FOUND: i32 = -32601;

pub struct Server<'c> {
    /// Open documents by URI.
    docs: HashMap<String, String>,
    out: &'c Connection,
}

impl Server<'_> {
    fn send(&self, m: Message) {
        // The client has gone: the receive loop ends by itself.
        let _ = self.out.sender.send(m);
    }

    fn notify(&self, method: &str, params: Value) {
        self.send(Message::Notification(Notification::new(
            method.to_string(),
            params,
        )));
    }

    fn notification(&mut self, n: &Notification) {
        let uri = at(&n.params, "/textDocument/uri")
            .as_str()
            .unwrap_or("")
            .to_string();
        match n.method.as_str() {
            "textDocument/didOpen" => {
                let text = at(&n.params, "/textDocument/text").as_str().unwrap_or("");
                self.docs.insert(uri.clone(), text.to_string());
                self.publish_around(&uri);
            }
            "textDocument/didChange" => {
                // Full sync: the last change holds the whole text.
                let changes = at(&n.params, "/contentChanges").as_array();
                if let Some(text) = changes
                    .and_then(|c| c.last())
                    .and_then(|c| at(c, "/text").as_str())
                {
                    self.docs.insert(uri.clone(), text.to_string());
                    self.publish_around(&uri);
                }
            }
            "textDocument/didClose" => {
                self.docs.remove(&uri);
                self.notify(
                    "textDocument/publishDiagnostics",
                    json!({ "uri": uri, "diagnostics": [] }),
                );
            }
            _ => {}
        }
    }

    fn request(&mut self, req: &Request) -> Result<Value, (i32, String)> {
        let p = &req.params;
        let doc = |s: &Self| -> Result<(String, String), (i32, String)> {
            let uri = at(p, "/textDocument/uri")
                .as_str()
                .unwrap_or("")
                .to_string();
            match s.docs.get(&uri) {
                Some(t) => Ok((uri, t.clone())),
                None => Err((INVALID_PARAMS, format!("`{uri}` is not open"))),
            }
        };
        match req.method.as_str() {
            "textDocument/hover" => {
                let (_, text) = doc(self)?;
                Ok(features::hover(&text, at(p, "/position")))
            }
            "textDocument/completion" => {
                let (uri, text) = doc(self)?;
                Ok(features::completion(self, &uri, &text, at(p, "/position")))
            }
            "textDocument/definition" => {
                let (uri, text) = doc(self)?;
                Ok(features::definition(self, &uri, &text, at(p, "/position")))
            }
            "textDocument/documentSymbol" => {
                let (_, text) = doc(self)?;
                Ok(features::symbols(&text))
            }
            "textDocument/formatting" => {
                let (uri, text) = doc(self)?;
                Ok(features::formatting(&uri, &text))
            }
            "textDocument/codeLens" => {
                let (uri, text) = doc(self)?;
                Ok(features::code_lenses(&uri, &text))
            }
            "workspace/executeCommand" if at(p, "/command") == RUN_TEST => {
                let uri = at(p, "/arguments/0").as_str().unwrap_or("").to_string();
                let test = at(p, "/arguments/1").as_str().unwrap_or("").to_string();
                if !self.docs.contains_key(&uri) {
                    return Err((INVALID_PARAMS, format!("`{uri}` is not open")));
                }
                let result = features::run_test(self, &uri, &test);
                let failed = at(&result, "/failed").as_u64().unwrap_or(0);
                self.notify(
                    "window/showMessage",
                    json!({
                        "type": if failed > 0 { 1 } else { 3 },
                        "message": at(&result, "/summary"),
                    }),
                );
                Ok(result)
            }
            other => Err((METHOD_NOT_FOUND, format!("`{other}` is not supported"))),
        }
    }

    /// The files checked with a document: `(uri, name, text)`, the
    /// document first.
    fn set_of(&self, uri: &str) -> Vec<(String, String, String)> {
        let Some(text) = self.docs.get(uri) else {
            return Vec::new();
        };
        let Some(path) = text::uri_to_path(uri) else {
            return vec![(uri.to_string(), uri.to_string(), text.clone())];
        };
        let mut files = vec![(uri.to_string(), path.clone(), text.clone())];
        let dir = std::path::Path::new(&path).parent();
        let mut siblings: Vec<std::path::PathBuf> = dir
            .and_then(|d| std::fs::read_dir(d).ok())
            .into_iter()
            .flatten()
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "policy"))
            .filter(|p| p.to_string_lossy() != path)
            .collect();
        siblings.sort();
        for s in siblings {
            let name = s.to_string_lossy().into_owned();
            let suri = text::path_to_uri(&name);
            let stext = match self.docs.get(&suri) {
                Some(t) => Some(t.clone()),
                None => std::fs::read_to_string(&s).ok(),
            };
            if let Some(t) = stext {
                files.push((suri, name, t));
            }
        }
        files
    }

    /// Builds a document with its set (see the module docs); the build,
    /// and the URI of each of its files by file id.
    pub fn build(&self, uri: &str) -> (gatehouse::Build, Vec<String>) {
        let files = self.set_of(uri);
        let make = |files: &[(String, String, String)]| {
            let mut map = gatehouse::SourceMap::new();
            for (_, name, text) in files {
                map.add(name.clone(), text.clone());
            }
            let uris = files.iter().map(|(u, _, _)| u.clone()).collect();
            (gatehouse::build(map), uris)
        };
        let (b, uris) = make(&files);
        let others_broken = b
            .diagnostics
            .iter()
            .any(|d| d.is_error() && d.span.file.0 != 0);
        if others_broken && files.len() > 1 {
            return make(files.get(..1).unwrap_or(&[]));
        }
        (b, uris)
    }

    /// Publishes a document's diagnostics, then those of the other open
    /// documents of its directory, which it may change (a requirement
    /// edited in one file is broken or kept in the others).
    fn publish_around(&self, uri: &str) {
        self.publish(uri);
        let dir = |u: &str| {
            text::uri_to_path(u)
                .and_then(|p| std::path::Path::new(&p).parent().map(|d| d.to_path_buf()))
        };
        let Some(here) = dir(uri) else { return };
        let mut others: Vec<&String> = self
            .docs
            .keys()
            .filter(|u| u.as_str() != uri && dir(u).as_ref() == Some(&here))
            .collect();
        others.sort();
        for other in others {
            self.publish(other);
        }
    }

    fn publish(&self, uri: &str) {
        let (b, uris) = self.build(uri);
        let diagnostics = features::diagnostics(&b, &uris);
        self.notify(
            "textDocument/publishDiagnostics",
            json!({ "uri": uri, "diagnostics": diagnostics }),
        );
    }
}
