//! OTG captures: `captures[]` of a config (which RX ports keep their frames, in which file
//! format, cut to which size), the port `capture` choice of `control/state`, and the body of
//! `monitor/capture`. The frames come from the meter's RX path (`gapless_engine::capture`):
//! a port is captured while it receives one of the config's flows.

use serde_json::Value;

use crate::config::Port;
use crate::error::{Invalid, OtgError};

/// One port's capture as the config asks for it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CaptureCfg {
    /// The capture's name in the config.
    pub name: String,
    pub port: String,
    /// pcapng instead of pcap.
    pub pcapng: bool,
    /// Bytes kept of each frame (0: all of it).
    pub snaplen: usize,
    /// A new start drops what an earlier one kept (the model's default).
    pub overwrite: bool,
}

/// The config's `captures[]`, one entry per captured port.
pub fn captures(cfg: &Value, ports: &[Port]) -> Result<Vec<CaptureCfg>, Invalid> {
    let mut out: Vec<CaptureCfg> = Vec::new();
    for (i, c) in cfg["captures"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .iter()
        .enumerate()
    {
        let at = format!("captures[{i}]");
        let name = c["name"].as_str().unwrap_or_default().to_string();
        if c["filters"].as_array().is_some_and(|f| !f.is_empty()) {
            return Err(Invalid(format!(
                "{at}.filters: capture filters are not supported; every frame the port receives is kept. Fix: remove the filters and filter the file (tshark -Y, Scapy)"
            )));
        }
        let pcapng = match c["format"].as_str().unwrap_or("pcap") {
            "pcap" => false,
            "pcapng" => true,
            other => return Err(Invalid(format!("{at}.format: {other:?} is not pcap or pcapng"))),
        };
        let snaplen = c["packet_size"].as_u64().unwrap_or(0) as usize;
        let overwrite = c["overwrite"].as_bool().unwrap_or(true);
        for (j, p) in c["port_names"]
            .as_array()
            .cloned()
            .unwrap_or_default()
            .iter()
            .enumerate()
        {
            let pat = format!("{at}.port_names[{j}]");
            let port = p.as_str().ok_or_else(|| Invalid(format!("{pat}: a port name")))?;
            if !ports.iter().any(|x| x.name == port) {
                return Err(Invalid(format!("{pat}: no port named {port:?}")));
            }
            if let Some(o) = out.iter().find(|o| o.port == port) {
                return Err(Invalid(format!(
                    "{pat}: port {port:?} is captured by {:?} already",
                    o.name
                )));
            }
            out.push(CaptureCfg {
                name: name.clone(),
                port: port.to_string(),
                pcapng,
                snaplen,
                overwrite,
            });
        }
    }
    Ok(out)
}

/// The port named by a `monitor/capture` request.
pub fn request(req: &Value) -> Result<String, OtgError> {
    req["port_name"]
        .as_str()
        .filter(|s| !s.is_empty())
        .map(str::to_string)
        .ok_or_else(|| OtgError::invalid("port_name: name the port whose capture to return"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn ports() -> Vec<Port> {
        ["p1", "p2"]
            .iter()
            .map(|n| Port {
                name: n.to_string(),
                location: n.to_string(),
                iface: n.to_string(),
                netns: None,
                agent: None,
                members: Vec::new(),
            })
            .collect()
    }

    #[test]
    fn captures_are_read_per_port_and_what_gapless_cannot_do_is_refused_with_its_path() {
        let c = captures(
            &json!({ "captures": [{ "name": "c", "port_names": ["p2"], "format": "pcapng", "packet_size": 128 }] }),
            &ports(),
        )
        .unwrap();
        assert_eq!(
            c,
            vec![CaptureCfg {
                name: "c".into(),
                port: "p2".into(),
                pcapng: true,
                snaplen: 128,
                overwrite: true
            }]
        );
        let e = captures(
            &json!({ "captures": [{ "name": "c", "port_names": ["p3"] }] }),
            &ports(),
        )
        .unwrap_err()
        .0;
        assert!(e.contains("captures[0].port_names[0]: no port named \"p3\""), "{e}");
        let e = captures(
            &json!({ "captures": [{ "name": "c", "port_names": ["p2"], "filters": [{ "choice": "ethernet" }] }] }),
            &ports(),
        )
        .unwrap_err()
        .0;
        assert!(e.contains("captures[0].filters") && e.contains("Fix"), "{e}");
        let twice =
            json!({ "captures": [{ "name": "a", "port_names": ["p2"] }, { "name": "b", "port_names": ["p2"] }] });
        assert!(captures(&twice, &ports())
            .unwrap_err()
            .0
            .contains("captured by \"a\" already"));
        assert_eq!(request(&json!({ "port_name": "p2" })), Ok("p2".to_string()));
        assert!(request(&json!({})).is_err());
    }
}
