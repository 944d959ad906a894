//! Records the git revision the engine is built from, for `--version`,
//! GetInfo and the `io_engine_build_info` metric: `IO_ENGINE_GIT_REVISION`
//! when set (a container build, whose context has no .git), else `git
//! rev-parse`, else "unknown" (a source tarball).

/// What `git ARGS` prints, trimmed; `None` if it fails or prints nothing.
fn git(args: &[&str]) -> Option<String> {
    std::process::Command::new("git")
        .args(args)
        .output()
        .ok()
        .filter(|o| o.status.success())
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
}

fn main() {
    println!("cargo:rerun-if-env-changed=IO_ENGINE_GIT_REVISION");
    let given = std::env::var("IO_ENGINE_GIT_REVISION")
        .ok()
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty());
    let revision = given
        .or_else(|| git(&["rev-parse", "--short=12", "HEAD"]))
        .unwrap_or_else(|| "unknown".into());
    println!("cargo:rustc-env=IO_ENGINE_GIT_REVISION={revision}");
    // Rebuild when HEAD moves: HEAD itself, and the branch it names. Git
    // says where they are (a worktree's .git is a file); a path that does
    // not exist would make cargo rerun this script, and rebuild the crate,
    // every time.
    let branch = git(&["symbolic-ref", "-q", "HEAD"]);
    for name in std::iter::once("HEAD".to_string()).chain(branch) {
        let path = git(&["rev-parse", "--path-format=absolute", "--git-path", &name])
            .map(std::path::PathBuf::from);
        if let Some(path) = path.filter(|p| p.exists()) {
            println!("cargo:rerun-if-changed={}", path.display());
        }
    }
    // Packed branches (after `git gc`) move in packed-refs.
    if let Some(packed) = git(&[
        "rev-parse",
        "--path-format=absolute",
        "--git-path",
        "packed-refs",
    ])
    .map(std::path::PathBuf::from)
    .filter(|p| p.exists())
    {
        println!("cargo:rerun-if-changed={}", packed.display());
    }
}
