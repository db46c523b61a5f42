//! The clocks of several hosts (issue 28's first part): a host's clock state as the kernel,
//! linuxptp and chrony report it, its offset to another host's clock from 4-timestamp
//! exchanges over a control channel, and whether a latency measured across the two can be
//! believed. Sans IO: `gapless_io::kernel::clock` reads the state, the server answers the
//! exchanges, and whoever measures (the CLI today, the controller of a distributed run next)
//! calls [`estimate`].

use serde::{Deserialize, Serialize};

/// One exchange, in ns on each host's wall clock: `t1` sent and `t4` answered on the
/// measuring host, `t2` received and `t3` answered on the other.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Exchange {
    pub t1: i64,
    pub t2: i64,
    pub t3: i64,
    pub t4: i64,
}

impl Exchange {
    /// Round trip less the other host's time answering.
    pub fn rtt(&self) -> i64 {
        (self.t4 - self.t1) - (self.t3 - self.t2)
    }

    /// The other clock minus this one, were both directions equally long.
    pub fn offset(&self) -> i64 {
        ((self.t2 - self.t1) + (self.t3 - self.t4)).div_euclid(2)
    }
}

/// The other clock's offset (its time minus ours) and how far off that can be: the true
/// offset lies in `offset_ns ± bound_ns` whatever the two directions' delays were, because
/// the exchange's request and reply each took between 0 and the round trip.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Offset {
    pub offset_ns: i64,
    pub bound_ns: i64,
    /// The round trip of the exchange used (the shortest).
    pub rtt_ns: i64,
    /// Exchanges made, of which the one with the shortest round trip was used.
    pub exchanges: usize,
}

/// Makes `n` exchanges: `now` reads this host's clock (ns), `ask` makes one round trip and
/// returns the other host's `t2` and `t3`; the first error ends it.
pub fn exchange<E>(
    n: usize,
    now: impl Fn() -> i64,
    mut ask: impl FnMut() -> Result<(i64, i64), E>,
) -> Result<Vec<Exchange>, E> {
    (0..n)
        .map(|_| {
            let t1 = now();
            let (t2, t3) = ask()?;
            Ok(Exchange { t1, t2, t3, t4: now() })
        })
        .collect()
}

/// The offset from the exchange with the shortest round trip (the one least delayed by
/// queues and stalls, so the tightest bound). `None` without a usable exchange (a round
/// trip below zero means a clock stepped during it).
pub fn estimate(xs: &[Exchange]) -> Option<Offset> {
    let best = xs.iter().filter(|x| x.rtt() >= 0).min_by_key(|x| x.rtt())?;
    let rtt = best.rtt();
    Some(Offset {
        offset_ns: best.offset(),
        // Half the round trip, rounded up, and the half ns the integer offset drops.
        bound_ns: rtt / 2 + rtt % 2 + 1,
        rtt_ns: rtt,
        exchanges: xs.len(),
    })
}

/// A host's clock as its synchronisation daemons and kernel report it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ClockState {
    /// The kernel's STA_UNSYNC flag (adjtimex): nothing disciplines the clock.
    pub unsynchronised: bool,
    /// The kernel's maximum and estimated error (adjtimex), in ns.
    pub maxerror_ns: i64,
    pub esterror_ns: i64,
    /// linuxptp, where `pmc` answers.
    pub ptp: Option<PtpState>,
    /// chrony, where `chronyc` answers.
    pub chrony: Option<ChronyState>,
}

/// What linuxptp's `pmc` says of the local clock.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PtpState {
    /// The port's state: SLAVE when it follows a master (also MASTER, LISTENING, FAULTY, ...).
    pub port_state: String,
    /// offsetFromMaster, ns.
    pub offset_from_master_ns: Option<f64>,
}

/// What `chronyc -c tracking` says.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChronyState {
    pub reference: String,
    pub stratum: u32,
    /// System time minus true time, ns (chrony's estimate).
    pub system_offset_ns: f64,
    pub rms_offset_ns: f64,
    /// "Normal", or the leap status that says it is not synchronised.
    pub leap_status: String,
}

impl ClockState {
    /// Why this clock cannot be trusted across hosts, if it cannot.
    pub fn untrusted(&self) -> Option<String> {
        if self.unsynchronised {
            return Some("the kernel says the clock is not synchronised (adjtimex STA_UNSYNC)".into());
        }
        if let Some(p) = &self.ptp {
            if !matches!(p.port_state.as_str(), "SLAVE" | "MASTER" | "GRAND_MASTER") {
                return Some(format!("linuxptp's port is {}, not following a master", p.port_state));
            }
        }
        if let Some(c) = &self.chrony {
            if c.leap_status != "Normal" {
                return Some(format!("chrony's leap status is {:?}", c.leap_status));
            }
        }
        None
    }
}

/// `chronyc -c tracking`: comma-separated reference id, name, stratum, reference time,
/// system time offset (s), last offset (s), RMS offset (s), frequency, ..., leap status.
pub fn parse_chrony_tracking(csv: &str) -> Option<ChronyState> {
    let f: Vec<&str> = csv.trim().split(',').collect();
    if f.len() < 14 {
        return None;
    }
    let s = |i: usize| f[i].trim().parse::<f64>().ok();
    Some(ChronyState {
        reference: f[1].trim().to_string(),
        stratum: f[2].trim().parse().ok()?,
        system_offset_ns: s(4)? * 1e9,
        rms_offset_ns: s(6)? * 1e9,
        leap_status: f[13].trim().to_string(),
    })
}

/// `pmc -u -b 0 'GET PORT_DATA_SET' 'GET CURRENT_DATA_SET'`: the first port's state and
/// the offset from the master.
pub fn parse_pmc(text: &str) -> Option<PtpState> {
    let value = |key: &str| {
        text.lines()
            .map(str::trim)
            .find_map(|l| l.strip_prefix(key).map(|v| v.trim().to_string()))
    };
    Some(PtpState {
        port_state: value("portState")?,
        offset_from_master_ns: value("offsetFromMaster").and_then(|v| v.parse().ok()),
    })
}

impl ClockState {
    /// How far this clock may be from true time, by its own state: linuxptp's offset from
    /// its master, else chrony's offset plus its RMS offset, else the kernel's maxerror;
    /// None when it is untrusted.
    pub fn error_bound_ns(&self) -> Option<i64> {
        if self.untrusted().is_some() {
            return None;
        }
        if let Some(o) = self.ptp.as_ref().and_then(|p| p.offset_from_master_ns) {
            return Some(o.abs().ceil() as i64);
        }
        if let Some(c) = &self.chrony {
            return Some((c.system_offset_ns.abs() + c.rms_offset_ns.abs()).ceil() as i64);
        }
        Some(self.maxerror_ns)
    }
}

/// How far a latency stamped on host `tx`'s clock and received on host `rx`'s can be off:
/// both hosts' offsets to the controller (`tx_off`, `rx_off`) say the RX clock is
/// `rx - tx` ahead, to within the sum of their bounds; the clocks' own states, when both are
/// trusted, say they are within the sum of their error bounds. The tighter of the two holds;
/// states that the exchanges contradict are not believed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CrossBound {
    /// The bound used, ns.
    pub bound_ns: i64,
    /// Where it comes from: "the clocks' state" or "the controller's exchanges".
    pub from: String,
    /// The RX clock minus the TX clock, as the exchanges measured it, and that measure's bound.
    pub measured_ns: i64,
    pub measured_bound_ns: i64,
    /// The states' bound, when both clocks are trusted.
    pub state_bound_ns: Option<i64>,
    /// Why the states are not believed, when the exchanges contradict them.
    pub contradiction: Option<String>,
}

/// See [`CrossBound`].
pub fn cross_bound(tx_off: &Offset, rx_off: &Offset, tx: &ClockState, rx: &ClockState) -> CrossBound {
    let d = rx_off.offset_ns - tx_off.offset_ns;
    let m = rx_off.bound_ns + tx_off.bound_ns;
    let measured = d.abs() + m;
    let state = tx.error_bound_ns().zip(rx.error_bound_ns()).map(|(a, b)| a + b);
    let contradiction = state.filter(|s| d.abs() - m > *s).map(|s| {
        format!(
            "the clocks are at least {} ns apart by the controller's exchanges, while their states claim ±{s} ns",
            d.abs() - m
        )
    });
    let (bound_ns, from) = match state {
        Some(s) if contradiction.is_none() && s < measured => (s, "the clocks' state"),
        _ => (measured, "the controller's exchanges"),
    };
    CrossBound {
        bound_ns,
        from: from.into(),
        measured_ns: d,
        measured_bound_ns: m,
        state_bound_ns: state,
        contradiction,
    }
}

/// Why a latency between hosts with clocks `a` and `b`, whose offset is known to within
/// `bound_ns`, cannot be believed at a median of `median_ns`: either clock untrusted, or the
/// bound over 10 % of the median.
pub fn cross_host_doubt(a: &ClockState, b: &ClockState, bound_ns: i64, median_ns: i64) -> Option<String> {
    if let Some(why) = a.untrusted().or_else(|| b.untrusted()) {
        return Some(why);
    }
    (bound_ns as f64 > 0.1 * median_ns.unsigned_abs() as f64).then(|| {
        format!("the clocks' offset is known to ±{bound_ns} ns, over 10 % of the median latency ({median_ns} ns)")
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn synced(maxerror_ns: i64) -> ClockState {
        ClockState {
            unsynchronised: false,
            maxerror_ns,
            ..ClockState::default()
        }
    }

    fn off(offset_ns: i64, bound_ns: i64) -> Offset {
        Offset {
            offset_ns,
            bound_ns,
            rtt_ns: 2 * bound_ns,
            exchanges: 8,
        }
    }

    #[test]
    fn the_cross_host_bound_is_the_tighter_of_states_and_exchanges_unless_they_disagree() {
        // Two synchronised clocks within 500 ns each; the exchanges say 0 ± 60 µs.
        let b = cross_bound(&off(0, 30_000), &off(1_000, 30_000), &synced(500), &synced(500));
        assert_eq!((b.bound_ns, b.from.as_str()), (1_000, "the clocks' state"));
        // An unsynchronised clock: only the exchanges count.
        let mut u = synced(500);
        u.unsynchronised = true;
        let b = cross_bound(&off(0, 30_000), &off(1_000, 30_000), &synced(500), &u);
        assert_eq!((b.bound_ns, b.state_bound_ns), (61_000, None));
        // A 40 ms offset that the states deny: not believed, the exchanges' bound holds it.
        let b = cross_bound(&off(0, 30_000), &off(40_000_000, 30_000), &synced(500), &synced(500));
        assert_eq!(b.bound_ns, 40_060_000);
        assert!(
            b.contradiction.as_deref().unwrap().contains("39940000 ns apart"),
            "got {:?}",
            b.contradiction
        );
    }

    /// An exchange with the other clock `off` ahead, `up` and `down` ns each way, `hold` ns
    /// answering, starting at `t`.
    fn x(t: i64, off: i64, up: i64, down: i64, hold: i64) -> Exchange {
        Exchange {
            t1: t,
            t2: t + up + off,
            t3: t + up + hold + off,
            t4: t + up + hold + down,
        }
    }

    #[test]
    fn the_shortest_round_trip_is_used_and_its_bound_holds_the_true_offset() {
        let off = 5_000_000;
        // Asymmetric and stalled exchanges; the third is the tightest.
        let xs = [
            x(0, off, 900, 100, 50),
            x(10_000, off, 40_000, 300, 20),
            x(20_000, off, 150, 90, 70),
        ];
        let o = estimate(&xs).unwrap();
        assert_eq!((o.rtt_ns, o.exchanges), (240, 3));
        assert!(
            (o.offset_ns - off).abs() <= o.bound_ns,
            "expected {off} within {} ± {}",
            o.offset_ns,
            o.bound_ns
        );
        assert!(
            o.bound_ns <= 121,
            "expected half the 240 ns round trip, got {}",
            o.bound_ns
        );
        // Every exchange's own bound holds the truth, whatever the asymmetry.
        for e in xs {
            assert!((e.offset() - off).abs() <= e.rtt() / 2 + 1);
        }
        let stepped = Exchange {
            t1: 100,
            t2: 0,
            t3: 0,
            t4: 0,
        };
        assert_eq!(estimate(&[stepped]), None, "a negative round trip is no measurement");
    }

    #[test]
    fn chrony_and_pmc_output_is_read_and_doubt_is_named() {
        let chrony = "A29FC87B,ntp1.example,3,1764107456.123,-0.000001234,0.000000456,0.000002000,-12.345,0.001,0.002,0.010,0.005,64.2,Normal\n";
        let c = parse_chrony_tracking(chrony).unwrap();
        assert_eq!(
            (c.reference.as_str(), c.stratum, c.leap_status.as_str()),
            ("ntp1.example", 3, "Normal")
        );
        assert!((c.system_offset_ns + 1234.0).abs() < 1e-3 && (c.rms_offset_ns - 2000.0).abs() < 1e-3);
        let pmc = "sending: GET PORT_DATA_SET\n\t90b11c.fffe.52a3c1-1 seq 0 RESPONSE MANAGEMENT PORT_DATA_SET\n\t\tportIdentity 90b11c.fffe.52a3c1-1\n\t\tportState SLAVE\n\t\tlogMinDelayReqInterval 0\n\t90b11c.fffe.52a3c1-0 seq 1 RESPONSE MANAGEMENT CURRENT_DATA_SET\n\t\tstepsRemoved 1\n\t\toffsetFromMaster -23.0\n\t\tmeanPathDelay 512.0\n";
        let p = parse_pmc(pmc).unwrap();
        assert_eq!((p.port_state.as_str(), p.offset_from_master_ns), ("SLAVE", Some(-23.0)));
        let good = ClockState {
            ptp: Some(p),
            ..Default::default()
        };
        assert_eq!(cross_host_doubt(&good, &good, 500, 50_000), None);
        let bound = cross_host_doubt(&good, &good, 6_000, 50_000).unwrap();
        assert!(bound.contains("±6000 ns") && bound.contains("10 %"), "{bound}");
        let unsync = ClockState {
            unsynchronised: true,
            ..Default::default()
        };
        assert!(cross_host_doubt(&good, &unsync, 1, 50_000)
            .unwrap()
            .contains("STA_UNSYNC"));
        let listening = ClockState {
            ptp: Some(PtpState {
                port_state: "LISTENING".into(),
                offset_from_master_ns: None,
            }),
            ..Default::default()
        };
        assert!(listening.untrusted().unwrap().contains("LISTENING"));
    }
}
