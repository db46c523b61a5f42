//! Every frame of a profile fits the interface it leaves by (its MTU, and an AF_XDP UMEM
//! frame): checked before a run sends, on each of its ports.

use gapless_core::packet::variant::Variant;
use gapless_core::Profile;
use gapless_io::kernel::nic::IfaceInfo;
use gapless_io::xdp::UMEM_FRAME;
use gapless_io::IoError;

use crate::spec::TxSocket;

/// Every frame fits the interface's MTU (and an AF_XDP UMEM frame).
pub(crate) fn check_frames(p: &Profile, info: &IfaceInfo, socket: TxSocket) -> Result<(), IoError> {
    for s in &p.streams {
        for v in &s.variants {
            check_frame(&s.name, v, info, socket)?;
        }
    }
    Ok(())
}

fn check_frame(stream: &str, v: &Variant, info: &IfaceInfo, socket: TxSocket) -> Result<(), IoError> {
    let vlan_extra = if v.template.layout.vlan_tci.is_empty() { 0 } else { 4 };
    let max = info.mtu as usize + 14 + vlan_extra + 4;
    let frame = v.sizes.max() as usize;
    if frame > max {
        return Err(IoError::FrameTooLarge {
            stream: stream.to_string(),
            iface: info.name.clone(),
            frame,
            mtu: info.mtu,
            max,
            need: frame - 14 - vlan_extra - 4,
        });
    }
    if matches!(socket, TxSocket::AfXdp { .. }) && frame - 4 > UMEM_FRAME {
        return Err(IoError::XdpFrameTooLarge {
            stream: stream.to_string(),
            frame,
            max: UMEM_FRAME + 4,
        });
    }
    Ok(())
}
