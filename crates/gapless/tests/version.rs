//! `gapless --version` names the git commit and the cargo profile of the build, and a result
//! file records the same, so a figure can be traced to the build that made it.

mod common;
use common::*;

#[test]
fn the_version_names_the_commit_and_the_profile_and_results_record_it() {
    let o = gapless(&["--version"]);
    let printed = text(&o).trim().to_string();
    let profile = std::path::Path::new(bin())
        .parent()
        .and_then(|d| d.file_name())
        .unwrap()
        .to_string_lossy()
        .to_string();
    let head = std::process::Command::new("git")
        .args(["rev-parse", "--short=12", "HEAD"])
        .output()
        .expect("git");
    let head = String::from_utf8_lossy(&head.stdout).trim().to_string();
    assert!(
        printed.starts_with(&format!("gapless {} (git {head}", env!("CARGO_PKG_VERSION")))
            && printed.ends_with(&format!(", profile {profile})")),
        "expected 'gapless {} (git {head}[+dirty], profile {profile})'; got {printed:?}",
        env!("CARGO_PKG_VERSION")
    );
    let dir = tempfile::tempdir().unwrap();
    let res = dir.path().join("r.json");
    let cbr = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/cbr.toml");
    let o = gapless(&[
        "run",
        cbr.to_str().unwrap(),
        "--null",
        "--duration",
        "0.01",
        "--json",
        res.to_str().unwrap(),
        "-q",
    ]);
    assert!(o.status.success(), "run: {}", text(&o));
    let r: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&res).unwrap()).unwrap();
    assert_eq!(
        r["version"].as_str(),
        printed.strip_prefix("gapless "),
        "expected the result's version to be the binary's"
    );
}
