//! An experiment over several ports (`ports` and `pairs`): each port's addresses read once,
//! the profile made per direction ([`gapless_core::experiment::ports::expand`]), where each
//! stream leaves and is metered, and each direction's figures of a trial.

use gapless_core::experiment::directions::DirectionRun;
use gapless_core::experiment::ports::{expand, stream_directions, Direction, DirectionAddrs};
use gapless_core::experiment::spec::Port;
use gapless_core::experiment::ExperimentSpec;
use gapless_core::experiment::TrialRun;
use gapless_core::meter::report::{MeterReport, StreamRx};
use gapless_core::result::{RunResult, StreamTx};
use gapless_core::ProfileSpec;
use gapless_io::kernel::addrs::{neighbour_mac, port_addrs};

use crate::spec::{PortRef, RxPort, RxSpec};
use crate::EngineError;

/// Where each stream of the experiment's profile leaves and is metered.
#[derive(Debug, Clone)]
pub struct PortsPlan {
    pub directions: Vec<Direction>,
    /// The direction of each stream of the profile.
    pub stream_dirs: Vec<usize>,
    /// The receiving ports, in order of first use, and each direction's index among them.
    pub rx: Vec<PortRef>,
    pub dir_rx: Vec<usize>,
    /// Every port, and its MAC.
    pub all: Vec<PortRef>,
    pub macs: Vec<String>,
}

/// The plan and the profile for `spec`'s ports; `base` is the user's profile. Reads every
/// port's addresses: a port that is not there is refused here, before any trial.
pub fn plan(spec: &ExperimentSpec, base: &ProfileSpec, label: &str) -> Result<(PortsPlan, ProfileSpec), EngineError> {
    let bad = |problem: String, fix: &str| EngineError::BadFile {
        path: label.to_string(),
        problem,
        fix: fix.to_string(),
    };
    let ports = spec.port_list();
    let directions = spec
        .directions()
        .map_err(|e| bad(e, "see the experiments guide's ports and pairs"))?;
    let addrs: Vec<(String, String)> = ports
        .iter()
        .enumerate()
        .map(|(i, p)| own_addrs(i, p).map_err(|(what, fix)| bad(what, &fix)))
        .collect::<Result<_, _>>()?;
    let dir_addrs: Vec<DirectionAddrs> = directions
        .iter()
        .map(|d| {
            let from = &ports[d.from];
            let eth_dst = from
                .next_hop_mac
                .clone()
                .or_else(|| {
                    // Another host's neighbours are not this host's to read.
                    let here = from.agent.is_none();
                    here.then(|| neighbour_mac(from.netns.as_deref(), &from.iface, &addrs[d.to].1))
                        .flatten()
                })
                .unwrap_or_else(|| addrs[d.to].0.clone());
            DirectionAddrs {
                eth_src: addrs[d.from].0.clone(),
                eth_dst,
                ip_src: addrs[d.from].1.clone(),
                ip_dst: addrs[d.to].1.clone(),
            }
        })
        .collect();
    let profile =
        expand(base, &directions, &dir_addrs).map_err(|e| bad(e, "see the experiments guide's ports and pairs"))?;
    let stream_dirs = stream_directions(base.streams.len(), directions.len());
    let (rx, dir_rx) = first_use(&ports, directions.iter().map(|d| d.to));
    let plan = PortsPlan {
        directions,
        stream_dirs,
        rx,
        dir_rx,
        all: ports.iter().map(PortRef::from).collect(),
        macs: addrs.iter().map(|a| a.0.clone()).collect(),
    };
    Ok((plan, profile))
}

/// Port `i`'s MAC and IP address: as given, else as the kernel has them.
fn own_addrs(i: usize, p: &Port) -> Result<(String, String), (String, String)> {
    let read = || {
        port_addrs(p.netns.as_deref(), &p.iface).map_err(|e| {
            (
                format!("ports[{i}] ({}): {e}", PortRef::from(p).source()),
                "name an interface that exists (gapless testbed up --ports N makes N ends)".to_string(),
            )
        })
    };
    let kernel = match (&p.mac, &p.ip) {
        (Some(_), Some(_)) => None,
        _ => Some(read()?),
    };
    let mac = p.mac.clone().or_else(|| kernel.as_ref().map(|k| k.mac.clone()));
    let ip =
        p.ip.clone()
            .or_else(|| kernel.as_ref().and_then(|k| k.ipv4).map(|a| a.to_string()));
    match (mac, ip) {
        (Some(m), Some(a)) => Ok((m, a)),
        _ => Err((
            format!("ports[{i}] ({}) has no IPv4 address", p.iface),
            format!("give the port's ip = \"...\", or add an address to {}", p.iface),
        )),
    }
}

impl From<&Port> for PortRef {
    fn from(p: &Port) -> PortRef {
        PortRef {
            iface: p.iface.clone(),
            netns: p.netns.clone(),
        }
    }
}

/// The distinct ports `of` names, in order of first use, and each one's index among them.
fn first_use(ports: &[Port], of: impl Iterator<Item = usize>) -> (Vec<PortRef>, Vec<usize>) {
    let mut used: Vec<usize> = Vec::new();
    let idx = of
        .map(|p| match used.iter().position(|&u| u == p) {
            Some(k) => k,
            None => {
                used.push(p);
                used.len() - 1
            }
        })
        .collect();
    (used.iter().map(|&p| PortRef::from(&ports[p])).collect(), idx)
}

/// A trial's share of the plan (a trial with loads sends only some directions): the ports
/// that send its streams, and each kept stream's index among those ports.
#[derive(Debug, Clone, PartialEq)]
pub struct TrialPorts {
    pub tx: Vec<PortRef>,
    pub stream_tx: Vec<usize>,
}

impl PortsPlan {
    /// Each stream's (from, to), as indices into the experiment's ports.
    pub fn stream_pairs(&self) -> Vec<(usize, usize)> {
        let d = &self.directions;
        self.stream_dirs.iter().map(|&k| (d[k].from, d[k].to)).collect()
    }

    /// The ports that send the `kept` streams, in order of first use.
    pub fn trial_ports(&self, kept: &[usize]) -> TrialPorts {
        let from = |k: usize| self.directions[self.stream_dirs[k]].from;
        let mut senders: Vec<usize> = Vec::new();
        let stream_tx = kept
            .iter()
            .map(|&k| match senders.iter().position(|&p| p == from(k)) {
                Some(i) => i,
                None => {
                    senders.push(from(k));
                    senders.len() - 1
                }
            })
            .collect();
        TrialPorts {
            tx: senders.iter().map(|&p| self.all[p].clone()).collect(),
            stream_tx,
        }
    }

    /// Port `port`'s index among the receiving ports (by index: two agents' ports may have
    /// the same interface name).
    pub fn rx_index(&self, port: usize) -> Option<usize> {
        let d = self.directions.iter().position(|d| d.to == port)?;
        self.dir_rx.get(d).copied()
    }

    /// The ports the `kept` streams go to that send none of them.
    pub fn silent_receivers(&self, kept: &[usize]) -> Vec<usize> {
        let pairs = self.stream_pairs();
        let sends = |p: usize| kept.iter().any(|&k| pairs[k].0 == p);
        let mut out: Vec<usize> = kept.iter().map(|&k| pairs[k].1).filter(|&p| !sends(p)).collect();
        out.sort_unstable();
        out.dedup();
        out
    }

    /// The meter: every receiving port, read as one.
    pub fn rx_spec(&self) -> RxSpec {
        let mut rx = RxSpec::new(self.rx[0].iface.clone());
        rx.netns = self.rx[0].netns.clone();
        rx.more = self.rx[1..].iter().map(|p| RxPort::parse(&p.iface)).collect();
        for (m, p) in rx.more.iter_mut().zip(&self.rx[1..]) {
            m.netns = p.netns.clone();
        }
        rx
    }

    /// Each direction's figures of a trial that sent the `kept` streams (`res.streams[j]`
    /// is stream `kept[j]`): its streams' frames after the warm-up. Directions with no kept
    /// stream are left out.
    pub fn directions_of(&self, sent: &[StreamTx], rx: Option<&MeterReport>, kept: &[usize]) -> Vec<DirectionRun> {
        self.directions
            .iter()
            .enumerate()
            .filter(|(d, _)| kept.iter().any(|&k| self.stream_dirs.get(k) == Some(d)))
            .map(|(d, dir)| {
                let streams = |k: &usize| self.stream_dirs.get(*k) == Some(&d);
                let mine: Vec<_> = (0..sent.len())
                    .filter(|&j| kept.get(j).is_some_and(streams))
                    .map(|j| &sent[j])
                    .collect();
                // A frame the kernel refused was offered and lost, as in the aggregate.
                let sent: u64 = mine
                    .iter()
                    .map(|s| s.sent_frames.saturating_sub(s.warmup_frames) + s.send_errors)
                    .sum();
                let refused = mine.iter().map(|s| s.send_errors).sum();
                let got: Vec<&StreamRx> = rx
                    .map(|m| {
                        m.streams
                            .iter()
                            .filter(|s| s.id.is_some_and(|id| streams(&(id as usize))))
                            .collect()
                    })
                    .unwrap_or_default();
                let received = got.iter().map(|s| at_own_port(s, self.dir_rx[d])).sum();
                DirectionRun {
                    direction: dir.name.clone(),
                    sent,
                    received,
                    loss_ratio: DirectionRun::ratio(sent, received),
                    rx_pps: own_port_rate(&got, self.dir_rx[d]),
                    latency: got.iter().find_map(|s| s.latency.clone()),
                    misdelivered: misdelivered(&got, self.dir_rx[d]),
                    refused,
                }
            })
            .collect()
    }
}

/// A trial run on several hosts, as one: each sending port's result with the profile's
/// streams it sent (indices into `kept`'s profile order: `kept[j]` is sent as some port's
/// stream), and each receiving port's meter (its index into `rx`).
pub struct HostsTrial<'a> {
    pub kept: &'a [usize],
    pub sent: Vec<(Vec<usize>, RunResult)>,
    pub metered: Vec<(usize, MeterReport)>,
}

impl PortsPlan {
    /// The trial's figures: the senders' counts added up, each direction's frames at its
    /// own receiving port (a port's meter knows only its own), the verdicts joined.
    pub fn trial_across_hosts(&self, t: &HostsTrial<'_>) -> TrialRun {
        // Every sent stream in the trial's profile order.
        let mut streams = vec![StreamTx::default(); t.kept.len()];
        for (js, r) in &t.sent {
            for (s, &j) in r.streams.iter().zip(js) {
                if let Some(slot) = streams.get_mut(j) {
                    *slot = s.clone();
                }
            }
        }
        let own = |r: usize, id: Option<u16>| {
            id.and_then(|id| self.stream_dirs.get(id as usize))
                .is_some_and(|&d| self.dir_rx[d] == r)
        };
        let mut rx = t.metered.first().map(|m| m.1.clone()).unwrap_or_default();
        rx.streams = t
            .metered
            .iter()
            .flat_map(|(r, m)| m.streams.iter().filter(move |s| own(*r, s.id)).cloned())
            .collect();
        rx.warmup_frames = t.metered.iter().map(|m| m.1.warmup_frames).sum();
        let results = || t.sent.iter().map(|x| &x.1);
        let not_held = results().find(|r| r.verdict.held == Some(false));
        let mut run = TrialRun {
            sent_total: results().map(|r| r.sent_frames).sum(),
            warmup_sent: results().flat_map(|r| &r.streams).map(|s| s.warmup_frames).sum(),
            warmup_received: rx.warmup_frames,
            late_over_gap: results().map(|r| r.lateness.late_over_one_gap).sum(),
            late_max_ns: results().map(|r| r.lateness.max_ns).max().unwrap_or(0),
            stall_ns: results()
                .map(|r| crate::trials::stalls_ns(&r.verdict))
                .max()
                .unwrap_or(0),
            schedule: not_held.map_or("held".into(), |r| crate::trials::schedule_text(&r.verdict)),
            held: not_held.is_none(),
            warnings: results().flat_map(|r| r.warnings.clone()).collect(),
            ..TrialRun::default()
        };
        run.sent = run.sent_total.saturating_sub(run.warmup_sent) + results().map(|r| r.send_errors).sum::<u64>();
        with_directions(&mut run, self.directions_of(&streams, Some(&rx), t.kept));
        run
    }
}

/// A trial over several ports: what each direction delivered to its own port is what the
/// aggregate received; latency is each direction's own.
pub(crate) fn with_directions(run: &mut TrialRun, dirs: Vec<DirectionRun>) {
    run.received = dirs.iter().map(|d| d.received).sum();
    run.rx_pps = dirs.iter().map(|d| d.rx_pps).sum();
    run.latency = None;
    for d in dirs.iter().filter(|d| d.misdelivered > 0) {
        run.warnings.push(format!(
            "{}: {} frames also or only reached another port than their own (flooded or misrouted); only those at their own port count as received",
            d.direction, d.misdelivered
        ));
    }
    run.directions = dirs;
}

/// A stream's distinct frames, counted only as far as its own receiving port took them
/// (a frame that reached only another port was not delivered).
fn at_own_port(s: &StreamRx, own: usize) -> u64 {
    let unique = s.seq.as_ref().map_or(s.rx_frames, |q| q.unique);
    match s.rx_ports.get(own) {
        Some(t) => unique.min(t.rx_frames),
        None if s.rx_ports.is_empty() => unique,
        None => 0,
    }
}

/// Frames per second of the streams at their own port, between its first and last
/// arrival (a flooded copy on another port is not forwarding).
fn own_port_rate(got: &[&StreamRx], own: usize) -> Option<f64> {
    let tallies: Vec<(u64, u64, u64)> = got
        .iter()
        .map(|s| match s.rx_ports.get(own) {
            Some(t) => (t.rx_frames, t.first_rx_ns, t.last_rx_ns),
            None => (s.rx_frames, s.first_rx_ns, s.last_rx_ns),
        })
        .filter(|t| t.0 > 1)
        .collect();
    let first = tallies.iter().map(|t| t.1).min()?;
    let last = tallies.iter().map(|t| t.2).max()?;
    let n: u64 = tallies.iter().map(|t| t.0).sum();
    (last > first).then(|| (n - 1) as f64 * 1e9 / (last - first) as f64)
}

/// Frames of a direction that arrived on another receiving port than its own.
fn misdelivered(got: &[&StreamRx], own: usize) -> u64 {
    got.iter()
        .flat_map(|s| s.rx_ports.iter().enumerate().filter(|(p, _)| *p != own))
        .map(|(_, t)| t.rx_frames)
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Four ports in full mesh, one stream per direction.
    fn mesh() -> PortsPlan {
        let names = ["a", "b", "c", "d"];
        let pairs = gapless_core::experiment::ports::Pairs::Named(gapless_core::experiment::ports::PairsKind::FullMesh);
        let directions = gapless_core::experiment::ports::directions(&names, &pairs).unwrap();
        let all: Vec<PortRef> = names
            .iter()
            .map(|n| PortRef {
                iface: n.to_string(),
                netns: None,
            })
            .collect();
        PortsPlan {
            stream_dirs: (0..directions.len()).collect(),
            dir_rx: directions.iter().map(|d| d.to).collect(),
            directions,
            rx: all.clone(),
            macs: vec![String::new(); 4],
            all,
        }
    }

    #[test]
    fn a_trial_of_some_directions_sends_from_their_ports_only_and_names_the_silent_receivers() {
        let p = mesh();
        let pairs = p.stream_pairs();
        let pick = |want: &[(usize, usize)]| -> Vec<usize> {
            want.iter()
                .map(|w| pairs.iter().position(|x| x == w).unwrap())
                .collect()
        };
        // Congestion control: A→C, A→D, B→C.
        let kept = pick(&[(0, 2), (0, 3), (1, 2)]);
        let t = p.trial_ports(&kept);
        let tx: Vec<&str> = t.tx.iter().map(|r| r.iface.as_str()).collect();
        assert_eq!(tx, ["a", "b"], "expected only A and B to send");
        assert_eq!(t.stream_tx, [0, 0, 1]);
        assert_eq!(p.silent_receivers(&kept), [2, 3], "C and D only receive");
        let all: Vec<usize> = (0..pairs.len()).collect();
        assert_eq!(p.trial_ports(&all).tx.len(), 4);
        assert!(p.silent_receivers(&all).is_empty());
    }

    #[test]
    fn a_receiving_port_is_found_by_its_index_not_its_interface_name() {
        let mut p = mesh();
        for r in p.all.iter_mut().chain(p.rx.iter_mut()) {
            r.iface = "eth1".into(); // four hosts, each port eth1
        }
        let got: Vec<_> = (0..4).map(|i| p.rx_index(i)).collect();
        assert_eq!(
            got,
            [Some(0), Some(1), Some(2), Some(3)],
            "expected each port its own receiving index"
        );
    }
}
