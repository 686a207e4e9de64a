//! `policyc import zerocode|zoo|srt`: other systems' formats as policy text
//! on stdout; warnings and errors, each with its file and line, on stderr.

use gatehouse::import::{Import, Input, Severity};

use crate::Exit;
use crate::args::Args;

pub fn run(args: &[String]) -> Exit {
    let Some((format, rest)) = args.split_first() else {
        return Exit::Usage("`import` takes `zerocode`, `zoo` or `srt`".into());
    };
    let a = match Args::parse(rest, &[], &["--requirements", "--profile"]) {
        Ok(a) => a,
        Err(e) => return e,
    };
    let [path] = a.paths.as_slice() else {
        return Exit::Usage("`import` takes one input file".into());
    };
    let read = |p: &str| {
        std::fs::read_to_string(p).map_err(|e| Exit::Usage(format!("cannot read `{p}`: {e}")))
    };
    let text = match read(path) {
        Ok(t) => t,
        Err(e) => return e,
    };
    let import = match format.as_str() {
        "zerocode" => {
            let requirements = match a.value("--requirements").map(read).transpose() {
                Ok(r) => r,
                Err(e) => return e,
            };
            // `--profile NAME`: a profile file when NAME is one, otherwise
            // the `[profiles.NAME]` table of the config.
            let (profile, profile_file) = match a.value("--profile") {
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
            gatehouse::import::zerocode::import(
                &text,
                requirements.as_deref(),
                profile.as_deref(),
                profile_file.as_deref(),
            )
        }
        "zoo" => gatehouse::import::zoo::import(&text),
        "srt" => gatehouse::import::srt::import(&text),
        other => {
            let hint = gatehouse::diag::did_you_mean(other, ["zerocode", "zoo", "srt"])
                .map(|h| format!(" ({h})"))
                .unwrap_or_default();
            return Exit::Usage(format!("unknown import format `{other}`{hint}"));
        }
    };
    let requirements = a.value("--requirements").unwrap_or("requirements");
    let profile = a.value("--profile").unwrap_or("profile");
    report([path.as_str(), profile, requirements], &import)
}

/// Notes on stderr, each as `kind: FILE:LINE: message` (`FILE:` alone when
/// it is about the whole file), in file and line order.
fn report([config, profile, requirements]: [&str; 3], import: &Import) -> Exit {
    for n in &import.notes {
        let kind = if n.severity == Severity::Error {
            "error"
        } else {
            "warning"
        };
        let file = match n.input {
            Input::Requirements => requirements,
            Input::Profile => profile,
            _ => config,
        };
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
