//! Linux capabilities: which a command needs, checked up front from the process's effective
//! set (/proc/self/status CapEff), so that a missing one is named before anything starts
//! instead of failing half-way ("setns back to the original network namespace: EPERM").

use crate::IoError;

/// A capability gapless may need, with its bit number.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cap {
    /// Open raw (AF_PACKET / AF_XDP) sockets.
    NetRaw = 13,
    /// Promiscuous mode, XDP attach, hardware timestamping, tx_maxrate and qdiscs.
    NetAdmin = 12,
    /// Enter another network namespace (setns) and come back.
    SysAdmin = 21,
    /// SCHED_FIFO (--rt-priority).
    SysNice = 23,
}

impl Cap {
    pub fn name(self) -> &'static str {
        match self {
            Cap::NetRaw => "cap_net_raw",
            Cap::NetAdmin => "cap_net_admin",
            Cap::SysAdmin => "cap_sys_admin",
            Cap::SysNice => "cap_sys_nice",
        }
    }
}

/// The effective capability set, from /proc/self/status.
pub fn effective() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("CapEff:"))
                .and_then(|v| u64::from_str_radix(v.trim(), 16).ok())
        })
        .unwrap_or(0)
}

/// Errors out naming every capability of `needed` that `have` lacks, `what` needing them.
pub fn require(what: &str, needed: &[Cap], have: u64) -> Result<(), IoError> {
    let missing: Vec<&str> = needed
        .iter()
        .filter(|c| have >> (**c as u32) & 1 == 0)
        .map(|c| c.name())
        .collect();
    if missing.is_empty() {
        return Ok(());
    }
    let all: Vec<&str> = needed.iter().map(|c| c.name()).collect();
    Err(IoError::MissingCapabilities {
        what: what.into(),
        missing: missing.join(", "),
        fix: format!(
            "run as root, or give the binary what it needs: `setcap {}+ep $(command -v gapless)`",
            all.join(",")
        ),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_what_is_missing_and_the_fix() {
        let have = 1 << 13;
        assert!(require("x", &[Cap::NetRaw], have).is_ok());
        let e = require("run --netns", &[Cap::NetRaw, Cap::SysAdmin], have)
            .unwrap_err()
            .to_string();
        assert!(e.contains("run --netns needs cap_sys_admin"), "{e}");
        assert!(e.contains("setcap cap_net_raw,cap_sys_admin+ep"), "{e}");
        assert!(effective() != 0, "the tests run as root");
    }
}
