//! `policyc import zerocode|zoo|srt`: other systems' formats as policy text
//! on stdout; warnings and errors, each with its file and line, on stderr.

use gatehouse::import::{Import, Input, Severity};

use crate::Exit;
use crate::cli::Import as ImportCmd;

pub fn run(cmd: &ImportCmd) -> Exit {
    let read = |p: &str| {
        std::fs::read_to_string(p).map_err(|e| Exit::Usage(format!("cannot read `{p}`: {e}")))
    };
    let (path, requirements, profile_arg, import) = match cmd {
        ImportCmd::Zerocode {
            config,
            requirements,
            profile,
            telemetry,
        } => {
            let text = match read(config) {
                Ok(t) => t,
                Err(e) => return e,
            };
            let otel = gatehouse::import::zerocode::telemetry(&text);
            match (telemetry, &otel) {
                (Some(out), Some(t)) => {
                    for n in &t.notes {
                        errln!("warning: {config}:{}: {}", n.line, n.message);
                    }
                    if let Err(e) = std::fs::write(out, &t.text) {
                        return Exit::Usage(format!("cannot write `{out}`: {e}"));
                    }
                }
                (Some(out), None) => {
                    errln!("warning: {config}: no `[otel]` block: `{out}` is not written");
                }
                (None, Some(_)) => errln!(
                    "warning: {config}: `[otel]` is telemetry, not policy: give `--telemetry FILE` to write it as gatehouse's telemetry settings (docs/telemetry.md)"
                ),
                (None, None) => {}
            }
            let req_text = match requirements.as_deref().map(read).transpose() {
                Ok(r) => r,
                Err(e) => return e,
            };
            // `--profile NAME`: a profile file when NAME is one, otherwise
            // the `[profiles.NAME]` table of the config.
            let (name, profile_file) = match profile.as_deref() {
                Some(p) if std::path::Path::new(p).is_file() => {
                    let name = std::path::Path::new(p).file_name().map(|n| {
                        n.to_string_lossy()
                            .trim_end_matches(".toml")
                            .trim_end_matches(".config")
                            .to_string()
                    });
                    match read(p) {
                        Ok(t) => (name, Some(t)),
                        Err(e) => return e,
                    }
                }
                Some(p) => (Some(p.to_string()), None),
                None => (None, None),
            };
            let import = gatehouse::import::zerocode::import(
                &text,
                req_text.as_deref(),
                name.as_deref(),
                profile_file.as_deref(),
            );
            (config, requirements.as_deref(), profile.as_deref(), import)
        }
        ImportCmd::Zoo { policy } => match read(policy) {
            Ok(t) => (policy, None, None, gatehouse::import::zoo::import(&t)),
            Err(e) => return e,
        },
        ImportCmd::Srt { settings } => match read(settings) {
            Ok(t) => (settings, None, None, gatehouse::import::srt::import(&t)),
            Err(e) => return e,
        },
        ImportCmd::ClaudeCode { settings } => return claude_code(settings),
    };
    report(
        [
            path.as_str(),
            profile_arg.unwrap_or("profile"),
            requirements.unwrap_or("requirements"),
        ],
        &import,
    )
}

/// `policyc import claude-code FILE...`: each file's layer from its name
/// and place.
fn claude_code(paths: &[String]) -> Exit {
    use gatehouse::import::claude::{Layer, Settings};
    let mut texts = Vec::new();
    for p in paths {
        match std::fs::read_to_string(p) {
            Ok(t) => texts.push(t),
            Err(e) => return Exit::Usage(format!("cannot read `{p}`: {e}")),
        }
    }
    let home = std::env::var_os("HOME").map(std::path::PathBuf::from);
    let config_dir = std::env::var_os("CLAUDE_CONFIG_DIR").map(std::path::PathBuf::from);
    let absolute = |p: &str| std::fs::canonicalize(p).unwrap_or_else(|_| p.into());
    let files: Vec<Settings<'_>> = paths
        .iter()
        .zip(&texts)
        .map(|(p, t)| Settings {
            name: p.clone(),
            text: t,
            layer: Layer::of(
                &absolute(p),
                home.as_deref().map(absolute_path).as_deref(),
                config_dir.as_deref().map(absolute_path).as_deref(),
            ),
        })
        .collect();
    let import = gatehouse::import::claude::import(&files);
    let name = |i: Input| match i {
        Input::Settings(k) => paths.get(usize::from(k)).map_or("settings", |p| p.as_str()),
        _ => paths.first().map_or("settings", |p| p.as_str()),
    };
    report_by(&name, &import)
}

fn absolute_path(p: &std::path::Path) -> std::path::PathBuf {
    std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf())
}

/// Notes on stderr, each as `kind: FILE:LINE: message` (`FILE:` alone when
/// it is about the whole file), in file and line order.
fn report([config, profile, requirements]: [&str; 3], import: &Import) -> Exit {
    let name = |i: Input| match i {
        Input::Requirements => requirements,
        Input::Profile => profile,
        _ => config,
    };
    report_by(&name, import)
}

fn report_by<'a>(name: &dyn Fn(Input) -> &'a str, import: &Import) -> Exit {
    for n in &import.notes {
        let kind = if n.severity == Severity::Error {
            "error"
        } else {
            "warning"
        };
        let file = name(n.input);
        if n.line == 0 {
            errln!("{kind}: {file}: {}", n.message);
        } else {
            errln!("{kind}: {file}:{}: {}", n.line, n.message);
        }
    }
    if import.has_errors() {
        return Exit::Failed;
    }
    out!("{}", import.text);
    Exit::Ok
}
