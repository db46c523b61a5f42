//! Tests only: what FRR 8.4's daemon `kind` refuses of a configuration, by its dry run (`-C`).

/// The lines the daemon's dry run refused (empty: it takes every line).
pub fn refused(kind: &str, text: &str) -> Vec<String> {
    let bin = format!("/usr/lib/frr/{kind}");
    assert!(
        std::path::Path::new(&bin).exists(),
        "expected FRR's {kind} (scripts/setup.sh installs frr)"
    );
    let dir = std::env::temp_dir().join(format!("gl-frr-dry-{}-{kind}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let f = dir.join(format!("{kind}.conf"));
    std::fs::write(&f, text).unwrap();
    let out = std::process::Command::new(&bin)
        .arg("-C")
        .arg("-f")
        .arg(&f)
        .output()
        .unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    let said = String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    gapless_io::devices::frr::refused_lines(&said)
        .into_iter()
        .map(str::to_string)
        .collect()
}
