//! Records the build: the git commit of the tree (with `+dirty` if it had changes when built)
//! and the cargo profile, so a result can be traced to the build that made it
//! (`gapless --version`, the result file's `version`).

use std::path::Path;
use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).output().ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
}

fn main() {
    let commit = git(&["rev-parse", "--short=12", "HEAD"]).unwrap_or_else(|| "unknown".into());
    let dirty = git(&["status", "--porcelain", "--untracked-files=no"]).is_some_and(|s| !s.is_empty());
    // OUT_DIR is target/<profile>/build/<crate>/out: the profile is the folder above `build`.
    let out = std::env::var("OUT_DIR").unwrap_or_default();
    let parts: Vec<&str> = Path::new(&out).iter().filter_map(|p| p.to_str()).collect();
    let profile = parts
        .iter()
        .position(|p| *p == "build")
        .and_then(|i| i.checked_sub(1))
        .map_or("unknown", |i| parts[i]);
    let commit = if dirty { format!("{commit}+dirty") } else { commit };
    println!("cargo:rustc-env=GAPLESS_COMMIT={commit}");
    println!("cargo:rustc-env=GAPLESS_PROFILE={profile}");
    // A new commit or checkout rebuilds this; edits alone do not (the `+dirty` is as built).
    if let Some(dir) = git(&["rev-parse", "--git-dir"]) {
        println!("cargo:rerun-if-changed={dir}/HEAD");
        if let Some(r) = git(&["symbolic-ref", "-q", "HEAD"]) {
            println!("cargo:rerun-if-changed={dir}/{r}");
        }
    }
    println!("cargo:rerun-if-changed=build.rs");
}
