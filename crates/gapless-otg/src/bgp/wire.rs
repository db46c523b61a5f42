//! Which frame on the wire is a BGP UPDATE to a peer (sans IO): `protocol.route` times a
//! range's withdrawal or advertise by the first UPDATE the device sends after the command
//! (bgpd sends it about 50 ms after the command: ../shared/FRR.md).

use std::net::IpAddr;

/// Whether an Ethernet frame is TCP to `peer` on a BGP session (port 179 at either end:
/// whichever side opened it) carrying a BGP UPDATE.
pub fn is_update_to(f: &[u8], peer: IpAddr) -> bool {
    let mut off = 12;
    let mut ethertype = u16::from_be_bytes([*f.get(12).unwrap_or(&0), *f.get(13).unwrap_or(&0)]);
    while ethertype == 0x8100 || ethertype == 0x88a8 {
        off += 4;
        let Some(t) = f.get(off..off + 2) else { return false };
        ethertype = u16::from_be_bytes([t[0], t[1]]);
    }
    let ip = &f[(off + 2).min(f.len())..];
    let (dst, proto, l4): (IpAddr, u8, usize) = match ethertype {
        0x0800 if ip.len() >= 20 => {
            let d: [u8; 4] = ip[16..20].try_into().unwrap_or_default();
            (d.into(), ip[9], usize::from(ip[0] & 0x0f) * 4)
        }
        0x86dd if ip.len() >= 40 => {
            let d: [u8; 16] = ip[24..40].try_into().unwrap_or_default();
            (d.into(), ip[6], 40)
        }
        _ => return false,
    };
    let Some(tcp) = ip.get(l4..) else { return false };
    let port = |at: usize| u16::from_be_bytes([tcp[at], tcp[at + 1]]);
    if dst != peer || proto != 6 || tcp.len() < 20 || (port(0) != 179 && port(2) != 179) {
        return false;
    }
    let mut msg = &tcp[usize::from(tcp[12] >> 4) * 4..];
    // Each BGP message: a 16-byte marker of ones, a length, a type (2: UPDATE).
    while msg.len() >= 19 && msg[..16].iter().all(|b| *b == 0xff) {
        if msg[18] == 2 {
            return true;
        }
        let len = usize::from(u16::from_be_bytes([msg[16], msg[17]]));
        msg = msg.get(len.max(19)..).unwrap_or_default();
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_update_to_the_peer_is_told_from_a_keepalive_and_from_other_peers() {
        let frame = |kind: u8| {
            let mut f = vec![0u8; 14];
            f[12..14].copy_from_slice(&0x0800u16.to_be_bytes());
            let mut ip = vec![0x45, 0, 0, 0, 0, 0, 0, 0, 64, 6, 0, 0, 1, 1, 1, 1, 1, 1, 1, 2];
            // From port 179: the peer opened the session.
            let mut tcp = vec![0u8; 20];
            tcp[0..2].copy_from_slice(&179u16.to_be_bytes());
            tcp[2..4].copy_from_slice(&43525u16.to_be_bytes());
            tcp[12] = 5 << 4;
            ip.append(&mut tcp);
            // A KEEPALIVE first, then the message of `kind`.
            for t in [4u8, kind] {
                ip.extend([0xff; 16]);
                ip.extend(19u16.to_be_bytes());
                ip.push(t);
            }
            f.extend(ip);
            f
        };
        let peer: IpAddr = "1.1.1.2".parse().unwrap();
        assert!(
            is_update_to(&frame(2), peer),
            "an UPDATE after a KEEPALIVE in one segment"
        );
        assert!(!is_update_to(&frame(4), peer), "KEEPALIVEs only");
        assert!(!is_update_to(&frame(2), "1.1.1.3".parse().unwrap()), "another peer");
    }
}
