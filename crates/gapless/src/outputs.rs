//! Output paths, checked before any work: none may be an input of the same command or
//! another output of it, and each must be writable. A run that would destroy its own
//! profile or capture, or lose its result at the end, is refused before it sends.

use std::path::{Path, PathBuf};

use anyhow::{bail, Result};

/// A path as it will be reached: symlinks and `..` resolved where it exists, else its
/// directory resolved and its name kept.
fn resolved(p: &Path) -> PathBuf {
    if let Ok(c) = std::fs::canonicalize(p) {
        return c;
    }
    let dir = match p.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    match (std::fs::canonicalize(dir), p.file_name()) {
        (Ok(d), Some(n)) => d.join(n),
        _ => p.to_path_buf(),
    }
}

/// The files of one command: `inputs` it reads and `outputs` it writes, each named by its
/// flag for the message. Refuses an output that is an input or another output, and one
/// whose directory cannot take a new file.
pub fn check(inputs: &[(&str, &Path)], outputs: &[(&str, &Path)]) -> Result<()> {
    for (i, (flag, out)) in outputs.iter().enumerate() {
        let r = resolved(out);
        if let Some((iflag, _)) = inputs.iter().find(|(_, p)| resolved(p) == r) {
            bail!(
                "{flag} {} is also the {iflag}: writing it would destroy what this command reads. Fix: write to another file",
                out.display()
            );
        }
        if let Some((oflag, _)) = outputs[..i].iter().find(|(_, p)| resolved(p) == r) {
            bail!(
                "{flag} and {oflag} both name {}: one would overwrite the other. Fix: give them different files",
                out.display()
            );
        }
        if let Err(e) = gapless_io::files::atomic::probe_writable(out) {
            bail!(
                "{flag} {}: cannot write there ({e}). Fix: give a path in an existing directory you can write to (checked before sending, so nothing is lost)",
                out.display()
            );
        }
    }
    Ok(())
}

/// A report directory: created now, and checked like a file in it.
pub fn check_dir(flag: &str, dir: &Path) -> Result<()> {
    if let Err(e) = std::fs::create_dir_all(dir) {
        bail!(
            "{flag} {}: cannot create it ({e}). Fix: give a directory you can write to",
            dir.display()
        );
    }
    check(&[], &[(flag, &dir.join("probe"))])
}
