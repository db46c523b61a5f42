//! Egress qdiscs, through iproute2's `tc`: what an interface has (for launch time, which
//! needs etf or fq), and the kernel shaper gapless installs for `rate_control = "shaper"`
//! (tbf or HTB), removed again when the run ends.

use std::process::Command;

use crate::error::IoError;

/// One qdisc as `tc -j qdisc show` lists it.
#[derive(Debug, Clone, PartialEq)]
pub struct Qdisc {
    pub kind: String,
    pub handle: String,
    /// The root qdisc of the interface (else a child of `parent`).
    pub root: bool,
    pub parent: Option<String>,
    /// etf: the NIC launches the frames itself (`offload on`).
    pub offload: bool,
    /// etf: SO_TXTIME deadline mode; fq: the horizon, and the rest, as tc printed them.
    pub options: serde_json::Value,
}

/// Parses the JSON of `tc -j qdisc show`.
pub fn parse(json: &str) -> Result<Vec<Qdisc>, String> {
    let v: serde_json::Value = serde_json::from_str(json).map_err(|e| format!("tc printed no JSON list: {e}"))?;
    let list = v.as_array().ok_or("tc printed no JSON list")?;
    Ok(list
        .iter()
        .map(|q| {
            let options = q.get("options").cloned().unwrap_or(serde_json::Value::Null);
            Qdisc {
                kind: q["kind"].as_str().unwrap_or("").to_string(),
                handle: q["handle"].as_str().unwrap_or("").to_string(),
                root: q["root"].as_bool().unwrap_or(false),
                parent: q["parent"].as_str().map(str::to_string),
                offload: options["offload"].as_bool().unwrap_or(false),
                options,
            }
        })
        .collect())
}

pub(crate) fn tc(args: &[&str]) -> Result<String, IoError> {
    let cmd = format!("tc {}", args.join(" "));
    let out = Command::new("tc").args(args).output().map_err(|e| IoError::Command {
        cmd: cmd.clone(),
        stderr: format!("cannot run tc: {e}"),
    })?;
    if !out.status.success() {
        return Err(IoError::Command {
            cmd,
            stderr: String::from_utf8_lossy(&out.stderr).trim().to_string(),
        });
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// The qdiscs on `iface`, in the current network namespace.
pub fn show(iface: &str) -> Result<Vec<Qdisc>, IoError> {
    let out = tc(&["-j", "qdisc", "show", "dev", iface])?;
    parse(&out).map_err(|e| IoError::Command {
        cmd: format!("tc -j qdisc show dev {iface}"),
        stderr: e,
    })
}

/// Which qdisc on the interface honours SO_TXTIME, and how: `etf` (with or without NIC
/// offload) or `fq` (its time horizon). None: no qdisc that launches frames at their time.
pub fn launch_time_qdisc(qdiscs: &[Qdisc]) -> Option<String> {
    let q = qdiscs
        .iter()
        .find(|q| q.kind == "etf" || q.kind == "fq" || q.kind == "taprio")?;
    Some(match q.kind.as_str() {
        "etf" if q.offload => format!("etf {} (NIC launch-time offload on)", q.handle),
        "etf" => format!("etf {} (software, no NIC offload)", q.handle),
        "taprio" => format!("taprio {} (txtime-assist)", q.handle),
        _ => format!("fq {} (time horizon)", q.handle),
    })
}

/// The root qdiscs the kernel gives an interface by itself: removing a shaper brings these
/// back, so gapless may replace them.
const DEFAULT_ROOTS: [&str; 6] = ["noqueue", "pfifo_fast", "mq", "fq_codel", "noop", "pfifo"];

/// A shaper gapless installed; dropping it removes it (the interface's default root qdisc
/// comes back).
#[derive(Debug)]
pub struct Shaper {
    iface: String,
    /// The root qdisc before, e.g. "noqueue".
    pub replaced: String,
    /// What `tc` showed after the install, e.g. "tbf 1: rate 51200000bit burst 3028b".
    pub confirmed: String,
    removed: bool,
}

/// A shaper's queue and counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Backlog {
    pub packets: u64,
    pub bytes: u64,
    pub sent_packets: u64,
    pub drops: u64,
}

/// How to shape.
#[derive(Debug, Clone, PartialEq)]
pub struct ShaperParams {
    /// `tbf` or `htb`.
    pub qdisc: String,
    /// bit/s as the kernel counts it (frames without FCS).
    pub rate_bps: u64,
    pub burst_bytes: u64,
    /// Queue limit, bytes: room for everything the socket's send buffer can hold, so the
    /// qdisc never drops and the sender waits instead.
    pub limit_bytes: u64,
    /// A queue of this many frames instead (a pfifo leaf): a device with a real queue.
    pub queue_frames: Option<u32>,
}

impl ShaperParams {
    /// The `tc` commands that install it.
    pub fn commands(&self, iface: &str) -> Vec<Vec<String>> {
        let (rate, burst) = (format!("{}bit", self.rate_bps), format!("{}b", self.burst_bytes));
        let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        match self.qdisc.as_str() {
            "htb" => vec![
                s(&[
                    "qdisc", "replace", "dev", iface, "root", "handle", "1:", "htb", "default", "1",
                ]),
                s(&[
                    "class", "replace", "dev", iface, "parent", "1:", "classid", "1:1", "htb", "rate", &rate, "ceil",
                    &rate, "burst", &burst, "cburst", &burst,
                ]),
                self.leaf(iface),
            ],
            _ => {
                let mut c = vec![s(&[
                    "qdisc",
                    "replace",
                    "dev",
                    iface,
                    "root",
                    "handle",
                    "1:",
                    "tbf",
                    "rate",
                    &rate,
                    "burst",
                    &burst,
                    "limit",
                    &self.limit_bytes.to_string(),
                ])];
                // tbf keeps its byte limit unless a leaf queue replaces it.
                c.extend(self.queue_frames.map(|_| self.leaf(iface)));
                c
            }
        }
    }

    /// The leaf queue under class 1:1: `queue_frames` frames, else `limit_bytes` bytes.
    fn leaf(&self, iface: &str) -> Vec<String> {
        let (kind, limit) = match self.queue_frames {
            Some(n) => ("pfifo", n.to_string()),
            None => ("bfifo", self.limit_bytes.to_string()),
        };
        [
            "qdisc", "replace", "dev", iface, "parent", "1:1", "handle", "10:", kind, "limit", &limit,
        ]
        .iter()
        .map(|x| x.to_string())
        .collect()
    }
}

impl Shaper {
    /// Installs the shaper on `iface` (current namespace). Refuses an interface whose root
    /// qdisc is one of its owner's: gapless could not put it back.
    pub fn install(iface: &str, p: &ShaperParams) -> Result<Shaper, IoError> {
        let before = show(iface)?;
        let root = before
            .iter()
            .find(|q| q.root)
            .map(|q| q.kind.clone())
            .unwrap_or_default();
        if !root.is_empty() && !DEFAULT_ROOTS.contains(&root.as_str()) {
            return Err(IoError::QdiscInUse {
                iface: iface.to_string(),
                kind: root,
            });
        }
        let mut sh = Shaper {
            iface: iface.to_string(),
            replaced: if root.is_empty() { "none".into() } else { root },
            confirmed: String::new(),
            removed: false,
        };
        for c in p.commands(iface) {
            let args: Vec<&str> = c.iter().map(String::as_str).collect();
            tc(&args)?;
        }
        let after = show(iface)?;
        let q = after
            .iter()
            .find(|q| q.root && q.kind == p.qdisc)
            .ok_or_else(|| IoError::Command {
                cmd: format!("tc qdisc show dev {iface}"),
                stderr: format!("no root {} after installing it", p.qdisc),
            })?;
        sh.confirmed = format!("{} {} {}", q.kind, q.handle, q.options);
        Ok(sh)
    }

    /// The frames the shaper still holds, and its counters (`tc -s`).
    pub fn backlog(&self) -> Result<Backlog, IoError> {
        let out = tc(&["-s", "-j", "qdisc", "show", "dev", &self.iface, "root"])?;
        let v: serde_json::Value = serde_json::from_str(&out).unwrap_or_default();
        let q = &v[0];
        Ok(Backlog {
            packets: q["qlen"].as_u64().unwrap_or(0),
            bytes: q["backlog"].as_u64().unwrap_or(0),
            sent_packets: q["packets"].as_u64().unwrap_or(0),
            drops: q["drops"].as_u64().unwrap_or(0),
        })
    }

    /// Waits until the shaper has sent what it holds (removing it would drop those frames),
    /// for at most `max`. Returns the last backlog read.
    pub fn drain(&self, max: std::time::Duration) -> Result<Backlog, IoError> {
        let t0 = std::time::Instant::now();
        loop {
            let b = self.backlog()?;
            if b.packets == 0 || t0.elapsed() >= max {
                return Ok(b);
            }
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
    }

    /// Removes the shaper; the kernel restores the interface's default root qdisc.
    pub fn remove(&mut self) -> Result<(), IoError> {
        if std::mem::replace(&mut self.removed, true) {
            return Ok(());
        }
        tc(&["qdisc", "del", "dev", &self.iface, "root"]).map(|_| ())
    }
}

impl Drop for Shaper {
    fn drop(&mut self) {
        let _ = self.remove();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_tc_json_and_finds_launch_time_qdiscs() {
        let none = r#"[{"kind":"noqueue","handle":"0:","dev":"gl-tx0","root":true,"refcnt":2,"options":{}}]"#;
        let q = parse(none).unwrap();
        assert_eq!(q.len(), 1);
        assert!(q[0].root);
        assert_eq!(launch_time_qdisc(&q), None);
        let etf = r#"[{"kind":"mqprio","handle":"100:","root":true,"options":{}},
            {"kind":"etf","handle":"8001:","parent":"100:1","options":{"clockid":"CLOCK_TAI","delta":200000,"offload":true,"deadline_mode":false,"skip_sock_check":false}}]"#;
        let q = parse(etf).unwrap();
        assert_eq!(q[1].parent.as_deref(), Some("100:1"));
        assert_eq!(launch_time_qdisc(&q).unwrap(), "etf 8001: (NIC launch-time offload on)");
        let fq = r#"[{"kind":"fq","handle":"8002:","root":true,"options":{"limit":10000,"horizon":"10s"}}]"#;
        assert_eq!(
            launch_time_qdisc(&parse(fq).unwrap()).unwrap(),
            "fq 8002: (time horizon)"
        );
        assert!(parse("Error: nothing").is_err());
    }

    #[test]
    fn shaper_commands() {
        let p = ShaperParams {
            qdisc: "tbf".into(),
            rate_bps: 51_200_000,
            burst_bytes: 3028,
            limit_bytes: 1 << 22,
            queue_frames: None,
        };
        assert_eq!(
            p.commands("eth1")[0].join(" "),
            "qdisc replace dev eth1 root handle 1: tbf rate 51200000bit burst 3028b limit 4194304"
        );
        let h = ShaperParams {
            qdisc: "htb".into(),
            ..p
        };
        let c = h.commands("eth1");
        assert_eq!(c.len(), 3);
        assert!(c[1]
            .join(" ")
            .contains("htb rate 51200000bit ceil 51200000bit burst 3028b"));
        assert_eq!(
            c[2].join(" "),
            "qdisc replace dev eth1 parent 1:1 handle 10: bfifo limit 4194304"
        );
        // A queue in frames: a pfifo leaf under either.
        for (qdisc, n) in [("tbf", 2), ("htb", 3)] {
            let c = ShaperParams {
                qdisc: qdisc.into(),
                queue_frames: Some(256),
                ..h.clone()
            }
            .commands("d1");
            assert_eq!(c.len(), n);
            assert_eq!(
                c[n - 1].join(" "),
                "qdisc replace dev d1 parent 1:1 handle 10: pfifo limit 256"
            );
        }
    }
}
