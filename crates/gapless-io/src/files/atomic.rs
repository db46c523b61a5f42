//! The one way gapless writes a file: atomically, and safely in a shared directory.
//!
//! A temporary file is created next to the target with O_EXCL and a random name (the
//! tempfile crate), so a symlink planted under a predictable name is never followed; it is
//! written, fsynced, given the mode of the file it replaces (0644 for a new one), and renamed
//! into place. Until then the target is untouched; on an error or a drop before
//! [`AtomicFile::commit`] the temporary file is removed. Temporary files are named
//! `.gapless-PID-XXXXXX.tmp`, so one left by a process that was killed (SIGKILL, a crash) is
//! recognised and removed by the next writer in that directory.

use std::fs::File;
use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

/// A file being written; it appears at its path only on [`AtomicFile::commit`].
pub struct AtomicFile {
    tmp: tempfile::NamedTempFile,
    path: PathBuf,
    mode: u32,
}

fn dir_of(path: &Path) -> &Path {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    }
}

fn temp_in(dir: &Path) -> std::io::Result<tempfile::NamedTempFile> {
    tempfile::Builder::new()
        .prefix(&format!(".gapless-{}-", std::process::id()))
        .suffix(".tmp")
        .tempfile_in(dir)
}

impl AtomicFile {
    pub fn create(path: &Path) -> std::io::Result<AtomicFile> {
        let dir = dir_of(path);
        // Once per directory per process: listing it for every file made writing a report
        // of 4,000 files quadratic (a 1,000-flow run's end took seconds in readdir alone).
        // A stale file is a dead process's, so none appears while this one runs.
        static SWEPT: std::sync::Mutex<Vec<PathBuf>> = std::sync::Mutex::new(Vec::new());
        let first = {
            let mut swept = SWEPT.lock().unwrap_or_else(|e| e.into_inner());
            let new = !swept.iter().any(|d| d == dir);
            if new {
                swept.push(dir.to_path_buf());
            }
            new
        };
        if first {
            for p in remove_stale(dir) {
                eprintln!("note: removed {}, left by a gapless that did not finish", p.display());
            }
        }
        let mode = std::fs::metadata(path).map_or(0o644, |m| m.permissions().mode() & 0o7777);
        Ok(AtomicFile {
            tmp: temp_in(dir)?,
            path: path.to_path_buf(),
            mode,
        })
    }

    /// The mode the file gets when committed (default: the replaced file's, else 0644). The
    /// temporary file is 0600 until then.
    pub fn with_mode(mut self, mode: u32) -> AtomicFile {
        self.mode = mode;
        self
    }

    pub fn file(&mut self) -> &mut File {
        self.tmp.as_file_mut()
    }

    /// Syncs the data, sets the mode and renames the file into place.
    pub fn commit(mut self) -> std::io::Result<()> {
        self.tmp.as_file_mut().flush()?;
        self.tmp.as_file().sync_all()?;
        std::fs::set_permissions(self.tmp.path(), std::fs::Permissions::from_mode(self.mode))?;
        self.tmp.persist(&self.path).map_err(|e| e.error)?;
        Ok(())
    }
}

/// Writes `bytes` to `path` atomically.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let mut f = AtomicFile::create(path)?;
    f.file().write_all(bytes)?;
    f.commit()
}

/// Checks that a file can be written at `path` (its directory exists and takes a new file)
/// by creating and removing a temporary file there.
pub fn probe_writable(path: &Path) -> std::io::Result<()> {
    temp_in(dir_of(path)).map(drop)
}

/// Removes `.gapless-PID-*.tmp` files in `dir` whose process is gone. Returns them.
pub fn remove_stale(dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().into_string().ok()?;
            let pid: u32 = name.strip_prefix(".gapless-")?.split('-').next()?.parse().ok()?;
            let ours = name.ends_with(".tmp") && e.file_type().ok()?.is_file();
            (ours && pid != std::process::id() && !Path::new(&format!("/proc/{pid}")).exists()).then(|| e.path())
        })
        .filter(|p| std::fs::remove_file(p).is_ok())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replaces_atomically_and_keeps_the_mode() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("r.json");
        std::fs::write(&p, "old").unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o600)).unwrap();
        write_atomic(&p, b"new").unwrap();
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "new");
        let mode = std::fs::metadata(&p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600, "expected the replaced file's mode 0600, got {mode:o}");
        let left: Vec<_> = std::fs::read_dir(d.path())
            .unwrap()
            .flatten()
            .map(|e| e.file_name())
            .collect();
        assert_eq!(left.len(), 1, "expected no temporary file left, got {left:?}");
    }

    #[test]
    fn a_planted_symlink_is_replaced_not_followed() {
        let d = tempfile::tempdir().unwrap();
        let victim = d.path().join("victim");
        std::fs::write(&victim, "precious").unwrap();
        let p = d.path().join("x.json");
        std::os::unix::fs::symlink(&victim, &p).unwrap();
        write_atomic(&p, b"result").unwrap();
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious");
        assert!(!std::fs::symlink_metadata(&p).unwrap().file_type().is_symlink());
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "result");
    }

    #[test]
    fn a_dropped_file_leaves_nothing_and_stale_ones_are_removed() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("x.pcap");
        {
            let mut f = AtomicFile::create(&p).unwrap();
            f.file().write_all(b"partial").unwrap();
        }
        assert_eq!(std::fs::read_dir(d.path()).unwrap().count(), 0);
        // A temporary file of a process that is gone (pid 0 never names a user process).
        let stale = d.path().join(".gapless-0-abcdef.tmp");
        std::fs::write(&stale, "x").unwrap();
        let other = d.path().join(".gapless-notapid.tmp");
        std::fs::write(&other, "y").unwrap();
        assert_eq!(remove_stale(d.path()), vec![stale]);
        assert!(other.exists(), "a file not of our naming stays");
        assert!(probe_writable(&p).is_ok());
        assert!(probe_writable(&d.path().join("no/such/dir/x")).is_err());
    }
}
