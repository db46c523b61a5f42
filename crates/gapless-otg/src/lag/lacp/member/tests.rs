use super::*;

const MS: u64 = 1_000_000;

fn cfg(sys: u8, key: u16, port: u16, active: bool) -> Config {
    Config {
        actor: Info {
            system_priority: 1,
            system: [2, 0, 0, 0, 0, sys],
            key,
            port_priority: 255,
            port,
            state: 0,
        },
        active,
        timeout_s: 0,
        periodic_s: 0,
    }
}

/// `a` and `b` on one link for `ms` milliseconds, ticked every 100 ms, each LACPDU delivered
/// to the other (its frame encoded and decoded). `cut_b`: b's LACPDUs are lost.
fn run(a: &mut Member, b: &mut Member, from: u64, ms: u64, cut_b: bool) -> u64 {
    let mut t = from;
    while t < from + ms * MS {
        if let Some(p) = a.on_tick(t) {
            b.on_frame(t, &p.encode([2, 0, 0, 0, 0, 0xa]));
        }
        if let Some(p) = b.on_tick(t) {
            if !cut_b {
                a.on_frame(t, &p.encode([2, 0, 0, 0, 0, 0xb]));
            }
        }
        t += 100 * MS;
    }
    t
}

fn pair(a_active: bool, b_active: bool) -> (Member, Member) {
    (
        Member::new(cfg(1, 10, 1, a_active), 0),
        Member::new(cfg(2, 20, 7, b_active), 0),
    )
}

#[test]
fn two_active_members_come_to_collect_and_distribute() {
    let (mut a, mut b) = pair(true, true);
    run(&mut a, &mut b, 0, 4000, false);
    assert!(
        a.distributing() && b.distributing(),
        "expected both distributing after 4 s; got {:?} {:?}",
        a.mux(),
        b.mux()
    );
    let all = state::ACTIVITY
        | state::TIMEOUT
        | state::AGGREGATION
        | state::SYNCHRONIZATION
        | state::COLLECTING
        | state::DISTRIBUTING;
    assert_eq!(a.actor_state(), all, "actor state {:#x}", a.actor_state());
    let p = a.partner().unwrap();
    assert_eq!(
        (p.system[5], p.key, p.port, p.state),
        (2, 20, 7, all),
        "a's partner is b as b says it is"
    );
    assert!(
        a.counters.lacpdus_tx >= 4 && a.counters.lacpdus_rx >= 4,
        "{:?}",
        a.counters
    );
}

#[test]
fn passive_answers_active_and_two_passives_stay_silent() {
    let (mut a, mut b) = pair(false, true);
    run(&mut a, &mut b, 0, 4000, false);
    assert!(
        a.distributing() && b.distributing(),
        "passive against active: {:?} {:?}",
        a.mux(),
        b.mux()
    );
    let (mut c, mut d) = pair(false, false);
    run(&mut c, &mut d, 0, 4000, false);
    assert_eq!(
        (c.counters.lacpdus_tx, d.counters.lacpdus_tx),
        (0, 0),
        "two passive members send nothing"
    );
    assert!(!c.distributing());
}

#[test]
fn a_silent_partner_expires_then_defaults() {
    let (mut a, mut b) = pair(true, true);
    let t = run(&mut a, &mut b, 0, 4000, false);
    // b's LACPDUs stop: after the short timeout (3 s) a is expired and no longer distributing.
    let t = run(&mut a, &mut b, t, 3100, true);
    assert_eq!(a.rx_state(), Rx::Expired);
    assert!(!a.distributing(), "an expired partner is not distributed to");
    assert!(a.actor_state() & state::EXPIRED != 0);
    run(&mut a, &mut b, t, 3100, true);
    assert_eq!((a.rx_state(), a.partner()), (Rx::Defaulted, None));
}

#[test]
fn admin_down_clears_sync_and_the_partner_stops_using_the_member() {
    let (mut a, mut b) = pair(true, true);
    let t = run(&mut a, &mut b, 0, 4000, false);
    b.set_admin(false);
    run(&mut a, &mut b, t, 300, false);
    assert!(!b.distributing(), "b's own side stops");
    assert_eq!(
        b.actor_state() & state::SYNCHRONIZATION,
        0,
        "b still sends, Synchronization cleared"
    );
    assert!(
        !a.distributing(),
        "a stops once it reads b's next LACPDU: {:?}",
        a.mux()
    );
    assert_eq!(a.rx_state(), Rx::Current, "a still hears b");
}

#[test]
fn a_partner_key_change_detaches_until_the_wait_is_over() {
    let (mut a, mut b) = pair(true, true);
    let t = run(&mut a, &mut b, 0, 4000, false);
    b.cfg.actor.key = 21;
    let t = run(&mut a, &mut b, t, 300, false);
    assert!(
        !a.distributing(),
        "a new key is a new partner: selection starts again ({:?})",
        a.mux()
    );
    run(&mut a, &mut b, t, 3000, false);
    assert!(a.distributing() && a.partner().unwrap().key == 21, "{:?}", a.mux());
}

#[test]
fn a_link_down_forgets_the_partner_and_a_bad_frame_is_counted() {
    let (mut a, mut b) = pair(true, true);
    let t = run(&mut a, &mut b, 0, 4000, false);
    a.set_link(false, t);
    assert!(!a.distributing() && a.partner().is_none());
    a.set_link(true, t);
    run(&mut a, &mut b, t, 4000, false);
    assert!(a.distributing());
    a.on_frame(t, &[0u8; 30]);
    assert_eq!(a.counters.lacpdus_rx_errors, 1);
}

#[test]
fn open_vswitchs_lacpdu_is_taken_and_answered_with_it_as_partner() {
    use crate::lag::lacp::pdu::tests::{hex, OVS_DEFAULTED};
    let mut a = Member::new(cfg(1, 10, 1, true), 0);
    a.on_frame(0, &hex(OVS_DEFAULTED));
    let out = a.on_tick(0).expect("an LACPDU at once: a new partner");
    assert_eq!(
        out.partner.system,
        [0x2a, 0xea, 0x62, 0xfc, 0x22, 0x4f],
        "OVS echoed as the partner"
    );
    assert_eq!((out.partner.key, out.partner.port, out.partner.state), (1, 1, 0x77));
    // OVS is aggregatable but not yet in sync with us: selected, then attached, not distributing.
    a.on_tick(2100 * MS);
    assert_eq!(a.mux(), Mux::Attached);
    assert!(!a.distributing());
}

#[test]
fn the_configured_interval_and_timeout_set_the_pace_and_the_bit() {
    let (mut a, mut b) = pair(true, true);
    a.cfg.periodic_s = 30;
    a.cfg.timeout_s = 90;
    // b asks for long timeouts too: a partner asking for short ones would time a out between
    // its 30 s LACPDUs, as 802.1AX would have it sending every second.
    b.cfg.timeout_s = 90;
    let t = run(&mut a, &mut b, 0, 4000, false);
    assert!(a.distributing() && b.distributing(), "{:?} {:?}", a.mux(), b.mux());
    assert_eq!(a.actor_state() & state::TIMEOUT, 0, "90 s asks for long timeouts");
    let sent = a.counters.lacpdus_tx;
    let t = run(&mut a, &mut b, t, 25_000, false);
    assert_eq!(a.counters.lacpdus_tx, sent, "nothing periodic between 4 s and 29 s");
    run(&mut a, &mut b, t, 2000, false);
    assert_eq!(a.counters.lacpdus_tx, sent + 1, "one LACPDU at 30 s");
    // b asks for short timeouts, so by 802.1AX it would send every second; auto does that.
    let (mut c, mut d) = pair(true, true);
    let t = run(&mut c, &mut d, 0, 4000, false);
    let sent = c.counters.lacpdus_tx;
    run(&mut c, &mut d, t, 10_000, false);
    assert!(
        (9..=11).contains(&(c.counters.lacpdus_tx - sent)),
        "auto: every second; got {}",
        c.counters.lacpdus_tx - sent
    );
}

#[test]
fn a_timeout_of_10_s_holds_the_partner_10_s_with_the_short_bit() {
    let (mut a, mut b) = pair(true, true);
    a.cfg.timeout_s = 10;
    let t = run(&mut a, &mut b, 0, 4000, false);
    assert_ne!(
        a.actor_state() & state::TIMEOUT,
        0,
        "under 90 s: short, so the partner sends every second"
    );
    let t = run(&mut a, &mut b, t, 9000, true);
    assert_eq!(a.rx_state(), Rx::Current, "9 s of silence: still current");
    run(&mut a, &mut b, t, 1500, true);
    assert_eq!(a.rx_state(), Rx::Expired, "10 s: expired");
}

#[test]
fn lacp_off_on_a_member_silences_it_and_the_partner_times_out() {
    let (mut a, mut b) = pair(true, true);
    let t = run(&mut a, &mut b, 0, 4000, false);
    b.set_enabled(false, t);
    assert!(!b.distributing() && !b.enabled());
    let sent = b.counters.lacpdus_tx;
    let t = run(&mut a, &mut b, t, 3500, false);
    assert_eq!(b.counters.lacpdus_tx, sent, "no LACPDU while LACP is off");
    assert!(
        !a.distributing() && a.rx_state() == Rx::Expired,
        "a's partner timed out: {:?}",
        a.rx_state()
    );
    b.set_enabled(true, t);
    run(&mut a, &mut b, t, 4000, false);
    assert!(
        a.distributing() && b.distributing(),
        "back in the aggregate: {:?} {:?}",
        a.mux(),
        b.mux()
    );
}

#[test]
fn a_partner_that_churns_is_out_while_out_of_sync_and_back_when_in() {
    let (mut a, mut b) = pair(true, true);
    let mut t = run(&mut a, &mut b, 0, 4000, false);
    for k in 0..5 {
        b.set_admin(k % 2 == 1);
        t = run(&mut a, &mut b, t, 300, false);
        assert_eq!(a.distributing(), k % 2 == 1, "round {k}: a follows b's Synchronization");
    }
    assert!(a.counters.lacpdus_rx > 10 && a.rx_state() == Rx::Current);
}
