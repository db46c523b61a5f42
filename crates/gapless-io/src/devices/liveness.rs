//! Whether a process is still the one that was meant: one test for the keeper's daemons and
//! for the namespaces and FRR directories a server left behind. A PID alone is not enough: a
//! process that exits frees it, and a later one may take it. So a process is known by its
//! start time too (field 22 of /proc/PID/stat): the keeper records each daemon's when it is
//! registered; for what a server left (a namespace, a directory) the owner must have started
//! before the thing was made, or the PID now names another process.

use std::time::{Duration, SystemTime};

/// A process's start time (clock ticks since boot) and whether it runs (not a zombie), from
/// its /proc/PID/stat line; `None` when it is gone.
pub fn stat_of(pid: i32) -> Option<(u64, bool)> {
    let stat = std::fs::read(format!("/proc/{pid}/stat")).ok()?;
    let close = stat.iter().rposition(|&b| b == b')')?;
    let state = stat.get(close + 2).copied();
    Some((stat_start_time(&stat), !matches!(state, Some(b'Z' | b'X'))))
}

/// Field 22 (starttime) of a /proc/PID/stat line: counted after the command's closing
/// parenthesis (a command may hold spaces and parentheses), which ends field 2. Allocates
/// nothing (the keeper calls it).
pub fn stat_start_time(stat: &[u8]) -> u64 {
    let Some(close) = stat.iter().rposition(|&b| b == b')') else {
        return 0;
    };
    let field = stat[close + 1..]
        .split(|&b| b == b' ')
        .filter(|f| !f.is_empty())
        .nth(22 - 3);
    field.map_or(0, |f| {
        f.iter()
            .take_while(|b| b.is_ascii_digit())
            .fold(0u64, |a, &b| a.saturating_mul(10).saturating_add(u64::from(b - b'0')))
    })
}

/// Whether `pid` runs and started no later than `made` (the time the thing it owns was made,
/// with a second's grace for the clock ticks' rounding): otherwise the owner is gone, and a
/// process that runs under its PID now is a stranger.
pub fn owner_runs(pid: i32, made: SystemTime) -> bool {
    let Some((ticks, running)) = stat_of(pid) else {
        return false;
    };
    match started_at(ticks) {
        Some(start) => running && start <= made + Duration::from_secs(1),
        None => running,
    }
}

/// When a process that started `ticks` clock ticks after boot started, on the wall clock
/// (the boot time from /proc/stat's `btime`).
fn started_at(ticks: u64) -> Option<SystemTime> {
    let stat = std::fs::read_to_string("/proc/stat").ok()?;
    let btime: u64 = stat
        .lines()
        .find_map(|l| l.strip_prefix("btime "))?
        .trim()
        .parse()
        .ok()?;
    // SAFETY: sysconf reads a constant of the system.
    let hz = u64::try_from(unsafe { libc::sysconf(libc::_SC_CLK_TCK) })
        .ok()
        .filter(|&h| h > 0)?;
    Some(SystemTime::UNIX_EPOCH + Duration::from_secs(btime) + Duration::from_millis(ticks * 1000 / hz))
}

/// When the file at `path` was last changed (a namespace's bind mount: when it was made; a
/// directory: when its last entry was added), if it can be read.
pub fn made_at(path: &std::path::Path) -> Option<SystemTime> {
    std::fs::metadata(path).and_then(|m| m.modified()).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_owns_what_it_made_and_not_what_was_made_before_it_started() {
        let me = std::process::id() as i32;
        assert!(
            owner_runs(me, SystemTime::now()),
            "expected this process to own what it makes now"
        );
        let long_ago = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000);
        assert!(
            !owner_runs(me, long_ago),
            "expected a thing made before this process started not to be its (the PID was reused)"
        );
        assert!(
            !owner_runs(i32::MAX, SystemTime::now()),
            "expected no process under PID i32::MAX"
        );
    }

    #[test]
    fn the_start_time_is_read_after_the_last_parenthesis() {
        let line = b"42 (a) b) (c) S 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 777 19 20";
        assert_eq!(
            stat_start_time(line),
            777,
            "expected field 22 of a command with parentheses"
        );
        assert_eq!(stat_start_time(b"no parenthesis"), 0);
    }
}
