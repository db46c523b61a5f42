//! A router's set of FRR daemons (zebra first, then the others), in one directory and one
//! namespace: started together, stopped together (the last started first), each kept off the
//! send loops' cores; asked through one of them, or told why none can answer (the set is
//! stopped, or one exited: named, with its log's last lines). BGP, IS-IS and OSPF routers use it.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use gapless_io::devices::frr::Daemon;
use gapless_otg::frr::vty::{Ask, Replies};
use gapless_otg::OtgError;

/// Each daemon set's directory number (`/run/gapless-frr/<pid>-<k>`).
static NEXT: AtomicUsize = AtomicUsize::new(0);

/// One router's daemons and what they are started with.
pub struct DaemonSet {
    /// What the router is called in errors: `IS-IS router "r1"`.
    pub what: String,
    netns: String,
    configs: Vec<(&'static str, String)>,
    daemons: Mutex<Vec<Daemon>>,
}

impl DaemonSet {
    pub fn new(what: String, netns: String, configs: Vec<(&'static str, String)>) -> DaemonSet {
        DaemonSet {
            what,
            netns,
            configs,
            daemons: Mutex::new(Vec::new()),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<Daemon>> {
        self.daemons.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Starts the daemons unless all run (any left over are stopped first); whether it
    /// started them.
    pub fn start(&self) -> Result<bool, OtgError> {
        let mut d = self.lock();
        if d.len() == self.configs.len() && d.iter().all(Daemon::alive) {
            return Ok(false);
        }
        release(&mut d);
        let k = NEXT.fetch_add(1, Ordering::Relaxed);
        for (kind, conf) in &self.configs {
            match Daemon::start(kind, &self.netns, k, conf) {
                Ok(daemon) => {
                    gapless_engine::cores::adopt(daemon.pid);
                    d.push(daemon);
                }
                Err(e) => {
                    release(&mut d);
                    return Err(OtgError::invalid(format!(
                        "devices: {}: FRR's {kind} did not start: {e}",
                        self.what
                    )));
                }
            }
        }
        Ok(true)
    }

    /// Stops the daemons.
    pub fn stop(&self) {
        release(&mut self.lock());
    }

    /// The log of its daemon `kind` since it started.
    pub fn log(&self, kind: &str) -> String {
        let d = self.lock();
        d.iter().find(|x| x.kind == kind).map(Daemon::log).unwrap_or_default()
    }

    /// The replies of the daemon `ask` is for, by name, or why there are none.
    pub fn ask(&self, ask: &Ask) -> Result<Replies, String> {
        self.vty(ask.daemon, ask.commands()).map(|out| ask.replies(out))
    }

    /// The replies of its daemon `kind` to `commands`, or why there are none.
    pub fn vty(&self, kind: &str, commands: &[String]) -> Result<Vec<String>, String> {
        let d = self.lock();
        if d.is_empty() {
            return Err(format!("{} is stopped", self.what));
        }
        if let Some(dead) = d.iter().find(|x| !x.alive()) {
            return Err(format!(
                "the {} of {} exited (pid {}): {}",
                dead.kind,
                self.what,
                dead.pid,
                dead.log_tail()
            ));
        }
        let one = d.iter().find(|x| x.kind == kind).expect("started with the others");
        one.vty(commands).map_err(|e| e.to_string())
    }
}

fn release(d: &mut Vec<Daemon>) {
    // The last started first, zebra last: the others talk to zebra while they stop.
    while let Some(mut x) = d.pop() {
        gapless_engine::cores::release(x.pid);
        x.stop();
    }
}

impl Drop for DaemonSet {
    fn drop(&mut self) {
        self.stop();
    }
}
