//! One LAG member's LACP, sans IO (IEEE 802.1AX-2014 6.4): the receive machine (current,
//! expired, defaulted, by `current_while`), periodic transmission (fast or slow, by the
//! partner's timeout bit), selection (the partner's aggregatable, and the same partner as
//! the aggregator's) and the mux (detached, waiting, attached, collecting-distributing).
//! Time is an argument in ns; frames in and out are [`Lacpdu`]s.

use super::pdu::{state, Info, Lacpdu};

const SEC: u64 = 1_000_000_000;
/// `current_while` with a short timeout (6.4.4); a long one is OTG's 90.
const SHORT_TIMEOUT: u64 = 3 * SEC;
/// Periodic transmission, fast and slow (6.4.4).
const FAST_PERIODIC: u64 = SEC;
const SLOW_PERIODIC: u64 = 30 * SEC;
/// `wait_while` before a selected member attaches (aggregate wait time, 6.4.4).
const AGGREGATE_WAIT: u64 = 2 * SEC;

/// Where the receive machine is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rx {
    /// No LACPDU yet since the link came up (or LACP was turned on).
    Defaulted,
    Current,
    /// `current_while` ran out once: one more short timeout before defaulted.
    Expired,
}

/// Where the mux machine is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mux {
    Detached,
    Waiting,
    Attached,
    CollectingDistributing,
}

/// What a member is told by its configuration.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Config {
    /// The actor's system, key, port and priorities; its `state` is made here.
    pub actor: Info,
    pub active: bool,
    /// OTG's `lacpdu_timeout`: how long a partner's information holds without a new
    /// LACPDU, in s. 0 (auto): 3 s, short. The LACPDU's one timeout bit asks the partner
    /// for short timeouts (so it sends every second) below 90 s, long from 90 s.
    pub timeout_s: u16,
    /// OTG's `lacpdu_periodic_time_interval`: send every this many s. 0 (auto): as
    /// 802.1AX says, 1 s when the partner asks for short timeouts, 30 s when long.
    pub periodic_s: u16,
}

impl Config {
    /// Whether the actor asks for short timeouts (its state's timeout bit).
    pub fn short_timeout(&self) -> bool {
        self.timeout_s < 90
    }

    /// `current_while`: the configured timeout, or 3 s for auto.
    fn current_while(&self) -> u64 {
        match self.timeout_s {
            0 => SHORT_TIMEOUT,
            t => u64::from(t) * SEC,
        }
    }
}

/// Counters a member keeps (`monitor/metrics` `lacp`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counters {
    pub lacpdus_rx: u64,
    pub lacpdus_tx: u64,
    pub lacpdus_rx_errors: u64,
}

/// One member's LACP.
#[derive(Debug, Clone)]
pub struct Member {
    cfg: Config,
    /// `control/state` `lacp` `admin` or `member_ports` down: LACPDUs go on, Synchronization
    /// cleared, so the partner stops using the member.
    admin_up: bool,
    /// `control/state` `lacp` `member_ports`: LACP runs on the member (down: no LACPDUs, and
    /// the member is out of the aggregate while its link stays up).
    enabled: bool,
    link_up: bool,
    rx: Rx,
    partner: Info,
    current_until: u64,
    next_periodic: u64,
    ntt: bool,
    mux: Mux,
    wait_until: u64,
    pub counters: Counters,
}

impl Member {
    pub fn new(cfg: Config, now: u64) -> Member {
        Member {
            cfg,
            admin_up: true,
            enabled: true,
            link_up: true,
            rx: Rx::Defaulted,
            partner: Info::default(),
            current_until: 0,
            next_periodic: now,
            ntt: true,
            mux: Mux::Detached,
            wait_until: 0,
            counters: Counters::default(),
        }
    }

    /// The actor's state bits as they go out now.
    pub fn actor_state(&self) -> u8 {
        let mut s = state::AGGREGATION;
        s |= if self.cfg.active { state::ACTIVITY } else { 0 };
        s |= if self.cfg.short_timeout() || self.rx == Rx::Expired {
            state::TIMEOUT
        } else {
            0
        };
        let in_use = self.admin_up && matches!(self.mux, Mux::Attached | Mux::CollectingDistributing);
        s |= if in_use { state::SYNCHRONIZATION } else { 0 };
        if self.admin_up && self.mux == Mux::CollectingDistributing {
            s |= state::COLLECTING | state::DISTRIBUTING;
        }
        s |= if self.rx == Rx::Defaulted { state::DEFAULTED } else { 0 };
        s |= if self.rx == Rx::Expired { state::EXPIRED } else { 0 };
        s
    }

    /// The partner as last heard (none while defaulted).
    pub fn partner(&self) -> Option<Info> {
        (self.rx != Rx::Defaulted).then_some(self.partner)
    }

    pub fn rx_state(&self) -> Rx {
        self.rx
    }

    pub fn mux(&self) -> Mux {
        self.mux
    }

    /// Whether frames may go out on this member (and come in).
    pub fn distributing(&self) -> bool {
        self.enabled && self.link_up && self.admin_up && self.mux == Mux::CollectingDistributing
    }

    pub fn enabled(&self) -> bool {
        self.enabled
    }

    /// LACP on or off on the member (`member_ports`), its link as it is: off, it sends
    /// nothing, forgets its partner and detaches; on, it starts again as after a link up.
    pub fn set_enabled(&mut self, on: bool, now: u64) {
        if self.enabled == on {
            return;
        }
        self.enabled = on;
        let link = self.link_up;
        self.set_link(false, now);
        self.link_up = link;
        if on && link {
            self.set_link(true, now);
        }
    }

    /// `admin` up or down (the member's LACP in control/state).
    pub fn set_admin(&mut self, up: bool) {
        if self.admin_up != up {
            self.admin_up = up;
            self.ntt = true;
        }
    }

    /// The link went up or down: down, the member forgets its partner and detaches.
    pub fn set_link(&mut self, up: bool, now: u64) {
        self.link_up = up;
        if !up {
            self.rx = Rx::Defaulted;
            self.partner = Info::default();
            self.mux = Mux::Detached;
        } else {
            self.next_periodic = now;
            self.ntt = true;
        }
    }

    /// A received frame: an LACPDU to take, or a bad one counted.
    pub fn on_frame(&mut self, now: u64, frame: &[u8]) {
        match Lacpdu::decode(frame) {
            Ok(p) => self.on_pdu(now, &p),
            Err(_) => self.counters.lacpdus_rx_errors += 1,
        }
    }

    /// The receive machine's CURRENT on an LACPDU (6.4.12): the partner recorded, its view of
    /// us checked (a stale view asks for a reply at once), `current_while` restarted.
    pub fn on_pdu(&mut self, now: u64, p: &Lacpdu) {
        if !self.link_up || !self.enabled {
            return;
        }
        self.counters.lacpdus_rx += 1;
        let changed = self.rx == Rx::Defaulted || !self.partner.same_port(&p.actor);
        if changed {
            // A new partner (or a changed key): selection starts again.
            self.mux = Mux::Detached;
        }
        self.partner = p.actor;
        self.rx = Rx::Current;
        self.current_until = now + self.cfg.current_while();
        let mine = Info {
            state: self.actor_state(),
            ..self.cfg.actor
        };
        if !p.partner.same_port(&mine) || p.partner.state != mine.state {
            self.ntt = true;
        }
    }

    /// Whether the partner is one this member may aggregate with: heard, aggregatable.
    fn selected(&self) -> bool {
        self.link_up && self.rx == Rx::Current && self.partner.state & state::AGGREGATION != 0
    }

    /// The time passes to `now`: timers run out, the mux moves, and the LACPDU to send now,
    /// if one is due (periodic, or something changed).
    pub fn on_tick(&mut self, now: u64) -> Option<Lacpdu> {
        if !self.link_up || !self.enabled {
            return None;
        }
        self.receive_timers(now);
        self.mux_step(now);
        self.transmit(now)
    }

    fn receive_timers(&mut self, now: u64) {
        if self.rx != Rx::Defaulted && now >= self.current_until {
            match self.rx {
                Rx::Current => {
                    // EXPIRED: the partner's sync is gone; one short timeout to hear it again.
                    self.rx = Rx::Expired;
                    self.partner.state &= !state::SYNCHRONIZATION;
                    self.current_until = now + SHORT_TIMEOUT;
                }
                _ => {
                    self.rx = Rx::Defaulted;
                    self.partner = Info::default();
                }
            }
            self.ntt = true;
        }
    }

    fn mux_step(&mut self, now: u64) {
        let partner_sync = self.partner.state & state::SYNCHRONIZATION != 0;
        let before = self.mux;
        self.mux = match (self.mux, self.selected()) {
            (_, false) => Mux::Detached,
            (Mux::Detached, true) => {
                self.wait_until = now + AGGREGATE_WAIT;
                Mux::Waiting
            }
            (Mux::Waiting, true) if now >= self.wait_until => Mux::Attached,
            (Mux::Attached, true) if partner_sync && self.admin_up => Mux::CollectingDistributing,
            (Mux::CollectingDistributing, true) if !partner_sync || !self.admin_up => Mux::Attached,
            (m, true) => m,
        };
        if self.mux != before {
            self.ntt = true;
        }
    }

    /// The periodic interval: the configured one, else by the partner's timeout bit.
    fn periodic(&self) -> u64 {
        if self.cfg.periodic_s > 0 {
            return u64::from(self.cfg.periodic_s) * SEC;
        }
        let fast = self.rx == Rx::Defaulted || self.partner.state & state::TIMEOUT != 0;
        if fast {
            FAST_PERIODIC
        } else {
            SLOW_PERIODIC
        }
    }

    fn transmit(&mut self, now: u64) -> Option<Lacpdu> {
        let partner_active = self.rx != Rx::Defaulted && self.partner.state & state::ACTIVITY != 0;
        if (self.cfg.active || partner_active) && now >= self.next_periodic {
            self.ntt = true;
            self.next_periodic = now + self.periodic();
        }
        if !self.ntt || !(self.cfg.active || partner_active) {
            return None;
        }
        self.ntt = false;
        self.counters.lacpdus_tx += 1;
        Some(Lacpdu {
            actor: Info {
                state: self.actor_state(),
                ..self.cfg.actor
            },
            partner: self.partner().unwrap_or_default(),
            collector_max_delay: 0,
        })
    }
}

#[cfg(test)]
mod tests;
