//! The packet path's cores. A run holds the cores of its send loops (and its meter's, when
//! the meter was given a core) from its start to its end. While any are held, every other
//! thread of the process (a server's async workers and blocking threads, the run's own
//! driver, a progress line, Python's threads) is kept off them by its affinity mask; threads
//! that pinned themselves ([`mark_pinned`], called by [`crate::cpu::pin`]) are left alone.
//!
//! New threads inherit their creator's mask, so one pass over `/proc/self/task` when the held
//! set changes covers threads made later too. The process's own cores (its affinity when this
//! module was first used, e.g. from `taskset`) are the [`cpuset`]: a send loop may be pinned
//! to any of them, whatever the calling thread's mask is at the time.
//!
//! When a run would hold every core, [`Policy`] decides: the CLI and Python go on with a
//! warning that the result carries (the verdict's run-queue figures then show the cost);
//! `gapless serve` refuses, since its control plane needs one core to answer on.

use std::collections::BTreeSet;
use std::sync::{Mutex, OnceLock};

use crate::EngineError;

/// What happens when a run's cores would be every core of the process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Policy {
    /// Go on, with a warning in the run's result (the CLI, Python).
    Share,
    /// Refuse the run: one core stays for the rest of the process (`gapless serve`).
    KeepOne,
}

#[derive(Default)]
struct Book {
    /// (core, the hold that has it): a core held twice is a warning under [`Policy::Share`].
    held: Vec<(usize, u64)>,
    /// Threads that pinned themselves (by TID): never re-masked.
    pinned: BTreeSet<i32>,
    /// Helper processes (a device's routing daemons, by PID), masked as this process's
    /// own threads are ([`adopt`]).
    helpers: BTreeSet<i32>,
    next: u64,
    policy: Option<Policy>,
}

static BOOK: Mutex<Book> = Mutex::new(Book {
    held: Vec::new(),
    pinned: BTreeSet::new(),
    helpers: BTreeSet::new(),
    next: 1,
    policy: None,
});
static CPUSET: OnceLock<Vec<usize>> = OnceLock::new();

impl Book {
    fn held(&self) -> BTreeSet<usize> {
        self.held.iter().map(|h| h.0).collect()
    }

    /// The cores of the process no run holds (empty when every core is held).
    fn free(&self) -> Vec<usize> {
        let held = self.held();
        cpuset().iter().copied().filter(|c| !held.contains(c)).collect()
    }

    /// Where the rest of the process runs: the free cores, or every core when none is free.
    fn rest(&self) -> Vec<usize> {
        let free = self.free();
        if free.is_empty() {
            cpuset().to_vec()
        } else {
            free
        }
    }
}

fn book() -> std::sync::MutexGuard<'static, Book> {
    BOOK.lock().unwrap_or_else(|e| e.into_inner())
}

/// The cores this process may use: its affinity when first asked (call [`init`] early).
pub fn cpuset() -> &'static [usize] {
    CPUSET.get_or_init(|| current_mask(0).unwrap_or_default())
}

/// Reads the process's cores now, before any thread is re-masked, and sets the policy.
pub fn init(policy: Policy) {
    let _ = cpuset();
    book().policy = Some(policy);
}

/// The cores no run holds (the whole cpuset when every core is held).
pub fn available() -> Vec<usize> {
    book().rest()
}

/// The cores held by runs now.
pub fn held() -> Vec<usize> {
    book().held().into_iter().collect()
}

/// Whether `core` is held by one run alone while other cores are left to the rest of the
/// process: then no thread of this process but the packet path's runs on it.
pub fn exclusive(core: usize) -> bool {
    let b = book();
    let holders = b.held.iter().filter(|h| h.0 == core).count();
    holders == 1 && !b.free().is_empty()
}

/// Cores a run holds until this is dropped.
#[derive(Debug)]
pub struct Hold {
    id: u64,
    pub cores: Vec<usize>,
}

impl Drop for Hold {
    fn drop(&mut self) {
        let mut b = book();
        b.held.retain(|h| h.1 != self.id);
        remask(&b);
    }
}

/// Holds `cores` for a run's packet path and moves every other thread off them. Returns the
/// hold and, under [`Policy::Share`], warnings for a core another run holds too and for no
/// core left to the rest; under [`Policy::KeepOne`] those are errors.
pub fn hold(cores: &[usize]) -> Result<(Hold, Vec<String>), EngineError> {
    let all = cpuset();
    let mut b = book();
    let keep_one = b.policy == Some(Policy::KeepOne);
    let before: Vec<usize> = b.held().into_iter().collect();
    let mut warnings = Vec::new();
    if let Some(&c) = cores.iter().find(|c| before.contains(c)) {
        if keep_one {
            return Err(EngineError::CoreHeld { core: c, held: before });
        }
        warnings.push(format!(
            "core {c} is also held by another run of this process: their send loops share it, and neither schedule can be trusted. Fix: give each run its own cores (--core)"
        ));
    }
    let mut taken: BTreeSet<usize> = before.iter().copied().collect();
    taken.extend(cores.iter().copied());
    if !cores.is_empty() && all.iter().all(|c| taken.contains(c)) {
        if keep_one {
            return Err(EngineError::NoCoreLeft {
                asked: cores.to_vec(),
                held: before,
                cpuset: all.to_vec(),
            });
        }
        warnings.push(format!(
            "the packet path holds every core of this process ({all:?}): the meter, the progress line and other threads share the send loops' cores, and the verdict's run-queue wait shows what that cost. Fix: leave a core free (fewer --cores, or a larger taskset)"
        ));
    }
    let id = b.next;
    b.next += 1;
    b.held.extend(cores.iter().map(|&c| (c, id)));
    remask(&b);
    let hold = Hold {
        id,
        cores: cores.to_vec(),
    };
    Ok((hold, warnings))
}

thread_local! {
    static PINNED: PinMark = const { PinMark(std::cell::Cell::new(0)) };
}

/// A pinned thread's entry in the book, removed when the thread ends.
struct PinMark(std::cell::Cell<i32>);

impl Drop for PinMark {
    fn drop(&mut self) {
        let tid = self.0.get();
        if tid != 0 {
            book().pinned.remove(&tid);
        }
    }
}

/// Marks the calling thread as one that sets its own affinity (a send loop, a meter, a
/// probe): never re-masked. Call before pinning, so a re-mask cannot come between.
pub fn mark_pinned() {
    // SAFETY: gettid has no preconditions.
    let tid = unsafe { libc::gettid() };
    PINNED.with(|m| m.0.set(tid));
    book().pinned.insert(tid);
}

/// Keeps a helper process (a routing daemon the server started) off the packet path's
/// cores, now and whenever they change, until [`release`].
pub fn adopt(pid: i32) {
    let mut b = book();
    b.helpers.insert(pid);
    mask_tasks(&format!("/proc/{pid}/task"), &b.rest(), &b.pinned);
}

/// Forgets a helper process (it ended).
pub fn release(pid: i32) {
    book().helpers.remove(&pid);
}

/// Sets every unpinned thread's mask to the cores no run holds (all of them if none are
/// free), and every helper process's threads' too.
fn remask(b: &Book) {
    let mask = b.rest();
    mask_tasks("/proc/self/task", &mask, &b.pinned);
    for pid in &b.helpers {
        mask_tasks(&format!("/proc/{pid}/task"), &mask, &b.pinned);
    }
}

fn mask_tasks(dir: &str, mask: &[usize], pinned: &BTreeSet<i32>) {
    let Ok(tasks) = std::fs::read_dir(dir) else {
        return;
    };
    for t in tasks.flatten() {
        let Some(tid) = t.file_name().to_str().and_then(|s| s.parse::<i32>().ok()) else {
            continue;
        };
        if !pinned.contains(&tid) {
            // A thread that ended meanwhile is ESRCH: nothing to do.
            let _ = set_mask(tid, mask);
        }
    }
}

/// A thread's affinity (`tid` 0: the calling thread).
pub fn current_mask(tid: i32) -> Option<Vec<usize>> {
    // SAFETY: an all-zero cpu_set_t is valid; sched_getaffinity writes at most its size.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    let rc = unsafe { libc::sched_getaffinity(tid, std::mem::size_of::<libc::cpu_set_t>(), &mut set) };
    if rc != 0 {
        return None;
    }
    // SAFETY: CPU_ISSET reads within the set for indexes below CPU_SETSIZE.
    Some(
        (0..libc::CPU_SETSIZE as usize)
            .filter(|&c| unsafe { libc::CPU_ISSET(c, &set) })
            .collect(),
    )
}

fn set_mask(tid: i32, cores: &[usize]) -> std::io::Result<()> {
    // SAFETY: an all-zero cpu_set_t is valid; CPU_SET writes within it for cores below
    // CPU_SETSIZE (the kernel's core numbers are).
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    for &c in cores {
        unsafe { libc::CPU_SET(c, &mut set) };
    }
    let rc = unsafe { libc::sched_setaffinity(tid, std::mem::size_of::<libc::cpu_set_t>(), &set) };
    if rc == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}
