//! `policyc compile`: write the compiled set as an artifact.

use crate::Exit;

pub fn run(args: &[String]) -> Exit {
    let (a, sources) = match crate::load::args_and_sources(args, &[], &["-o", "--output"]) {
        Ok(x) => x,
        Err(e) => return e,
    };
    let Some(out) = a.value("-o").or(a.value("--output")) else {
        return Exit::Usage("give the artifact's path with `-o FILE`".into());
    };
    let (_, set) = match crate::load::compiled(sources) {
        Ok(x) => x,
        Err(e) => return e,
    };
    let bytes = match set.to_artifact() {
        Ok(b) => b,
        Err(e) => {
            errln!("error: {e}");
            return Exit::Failed;
        }
    };
    if let Err(e) = std::fs::write(out, &bytes) {
        errln!("error: cannot write `{out}`: {e}");
        return Exit::Failed;
    }
    outln!(
        "wrote {out}: {} policies, {} bytes, revision {}",
        set.policies().count(),
        bytes.len(),
        set.revision()
    );
    Exit::Ok
}
