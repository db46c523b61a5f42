//! The NIC's per-queue hardware rate limiter: `/sys/class/net/IF/queues/tx-N/tx_maxrate`
//! (Mbit/s, 0 = no limit). gapless sets it on the queues it sends on, reads it back, and
//! puts the old value back when the run ends (a drop guard: Ctrl-C included).
//!
//! The sysfs root is a parameter so that tests can point it at a directory of their own.

use std::path::{Path, PathBuf};

use crate::error::IoError;

/// `/sys/class/net`, where the kernel lists interfaces.
pub const SYSFS_NET: &str = "/sys/class/net";

/// One queue's limit as set: the value before, asked and read back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueueRate {
    pub queue: u32,
    pub before_mbps: u64,
    pub asked_mbps: u64,
    pub read_back_mbps: u64,
}

/// Limits set on an interface's TX queues; dropping it restores the old values.
#[derive(Debug)]
pub struct NicLimiter {
    root: PathBuf,
    iface: String,
    pub queues: Vec<QueueRate>,
    restored: bool,
}

fn file(root: &Path, iface: &str, queue: u32) -> PathBuf {
    root.join(iface)
        .join("queues")
        .join(format!("tx-{queue}"))
        .join("tx_maxrate")
}

fn read_mbps(p: &Path) -> Result<u64, IoError> {
    let s = std::fs::read_to_string(p).map_err(|e| IoError::Sysfs {
        path: p.display().to_string(),
        cause: e.to_string(),
    })?;
    s.trim().parse().map_err(|_| IoError::Sysfs {
        path: p.display().to_string(),
        cause: format!("holds {:?}, not a number of Mbit/s", s.trim()),
    })
}

/// The TX queues of `iface` under `root` (tx-0, tx-1, …).
pub fn tx_queues(root: &Path, iface: &str) -> Result<Vec<u32>, IoError> {
    let dir = root.join(iface).join("queues");
    let rd = std::fs::read_dir(&dir).map_err(|e| IoError::Sysfs {
        path: dir.display().to_string(),
        cause: e.to_string(),
    })?;
    let mut q: Vec<u32> = rd
        .filter_map(|e| e.ok())
        .filter_map(|e| e.file_name().to_str()?.strip_prefix("tx-")?.parse().ok())
        .collect();
    q.sort_unstable();
    Ok(q)
}

/// The interface's driver, from sysfs (for the refusal's message).
fn driver(root: &Path, iface: &str) -> String {
    std::fs::read_link(root.join(iface).join("device").join("driver"))
        .ok()
        .and_then(|p| p.file_name().map(|f| f.to_string_lossy().into_owned()))
        .or_else(|| crate::kernel::nic::iface_info(iface).ok().and_then(|i| i.driver))
        .unwrap_or_else(|| "unknown".into())
}

impl NicLimiter {
    /// Sets `mbps` on each of `queues` of `iface`, reading every value back. A refusal
    /// restores what was already set and names the driver.
    pub fn set(root: &Path, iface: &str, queues: &[u32], mbps: u64) -> Result<NicLimiter, IoError> {
        let mut lim = NicLimiter {
            root: root.to_path_buf(),
            iface: iface.to_string(),
            queues: Vec::new(),
            restored: false,
        };
        for &q in queues {
            let p = file(root, iface, q);
            let before = read_mbps(&p)?;
            if let Err(e) = std::fs::write(&p, format!("{mbps}\n")) {
                return Err(IoError::NicLimiterRefused {
                    iface: iface.to_string(),
                    queue: q,
                    driver: driver(root, iface),
                    cause: e.to_string(),
                });
            }
            lim.queues.push(QueueRate {
                queue: q,
                before_mbps: before,
                asked_mbps: mbps,
                read_back_mbps: read_mbps(&p)?,
            });
        }
        Ok(lim)
    }

    /// Puts the old values back.
    pub fn restore(&mut self) -> Result<(), IoError> {
        if std::mem::replace(&mut self.restored, true) {
            return Ok(());
        }
        let mut first_err = None;
        for q in &self.queues {
            let p = file(&self.root, &self.iface, q.queue);
            if let Err(e) = std::fs::write(&p, format!("{}\n", q.before_mbps)) {
                first_err.get_or_insert(IoError::Sysfs {
                    path: p.display().to_string(),
                    cause: e.to_string(),
                });
            }
        }
        first_err.map_or(Ok(()), Err)
    }
}

impl Drop for NicLimiter {
    fn drop(&mut self) {
        let _ = self.restore();
    }
}

/// A sysfs mounted by the calling thread: it lists the interfaces of the thread's network
/// namespace (the host's /sys lists the namespace that mounted it, so a run that entered
/// another namespace mounts its own, as `ip netns exec` does). Unmounted when dropped.
#[derive(Debug)]
pub struct SysfsView {
    dir: tempfile::TempDir,
}

impl SysfsView {
    pub fn mount() -> Result<SysfsView, IoError> {
        let dir = tempfile::Builder::new()
            .prefix("gapless-sysfs")
            .tempdir()
            .map_err(|e| IoError::Sysfs {
                path: std::env::temp_dir().display().to_string(),
                cause: e.to_string(),
            })?;
        let target = std::ffi::CString::new(dir.path().as_os_str().as_encoded_bytes()).expect("no NUL in a temp path");
        let flags = libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC;
        // SAFETY: mount(2) with NUL-terminated strings that outlive the call.
        let rc = unsafe {
            libc::mount(
                c"sysfs".as_ptr(),
                target.as_ptr(),
                c"sysfs".as_ptr(),
                flags,
                std::ptr::null(),
            )
        };
        if rc < 0 {
            return Err(IoError::Sysfs {
                path: dir.path().display().to_string(),
                cause: format!(
                    "mounting a sysfs for this network namespace: {}",
                    std::io::Error::last_os_error()
                ),
            });
        }
        Ok(SysfsView { dir })
    }

    /// Its `class/net`.
    pub fn net(&self) -> PathBuf {
        self.dir.path().join("class").join("net")
    }
}

impl Drop for SysfsView {
    fn drop(&mut self) {
        if let Ok(p) = std::ffi::CString::new(self.dir.path().as_os_str().as_encoded_bytes()) {
            // SAFETY: unmounting what `mount` mounted, by its NUL-terminated path.
            unsafe { libc::umount2(p.as_ptr(), libc::MNT_DETACH) };
        }
    }
}

/// Mind the Gap (§5.4.4) measured the hardware limiters releasing bursts: an Intel 82599 sent
/// pairs at 1, 4 and 7 Mpps, an XL710 bursts of 64 to 128 frames. Above this rate per queue
/// gapless warns that the spacing is the NIC's, not CBR.
pub const NIC_BURST_WARN_PPS: f64 = 1.0e6;

#[cfg(test)]
mod tests {
    use super::*;

    fn fake(dir: &Path, queues: &[(u32, u64)]) {
        for &(q, v) in queues {
            let d = dir.join("eth9").join("queues").join(format!("tx-{q}"));
            std::fs::create_dir_all(&d).unwrap();
            std::fs::write(d.join("tx_maxrate"), format!("{v}\n")).unwrap();
        }
        std::fs::create_dir_all(dir.join("eth9/queues/rx-0")).unwrap();
    }

    #[test]
    fn sets_reads_back_and_restores() {
        let t = tempfile::tempdir().unwrap();
        fake(t.path(), &[(0, 0), (1, 250), (2, 0)]);
        assert_eq!(tx_queues(t.path(), "eth9").unwrap(), vec![0, 1, 2]);
        let mut l = NicLimiter::set(t.path(), "eth9", &[0, 1], 400).unwrap();
        assert_eq!(
            l.queues,
            vec![
                QueueRate {
                    queue: 0,
                    before_mbps: 0,
                    asked_mbps: 400,
                    read_back_mbps: 400
                },
                QueueRate {
                    queue: 1,
                    before_mbps: 250,
                    asked_mbps: 400,
                    read_back_mbps: 400
                },
            ]
        );
        assert_eq!(
            read_mbps(&file(t.path(), "eth9", 2)).unwrap(),
            0,
            "an unused queue is left alone"
        );
        l.restore().unwrap();
        assert_eq!(read_mbps(&file(t.path(), "eth9", 0)).unwrap(), 0);
        assert_eq!(read_mbps(&file(t.path(), "eth9", 1)).unwrap(), 250);
    }

    #[test]
    fn drop_restores() {
        let t = tempfile::tempdir().unwrap();
        fake(t.path(), &[(0, 7)]);
        drop(NicLimiter::set(t.path(), "eth9", &[0], 100).unwrap());
        assert_eq!(read_mbps(&file(t.path(), "eth9", 0)).unwrap(), 7);
    }

    #[test]
    fn a_missing_queue_is_an_error_that_names_the_file() {
        let t = tempfile::tempdir().unwrap();
        fake(t.path(), &[(0, 0)]);
        let e = NicLimiter::set(t.path(), "eth9", &[3], 100).unwrap_err().to_string();
        assert!(e.contains("tx-3/tx_maxrate"), "{e}");
    }
}
