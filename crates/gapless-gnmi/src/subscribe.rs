//! One Subscribe stream's bookkeeping, sans IO: which leaves go out at each look at the
//! trees, for the modes of gNMI §3.5. The server looks at the trees when [`Session::due`]
//! says, hands the leaves to [`Session::look`], and sends what comes back.
//!
//! **TARGET_DEFINED**, which ondatra's Watch, Await and Collect send, is defined here as:
//! numbers (counters, rates, latencies, timestamps) sampled every [`TARGET_SAMPLE_NS`] (1 s),
//! and strings, enumerations and booleans (a session's state, a link's, a neighbour's
//! address) sent when they change, looked at every [`LOOK_NS`] (250 ms).

use std::collections::{BTreeSet, HashMap};

use super::path::Path;
use super::state::{Leaf, Scalar};

/// The sampling period of numbers under TARGET_DEFINED.
pub const TARGET_SAMPLE_NS: u64 = 1_000_000_000;
/// How often the trees are looked at for ON_CHANGE (and TARGET_DEFINED's changes).
pub const LOOK_NS: u64 = 250_000_000;
/// The shortest SAMPLE interval taken; a shorter one is refused (each look asks the routing
/// daemons, so a client could otherwise keep them busy).
pub const MIN_SAMPLE_NS: u64 = 100_000_000;
/// The most paths one subscription list may hold.
pub const MAX_PATHS: usize = 1_000;

/// A subscription list's mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ListMode {
    Stream,
    Once,
    Poll,
}

/// A STREAM subscription's mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SubMode {
    TargetDefined,
    OnChange,
    /// Every `interval_ns` (0: the target's choice, [`TARGET_SAMPLE_NS`]).
    Sample {
        interval_ns: u64,
    },
}

/// One path of a list and how it is streamed.
#[derive(Debug, Clone, PartialEq)]
pub struct Sub {
    pub path: Path,
    pub mode: SubMode,
    /// SAMPLE: leave out a value that has not changed since it was last sent.
    pub suppress_redundant: bool,
    /// ON_CHANGE and suppressed SAMPLE: send the value again after this long anyway (0: never).
    pub heartbeat_ns: u64,
}

impl Sub {
    /// A subscription of `path` in `mode`, as a client gives it, checked.
    pub fn new(path: Path, mode: SubMode, suppress_redundant: bool, heartbeat_ns: u64) -> Result<Sub, String> {
        if let SubMode::Sample { interval_ns } = mode {
            if interval_ns != 0 && interval_ns < MIN_SAMPLE_NS {
                return Err(format!(
                    "{path}: a sample interval of {interval_ns} ns is under the {MIN_SAMPLE_NS} ns this server takes. Fix: sample every 100 ms or more, or give 0 for the server's period (1 s)"
                ));
            }
        }
        Ok(Sub {
            path,
            mode,
            suppress_redundant,
            heartbeat_ns,
        })
    }

    /// The subscription's sampling period; none for ON_CHANGE.
    fn sample_ns(&self) -> Option<u64> {
        match self.mode {
            SubMode::OnChange => None,
            SubMode::Sample { interval_ns: 0 } | SubMode::TargetDefined => Some(TARGET_SAMPLE_NS),
            SubMode::Sample { interval_ns } => Some(interval_ns),
        }
    }

    /// The sampling period this subscription has for `v`, or none when `v` is sent on change
    /// (TARGET_DEFINED samples numbers only).
    fn period(&self, v: &Scalar) -> Option<u64> {
        let number = matches!(v, Scalar::Uint(_) | Scalar::Float32(_) | Scalar::Double(_));
        self.sample_ns()
            .filter(|_| number || self.mode != SubMode::TargetDefined)
    }
}

/// What one look sends: the leaves, then the paths that are gone.
#[derive(Debug, Default, PartialEq)]
pub struct Sent {
    pub updates: Vec<Leaf>,
    pub deletes: Vec<Path>,
}

/// One Subscribe stream.
#[derive(Debug)]
pub struct Session {
    subs: Vec<Sub>,
    /// Per subscription, when its next sample is due (ns, the caller's clock).
    next_sample: Vec<u64>,
    /// Per leaf sent: its value and when it went.
    sent: HashMap<Path, (Scalar, u64)>,
}

impl Session {
    /// A stream of `subs`; more than [`MAX_PATHS`] is refused.
    pub fn new(subs: Vec<Sub>) -> Result<Session, String> {
        if subs.is_empty() {
            return Err("the subscription list has no path. Fix: subscribe to at least one path".into());
        }
        if subs.len() > MAX_PATHS {
            return Err(format!(
                "{} paths in one subscription list, over the {MAX_PATHS} this server takes. Fix: subscribe to a wildcard (flows/flow[name=*]) instead of each entry",
                subs.len()
            ));
        }
        let next_sample = vec![0; subs.len()];
        Ok(Session {
            subs,
            next_sample,
            sent: HashMap::new(),
        })
    }

    /// The trees' roots (`flows`, `bgp-peers`) the subscriptions reach; all of them when one
    /// subscribes to the root.
    pub fn roots(&self) -> Option<BTreeSet<String>> {
        self.subs
            .iter()
            .map(|s| s.path.0.first().map(|e| e.name.clone()))
            .collect()
    }

    /// Every leaf a subscription covers, for ONCE, a POLL, or a stream's first full set
    /// (when `updates_only`, nothing goes out but the values are taken as sent).
    pub fn full(&mut self, now: u64, leaves: &[Leaf], updates_only: bool) -> Vec<Leaf> {
        let parts = self.parts(leaves);
        let mine: Vec<Leaf> = leaves
            .iter()
            .chain(&parts)
            .filter(|l| self.covered(l))
            .cloned()
            .collect();
        self.sent = mine.iter().map(|l| (l.path.clone(), (l.value.clone(), now))).collect();
        for (i, s) in self.subs.iter().enumerate() {
            self.next_sample[i] = now + s.sample_ns().unwrap_or(0);
        }
        if updates_only {
            Vec::new()
        } else {
            mine
        }
    }

    /// When the next look is due: the earliest sample, or the next look for changes.
    pub fn due(&self, now: u64) -> u64 {
        let changes = self.subs.iter().any(|s| {
            matches!(s.mode, SubMode::OnChange | SubMode::TargetDefined) || s.heartbeat_ns > 0 || s.suppress_redundant
        });
        let samples = self
            .subs
            .iter()
            .zip(&self.next_sample)
            .filter(|(s, _)| !matches!(s.mode, SubMode::OnChange))
            .map(|(_, t)| *t);
        samples
            .chain(changes.then_some(now + LOOK_NS))
            .min()
            .unwrap_or(now + LOOK_NS)
    }

    /// A look at the trees at `now`: the leaves whose sample is due, that changed, or whose
    /// heartbeat is due, and the paths sent before that are gone.
    pub fn look(&mut self, now: u64, leaves: &[Leaf]) -> Sent {
        let sampled: Vec<bool> = self.next_sample.iter().map(|t| *t <= now).collect();
        let parts = self.parts(leaves);
        let mut out = Sent::default();
        let mut seen = BTreeSet::new();
        for l in leaves.iter().chain(&parts) {
            let mut send = false;
            let mut covered = false;
            let last = self.sent.get(&l.path);
            let changed = last.is_none_or(|(v, _)| *v != l.value);
            for (i, s) in self.subs.iter().enumerate().filter(|(_, s)| s.path.covers(&l.path)) {
                covered = true;
                let beat = s.heartbeat_ns > 0 && last.is_none_or(|(_, t)| now >= t + s.heartbeat_ns);
                send |= match s.period(&l.value) {
                    Some(_) if s.suppress_redundant => sampled[i] && (changed || beat),
                    Some(_) => sampled[i],
                    None => changed || beat,
                };
            }
            if covered {
                seen.insert(&l.path);
                // A leaf not sent before goes at once, whatever its mode: an entry that
                // appears (a learned prefix) arrives whole, not its strings now and its
                // numbers at the next sample (ondatra's WatchAll saw a prefix of length 0).
                send |= last.is_none();
            }
            if send {
                self.sent.insert(l.path.clone(), (l.value.clone(), now));
                out.updates.push(l.clone());
            }
        }
        out.deletes = self.sent.keys().filter(|p| !seen.contains(p)).cloned().collect();
        out.deletes.sort();
        for p in &out.deletes {
            self.sent.remove(p);
        }
        for (i, due) in sampled.iter().enumerate() {
            if *due {
                let period = self.subs[i].sample_ns().unwrap_or(TARGET_SAMPLE_NS);
                // A late look does not make samples bunch up: the next is a period from now.
                self.next_sample[i] = (self.next_sample[i] + period).max(now + period / 2);
            }
        }
        out
    }

    /// The parts of JSON leaves the subscriptions reach below them ([`super::keyless::parts`]).
    fn parts(&self, leaves: &[Leaf]) -> Vec<Leaf> {
        let paths: Vec<&Path> = self.subs.iter().map(|s| &s.path).collect();
        super::keyless::parts(&paths, leaves)
    }

    fn covered(&self, l: &Leaf) -> bool {
        self.subs.iter().any(|s| s.path.covers(&l.path))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::testing::leaf;

    fn tree(pkts: u64, state: &str) -> Vec<Leaf> {
        vec![
            leaf("flows/flow[name=f1]/state/counters/in-pkts", Scalar::Uint(pkts)),
            leaf(
                "bgp-peers/bgp-peer[name=p1]/state/session-state",
                Scalar::Str(state.into()),
            ),
        ]
    }

    fn sub(p: &str, mode: SubMode) -> Sub {
        Sub::new(Path::parse(p).unwrap(), mode, false, 0).unwrap()
    }

    fn names(s: &Sent) -> Vec<String> {
        s.updates.iter().map(|l| l.path.to_string()).collect()
    }

    #[test]
    fn target_defined_samples_numbers_each_second_and_sends_states_when_they_change() {
        let mut s = Session::new(vec![
            sub("flows", SubMode::TargetDefined),
            sub("bgp-peers", SubMode::TargetDefined),
        ])
        .unwrap();
        assert_eq!(s.full(0, &tree(1, "IDLE"), false).len(), 2);
        assert_eq!(s.due(0), LOOK_NS, "expected the first look for changes after 250 ms");
        let quiet = s.look(LOOK_NS, &tree(5, "IDLE"));
        assert_eq!(
            names(&quiet),
            Vec::<String>::new(),
            "expected no sample before 1 s and no change"
        );
        let up = s.look(2 * LOOK_NS, &tree(9, "ESTABLISHED"));
        assert_eq!(names(&up), ["/bgp-peers/bgp-peer[name=p1]/state/session-state"]);
        let sample = s.look(TARGET_SAMPLE_NS, &tree(9, "ESTABLISHED"));
        assert_eq!(
            names(&sample),
            ["/flows/flow[name=f1]/state/counters/in-pkts"],
            "expected the counter sampled at 1 s, unchanged or not"
        );
        let mut more = tree(9, "ESTABLISHED");
        more.push(leaf("flows/flow[name=f2]/state/counters/in-pkts", Scalar::Uint(3)));
        let appeared = s.look(TARGET_SAMPLE_NS + LOOK_NS, &more);
        assert_eq!(
            names(&appeared),
            ["/flows/flow[name=f2]/state/counters/in-pkts"],
            "expected a new counter sent at once, not at the next sample"
        );
        assert_eq!(
            s.roots().unwrap(),
            BTreeSet::from(["bgp-peers".to_string(), "flows".to_string()])
        );
    }

    #[test]
    fn sample_with_its_interval_suppressed_when_redundant_and_heartbeats() {
        let p = Path::parse("flows/flow[name=*]/state/counters").unwrap();
        let quiet = Sub::new(
            p.clone(),
            SubMode::Sample {
                interval_ns: 200_000_000,
            },
            true,
            1_000_000_000,
        )
        .unwrap();
        let mut s = Session::new(vec![quiet]).unwrap();
        s.full(0, &tree(1, "IDLE"), false);
        assert_eq!(s.due(0), 200_000_000);
        assert!(
            s.look(200_000_000, &tree(1, "IDLE")).updates.is_empty(),
            "expected an unchanged sample suppressed"
        );
        assert_eq!(
            s.look(400_000_000, &tree(2, "IDLE")).updates.len(),
            1,
            "expected a changed sample sent"
        );
        assert_eq!(
            s.look(1_400_000_000, &tree(2, "IDLE")).updates.len(),
            1,
            "expected the heartbeat after 1 s"
        );
        let err = Sub::new(p, SubMode::Sample { interval_ns: 1_000 }, false, 0).unwrap_err();
        assert!(err.contains("1000 ns is under the 100000000 ns"), "got {err}");
    }

    #[test]
    fn on_change_sends_changes_and_deletes_what_is_gone() {
        let mut s = Session::new(vec![sub("/", SubMode::OnChange)]).unwrap();
        assert_eq!(s.roots(), None, "expected the root to reach every tree");
        s.full(0, &tree(1, "IDLE"), true);
        assert!(
            s.look(LOOK_NS, &tree(1, "IDLE")).updates.is_empty(),
            "expected no update without a change"
        );
        let gone = s.look(2 * LOOK_NS, &tree(2, "IDLE")[..1]);
        assert_eq!(names(&gone), ["/flows/flow[name=f1]/state/counters/in-pkts"]);
        assert_eq!(
            gone.deletes,
            [Path::parse("bgp-peers/bgp-peer[name=p1]/state/session-state").unwrap()]
        );
        let back = s.look(3 * LOOK_NS, &tree(2, "IDLE"));
        assert_eq!(
            names(&back),
            ["/bgp-peers/bgp-peer[name=p1]/state/session-state"],
            "expected a leaf that came back sent"
        );
    }

    #[test]
    fn too_many_paths_or_none_are_refused_with_the_fix() {
        let many = vec![sub("flows", SubMode::OnChange); MAX_PATHS + 1];
        let err = Session::new(many).unwrap_err();
        assert!(
            err.contains("1001 paths") && err.contains("Fix: subscribe to a wildcard"),
            "got {err}"
        );
        assert!(Session::new(vec![]).unwrap_err().contains("no path"));
    }
}
