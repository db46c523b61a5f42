//! An emulated host's VLAN tags, pushed and popped by two tc programs on its macvlan
//! (`xdp/gapless_vlan.c`, embedded; loaded and attached with aya). Kernel VLAN devices
//! would do the same where the kernel has them; the tc programs work on kernels without
//! 802.1Q devices too (this project's VM has none), so there is one way, tested here.
//! DESIGN-NOTES 52 says why.

use aya::maps::Array;
use aya::programs::{SchedClassifier, TcAttachType};
use aya::Ebpf;

use crate::IoError;

/// The compiled programs (BPF ELF with BTF).
pub static OBJECT: &[u8] = include_bytes!("../../../xdp/gapless_vlan.o");

/// The tagger of one host; dropping it detaches both programs (they are TCX links, or
/// netlink filters that go with the macvlan).
pub struct Tagger {
    _ebpf: Ebpf,
}

impl std::fmt::Debug for Tagger {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Tagger")
    }
}

fn failed(what: &str, e: impl std::fmt::Display) -> IoError {
    IoError::Xdp {
        what: what.to_string(),
        detail: e.to_string(),
        fix: "a device on a VLAN needs tc BPF programs (Linux 4.5+, run as root); or give the device no VLAN".into(),
    }
}

/// The map's value: count, padding, TPIDs outer first, TCIs outer first (see the C struct).
fn tags_value(tags: &[(u16, u16, u8)]) -> [u16; 6] {
    let mut v = [tags.len() as u16, 0, 0, 0, 0, 0];
    for (k, (id, tpid, prio)) in tags.iter().take(2).enumerate() {
        v[2 + k] = *tpid;
        v[4 + k] = (u16::from(*prio) << 13) | (id & 0x0fff);
    }
    v
}

impl Tagger {
    /// Loads the programs with `tags` (id, TPID, priority; outer first, at most two) and
    /// attaches them to `iface`'s egress and ingress, in the calling thread's namespace.
    pub fn attach(iface: &str, tags: &[(u16, u16, u8)]) -> Result<Tagger, IoError> {
        let mut ebpf = Ebpf::load(OBJECT).map_err(|e| failed("loading the VLAN tagger", e))?;
        let map = ebpf
            .map_mut("gapless_vlan_tags")
            .ok_or_else(|| failed("the embedded VLAN tagger", "it has no map gapless_vlan_tags"))?;
        let mut arr: Array<_, [u16; 6]> = Array::try_from(map).map_err(|e| failed("the VLAN tagger's map", e))?;
        arr.set(0, tags_value(tags), 0)
            .map_err(|e| failed("setting the VLAN tagger's tags", e))?;
        for (name, dir) in [
            ("gapless_vlan_out", TcAttachType::Egress),
            ("gapless_vlan_in", TcAttachType::Ingress),
        ] {
            let what = format!("attaching the VLAN tagger {name} to {iface}");
            let prog: &mut SchedClassifier = ebpf
                .program_mut(name)
                .ok_or_else(|| {
                    failed(
                        &what,
                        "the object has no such program; rebuild it with scripts/build-xdp.sh",
                    )
                })?
                .try_into()
                .map_err(|e| failed(&what, e))?;
            prog.load().map_err(|e| failed(&what, e))?;
            if let Err(e) = prog.attach(iface, dir) {
                // Older kernels attach through netlink, which needs the clsact qdisc first.
                aya::programs::tc::qdisc_add_clsact(iface).map_err(|q| failed(&what, format!("{e}; {q}")))?;
                prog.attach(iface, dir).map_err(|e| failed(&what, e))?;
            }
        }
        Ok(Tagger { _ebpf: ebpf })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_map_value_has_the_c_structs_layout_outer_tag_first() {
        assert_eq!(
            tags_value(&[(300, 0x88a8, 0), (100, 0x8100, 5)]),
            [2, 0, 0x88a8, 0x8100, 300, (5 << 13) | 100]
        );
        assert_eq!(tags_value(&[]), [0; 6]);
    }
}
