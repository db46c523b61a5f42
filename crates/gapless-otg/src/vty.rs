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
}
