//! vty exchanges with FRR's daemons, sans IO: what to ask a daemon, each command under a
//! name ([`Ask`]), and its replies read back by that name ([`Replies`]); configuration
//! changes as the command list a vty session takes ([`configure`]). The protocol modules
//! build every command (`bgp::vty`, `isis::vty`, `ospf::vty`) and read every reply; a
//! server's driver only carries them to the daemon and back.

use serde_json::Value;

/// Commands for one daemon, each with the name its reply is read by.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ask {
    /// The daemon asked: `bgpd`, `isisd`, `ospfd`, `ospf6d`.
    pub daemon: &'static str,
    names: Vec<&'static str>,
    commands: Vec<String>,
}

impl Ask {
    pub fn new(daemon: &'static str) -> Ask {
        Ask {
            daemon,
            names: Vec::new(),
            commands: Vec::new(),
        }
    }

    /// Adds `command`, whose reply is read as `name`.
    pub fn with(mut self, name: &'static str, command: impl Into<String>) -> Ask {
        self.names.push(name);
        self.commands.push(command.into());
        self
    }

    /// The commands, in the order the daemon is sent them.
    pub fn commands(&self) -> &[String] {
        &self.commands
    }

    /// The daemon's replies (one per command, in order) by name.
    pub fn replies(&self, out: Vec<String>) -> Replies {
        Replies(self.names.iter().copied().zip(out).collect())
    }
}

/// A daemon's replies by the names of the commands asked. A reply that is missing (the
/// daemon did not answer) reads as empty text, or as JSON `null`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Replies(Vec<(&'static str, String)>);

impl Replies {
    /// No reply at all: the daemon could not be asked.
    pub fn none() -> Replies {
        Replies::default()
    }

    /// The reply to the command named `name` as text.
    pub fn text(&self, name: &str) -> &str {
        self.0.iter().find(|(n, _)| *n == name).map_or("", |(_, t)| t.as_str())
    }

    /// The reply to the command named `name` as JSON (`null` when missing or not JSON).
    pub fn json(&self, name: &str) -> Value {
        serde_json::from_str(self.text(name)).unwrap_or(Value::Null)
    }
}

/// A configuration change as one vty session: into configuration mode, `lines`, and out.
pub fn configure(lines: impl IntoIterator<Item = String>) -> Vec<String> {
    let mut c = vec!["configure terminal".to_string()];
    c.extend(lines);
    c.push("end".into());
    c
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replies_are_read_by_the_name_of_their_command() {
        let ask = Ask::new("ospfd")
            .with("neighbors", "show ip ospf neighbor json")
            .with("traffic", "show ip ospf interface traffic json");
        assert_eq!(
            ask.commands(),
            ["show ip ospf neighbor json", "show ip ospf interface traffic json"]
        );
        let r = ask.replies(vec!["{\"a\":1}".into(), "not json".into()]);
        assert_eq!(r.json("neighbors")["a"], 1);
        assert_eq!(r.text("traffic"), "not json");
        assert_eq!(
            r.json("traffic"),
            Value::Null,
            "expected text that is not JSON read as null"
        );
        assert_eq!(r.text("nosuch"), "", "expected a name not asked read as empty");
        assert_eq!(Replies::none().json("neighbors"), Value::Null);
    }

    #[test]
    fn a_configuration_change_enters_and_leaves_configuration_mode() {
        let c = configure(["router bgp 1".to_string()]);
        assert_eq!(c, ["configure terminal", "router bgp 1", "end"]);
    }

    /// Every variable word of a command gapless sends parses as its type and builds the same
    /// command again: no string from a config reaches a daemon's vty (issue 68, item 5).
    mod round_trip {
        use std::net::{IpAddr, Ipv4Addr};

        use crate::{bgp, isis, ospf};

        fn words(c: &str) -> Vec<&str> {
            c.split(' ').collect()
        }

        #[test]
        fn a_network_line_is_rebuilt_from_its_parsed_values() {
            for (net, len, i, j) in [("10.0.0.0", 24, 0, 0), ("2001:db8::", 64, 17, 3), ("0.0.0.0", 0, 9, 99)] {
                let net: IpAddr = net.parse().unwrap();
                let c = bgp::vty::network_line(net, len, i, j);
                let w = words(&c);
                let (a, l) = w[1].split_once('/').expect("net/len");
                let ids: Vec<usize> = w[3]
                    .strip_prefix("GL-RR-")
                    .unwrap()
                    .split('-')
                    .map(|x| x.parse().unwrap())
                    .collect();
                assert_eq!((w[0], w[2], w.len()), ("network", "route-map", 4), "{c}");
                let again = bgp::vty::network_line(a.parse().unwrap(), l.parse().unwrap(), ids[0], ids[1]);
                assert_eq!(again, c);
            }
        }

        #[test]
        fn peer_shutdowns_and_received_routes_are_rebuilt_from_their_parsed_values() {
            let addrs: Vec<IpAddr> = vec!["10.0.0.2".parse().unwrap(), "2001:db8::2".parse().unwrap()];
            for up in [false, true] {
                let c = bgp::vty::shutdown(4_294_967_295, &addrs, up);
                let asn: u32 = words(&c[1])[2].parse().unwrap();
                let parsed: Vec<IpAddr> = c[2..c.len() - 1]
                    .iter()
                    .map(|l| words(l)[if up { 2 } else { 1 }].parse().unwrap())
                    .collect();
                assert_eq!(bgp::vty::shutdown(asn, &parsed, up), c);
            }
            let p = bgp::frr_json::tests::peer();
            for c in bgp::vty::received(&p).commands() {
                let w = words(c);
                let ip: IpAddr = w[5].parse().unwrap();
                assert_eq!(ip, p.address, "{c}");
                assert_eq!(
                    c.replacen(&ip.to_string(), "ADDR", 1),
                    format!("show bgp {} unicast neighbors ADDR received-routes json", w[2])
                );
            }
        }

        #[test]
        fn an_ospfv3_stub_is_named_by_its_index_and_its_area_is_an_address() {
            let r = ospf::tests::router_v6();
            for (k, adv) in [(0, false), (1, true)] {
                let c = ospf::vty::stub_area(&r, k, Ipv4Addr::new(0, 0, 0, 7), adv);
                let k2: usize = words(&c[1])[1].strip_prefix("gl6r").unwrap().parse().unwrap();
                let area: Ipv4Addr = words(&c[2]).last().unwrap().parse().unwrap();
                assert_eq!(ospf::vty::stub_area(&r, k2, area, adv), c);
            }
        }

        #[test]
        fn every_other_command_is_a_constant() {
            let asks = [
                bgp::vty::neighbors(),
                isis::vty::metric(),
                isis::vty::lsps(),
                ospf::vty::metric(false),
                ospf::vty::metric(true),
                ospf::vty::lsas(false),
                ospf::vty::lsas(true),
            ];
            for a in &asks {
                for c in a.commands() {
                    assert!(
                        c.starts_with("show ") && c.bytes().all(|b| b.is_ascii_lowercase() || b" -6".contains(&b)),
                        "expected a constant show command; got {c:?}"
                    );
                }
            }
        }
    }
}
