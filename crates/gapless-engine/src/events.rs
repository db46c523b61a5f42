//! Events the tester makes during a run: a link set down or up, a route deleted or added, on
//! any interface or in any namespace the user names (a DUT's too). Each is made over
//! rtnetlink at its time after the run's start and stamped when the kernel acknowledged it
//! (`gapless_io::kernel::rtnl`), on the clock of the meter's RX stamps, so that it can be set
//! beside the loss episodes it causes. A link event the user made does not end the run; a
//! link lost that nobody asked for still does ([`Expected`]).
//!
//! The text form, one event per string (the CLI's `--event`):
//!
//! ```text
//! 1.2s link down NETNS/IFACE        (or IFACE, in the run's namespace)
//! 1.45s link up NETNS/IFACE
//! 2s route del NETNS PREFIX         (NETNS "-": the run's namespace)
//! 2.5s route add NETNS PREFIX via ADDRESS
//! 2.5s route add NETNS PREFIX dev IFACE
//! ```

use std::net::IpAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::error::EngineError;

/// One event: what, and when after the run's start.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EventSpec {
    /// Seconds after the run's start.
    pub at_s: f64,
    #[serde(flatten)]
    pub action: EventAction,
}

/// What an event does.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum EventAction {
    /// An interface set administratively up or down.
    Link {
        netns: Option<String>,
        iface: String,
        up: bool,
    },
    /// A route deleted, or added through `via` or out of `dev`, in the main table.
    Route {
        netns: Option<String>,
        add: bool,
        prefix: String,
        via: Option<IpAddr>,
        #[serde(default)]
        dev: Option<String>,
    },
}

pub use gapless_core::result::EventRecord;

fn bad(text: &str, why: impl std::fmt::Display) -> EngineError {
    EngineError::BadEvent {
        event: text.to_string(),
        why: why.to_string(),
    }
}

impl EventSpec {
    /// Reads the text form (see the module's doc).
    pub fn parse(text: &str) -> Result<EventSpec, EngineError> {
        let w: Vec<&str> = text.split_whitespace().collect();
        let at_s = w
            .first()
            .and_then(|t| t.strip_suffix('s'))
            .and_then(|t| {
                t.strip_suffix('m')
                    .map_or(t.parse::<f64>().ok(), |ms| ms.parse::<f64>().ok().map(|v| v / 1e3))
            })
            .filter(|t| t.is_finite() && *t >= 0.0)
            .ok_or_else(|| {
                bad(
                    text,
                    "it starts with its time after the run's start, e.g. 1.2s or 250ms",
                )
            })?;
        let action = match w.get(1..).unwrap_or_default() {
            ["link", st @ ("up" | "down"), target] => {
                let (netns, iface) = netns_iface(target);
                EventAction::Link {
                    netns,
                    iface,
                    up: *st == "up",
                }
            }
            ["route", op @ ("del" | "add"), ns, prefix, rest @ ..] => {
                let (via, dev) = match (*op, rest) {
                    ("del", []) => (None, None),
                    ("add", ["via", gw]) => {
                        let gw = gw
                            .parse::<IpAddr>()
                            .map_err(|_| bad(text, format!("{gw:?} is not an IP address")))?;
                        (Some(gw), None)
                    }
                    ("add", ["dev", d]) => (None, Some(d.to_string())),
                    _ => return Err(bad(
                        text,
                        "a route event is `route del NETNS PREFIX` or `route add NETNS PREFIX via ADDRESS|dev IFACE`",
                    )),
                };
                gapless_io::kernel::rtnl::parse_prefix(prefix).map_err(|e| bad(text, e))?;
                EventAction::Route {
                    netns: (*ns != "-").then(|| ns.to_string()),
                    add: *op == "add",
                    prefix: prefix.to_string(),
                    via,
                    dev,
                }
            }
            _ => {
                return Err(bad(
                    text,
                    "give `TIME link up|down [NETNS/]IFACE` or `TIME route del|add NETNS PREFIX [via ADDRESS]`",
                ))
            }
        };
        Ok(EventSpec { at_s, action })
    }

    /// The event in its text form.
    pub fn text(&self) -> String {
        let at = self.at_s;
        match &self.action {
            EventAction::Link { netns, iface, up } => {
                let target = netns.as_ref().map_or(iface.clone(), |n| format!("{n}/{iface}"));
                format!("{at}s link {} {target}", if *up { "up" } else { "down" })
            }
            EventAction::Route {
                netns,
                add,
                prefix,
                via,
                dev,
            } => {
                let ns = netns.as_deref().unwrap_or("-");
                let via = via.map_or(String::new(), |v| format!(" via {v}"));
                let dev = dev.as_ref().map_or(String::new(), |d| format!(" dev {d}"));
                format!(
                    "{at}s route {} {ns} {prefix}{via}{dev}",
                    if *add { "add" } else { "del" }
                )
            }
        }
    }

    /// The namespace and interface a link event acts on.
    fn link(&self) -> Option<(Option<&str>, &str)> {
        match &self.action {
            EventAction::Link { netns, iface, .. } => Some((netns.as_deref(), iface)),
            EventAction::Route { .. } => None,
        }
    }
}

/// Checks every event before any frame is sent: its namespace and interface exist, and it
/// comes before the run's planned end (`planned_ns`, when every stream has an end).
pub fn check(events: &[EventSpec], run_netns: Option<&str>, planned_ns: Option<u64>) -> Result<(), EngineError> {
    for e in events {
        let text = e.text();
        if let Some(end) = planned_ns.filter(|&end| e.at_s * 1e9 >= end as f64) {
            return Err(bad(
                &text,
                format!(
                    "it comes after the run's planned end at {:.3} s; give a time within the run, or run longer",
                    end as f64 / 1e9
                ),
            ));
        }
        let ns = match &e.action {
            EventAction::Link { netns, .. } | EventAction::Route { netns, .. } => netns.as_deref().or(run_netns),
        };
        if let Some(n) = ns {
            if !std::path::Path::new(&format!("/var/run/netns/{n}")).exists() {
                return Err(bad(
                    &text,
                    format!("network namespace {n:?} does not exist (`ip netns list` lists them)"),
                ));
            }
        }
        if let Some((_, iface)) = e.link() {
            let name = iface.to_string();
            gapless_io::kernel::nic::in_netns(ns, move || gapless_io::kernel::nic::if_index(&name))
                .map_err(|err| bad(&text, err))?;
        }
    }
    Ok(())
}

/// The run's own TX link while a user's link event holds it down: the link watcher and the
/// backend leave such a link alone, so the run goes on.
#[derive(Debug, Default)]
pub struct Expected {
    /// From just before the user's link down until the link reads up after its link up.
    down: AtomicBool,
    /// From just before the user's link down on the run's own link (or from the first send
    /// a held-down link refused) until the link reads up again: the send loops do not even
    /// try (a refused send would first wait for the link's state).
    held: AtomicBool,
    /// Frames not sent while held (counted as sent, and lost).
    pub dropped: std::sync::atomic::AtomicU64,
}

impl Expected {
    /// Whether the run's TX link is down (or coming back) because a user's event set it so.
    pub fn down(&self) -> bool {
        self.down.load(Ordering::Acquire)
    }

    /// Whether a user's event holds the run's TX link down now.
    #[inline]
    pub fn held(&self) -> bool {
        self.held.load(Ordering::Relaxed)
    }

    /// A user is about to set a link down: faults of the run's link are taken as the user's
    /// from now on, and when it is the run's own link (`own`), the send loops stop trying.
    pub fn hold(&self, own: bool) {
        self.down.store(true, Ordering::Release);
        if own {
            self.held.store(true, Ordering::Release);
        }
    }

    /// A send the link refused while down: the loops stop trying until the link is back.
    pub(crate) fn refused(&self, n: usize) {
        self.held.store(true, Ordering::Release);
        self.dropped.fetch_add(n as u64, Ordering::Relaxed);
    }

    /// The user set the link up again: the loops send again once `iface` (in `netns`) reads
    /// up, or after [`UP_GRACE`], on a thread of its own.
    pub fn release(self: &Arc<Self>, netns: Option<String>, iface: String) {
        let me = self.clone();
        let t0 = Instant::now();
        let _ = std::thread::Builder::new().name("link-release".into()).spawn(move || {
            let up = || {
                gapless_io::kernel::nic::in_netns(netns.as_deref(), || Ok(gapless_io::kernel::nic::link_state(&iface)))
            };
            while t0.elapsed() < UP_GRACE && !matches!(up(), Ok(gapless_io::kernel::nic::LinkState::Up)) {
                std::thread::sleep(Duration::from_millis(2));
            }
            me.held.store(false, Ordering::Release);
            me.down.store(false, Ordering::Release);
        });
    }
}

/// How long after a user's `link up` a link still found down is taken as the user's, at
/// most: the kernel's link watch updates the operational state at most once a second, so a
/// link reads "no carrier" for up to a second after it is up. It ends sooner, as soon as the
/// link reads up ([`Expected::release`]).
const UP_GRACE: Duration = Duration::from_millis(2500);

/// Makes the events at their times after `t0` (in time order), until either of `ends` is
/// raised (a stop, the sending's end); records what was made in `out`. `tx` is the run's
/// own TX link (namespace, interface): a user's link down on any link holds the run's link
/// faults as the user's ([`Expected::hold`]; on its own link the loops stop trying), until
/// that link is up again ([`Expected::release`]).
pub fn run(
    mut events: Vec<EventSpec>,
    t0: Instant,
    ends: [&AtomicBool; 2],
    tx: (Option<&str>, &str),
    expected: &Arc<Expected>,
    out: &Mutex<Vec<EventRecord>>,
) {
    let stop = || ends.iter().any(|e| e.load(Ordering::Relaxed));
    events.sort_by(|a, b| a.at_s.total_cmp(&b.at_s));
    for e in events.iter() {
        let due = t0 + Duration::from_secs_f64(e.at_s);
        while Instant::now() < due {
            if stop() {
                return;
            }
            std::thread::sleep((due - Instant::now()).min(Duration::from_millis(1)));
        }
        let link = e.link().map(|(ns, i)| (ns.or(tx.0), i));
        let down = matches!(e.action, EventAction::Link { up: false, .. });
        if let (Some((ns, i)), true) = (link, down) {
            expected.hold(i == tx.1 && ns == tx.0);
        }
        let made = make(e, tx.0);
        if let (Some((ns, i)), false) = (link, down) {
            expected.release(ns.map(str::to_string), i.to_string());
        }
        out.lock().unwrap_or_else(|p| p.into_inner()).push(record(e, made));
    }
}

fn make(e: &EventSpec, run_netns: Option<&str>) -> Result<gapless_io::kernel::rtnl::Change, String> {
    use gapless_io::kernel::rtnl;
    let r = match &e.action {
        EventAction::Link { netns, iface, up } => rtnl::set_link(netns.as_deref().or(run_netns), iface, *up),
        EventAction::Route {
            netns,
            add,
            prefix,
            via,
            dev,
        } => rtnl::route(netns.as_deref().or(run_netns), *add, prefix, *via, dev.as_deref()),
    };
    r.map_err(|err| err.to_string())
}

fn record(e: &EventSpec, made: Result<gapless_io::kernel::rtnl::Change, String>) -> EventRecord {
    let (sent_ns, acked_ns, error) = match made {
        Ok(c) => (c.sent_ns, c.acked_ns, None),
        Err(why) => (0, 0, Some(why)),
    };
    EventRecord {
        at_s: e.at_s,
        what: e.text(),
        sent_ns,
        acked_ns,
        stamp: "the rtnetlink ACK".into(),
        error,
    }
}

/// The run's planned length (ns) when every stream has an end: its offset, and its
/// duration or its count at its mean gap.
pub fn planned_ns(profile: &gapless_core::Profile) -> Option<u64> {
    let ends: Option<Vec<u64>> = profile
        .streams
        .iter()
        .map(|s| {
            let len = s
                .duration_ns
                .or_else(|| s.count.map(|n| (n as f64 * s.mean_gap_ns()) as u64))?;
            Some(s.start_offset_ns + len)
        })
        .collect();
    ends?.into_iter().max()
}

/// `[NETNS/]IFACE`: the namespace, if given, and the interface.
pub fn netns_iface(text: &str) -> (Option<String>, String) {
    match text.split_once('/') {
        Some((ns, i)) => (Some(ns.to_string()), i.to_string()),
        None => (None, text.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_text_form_reads_back_and_bad_events_say_what_to_write() {
        let e = EventSpec::parse("1.2s link down gl-tx/gl-tx0").unwrap();
        assert_eq!(
            e.action,
            EventAction::Link {
                netns: Some("gl-tx".into()),
                iface: "gl-tx0".into(),
                up: false
            }
        );
        assert_eq!(e.at_s, 1.2);
        assert_eq!(e.text(), "1.2s link down gl-tx/gl-tx0");
        let r = EventSpec::parse("250ms route del gl-dut 198.18.1.0/24").unwrap();
        assert_eq!(
            (r.at_s, r.text()),
            (0.25, "0.25s route del gl-dut 198.18.1.0/24".to_string())
        );
        let a = EventSpec::parse("2s route add - 198.18.1.0/24 via 198.18.0.1").unwrap();
        assert_eq!(a.text(), "2s route add - 198.18.1.0/24 via 198.18.0.1");
        let d = EventSpec::parse("2s route add gl-dut 198.18.0.2/32 dev gl-d1").unwrap();
        assert_eq!(d.text(), "2s route add gl-dut 198.18.0.2/32 dev gl-d1");
        for (bad, want) in [
            ("link down x", "starts with its time"),
            ("1s link sideways x", "TIME link up|down"),
            ("1s route del ns 198.18.1.0/99", "prefix length"),
            ("1s route add ns 10.0.0.0/8", "via ADDRESS|dev IFACE"),
            ("-1s link up x", "starts with its time"),
        ] {
            let got = EventSpec::parse(bad).unwrap_err().to_string();
            assert!(got.contains(want), "{bad}: expected {want:?} in the error; got {got}");
        }
        let late = check(&[e], None, Some(1_000_000_000)).unwrap_err().to_string();
        assert!(late.contains("after the run's planned end at 1.000 s"), "{late}");
        let no_ns = check(&[EventSpec::parse("0.5s link up nope-ns/x").unwrap()], None, None).unwrap_err();
        assert!(no_ns.to_string().contains("\"nope-ns\" does not exist"), "{no_ns}");
    }
}
