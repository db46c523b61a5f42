//! Which LAG member a frame leaves on: a hash of the fields a switch hashes (the Ethernet
//! addresses, the IP addresses and protocol, and the TCP/UDP/SCTP ports of an unfragmented
//! packet), so that one conversation stays on one member and varying fields spread a flow.
//! VLAN tags (802.1Q, 802.1ad) are stepped over. A frame too short for a header is hashed
//! on what it has.

/// FNV-1a over `bytes`, into `h`.
fn fold(mut h: u64, bytes: &[u8]) -> u64 {
    for &b in bytes {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

/// The frame's spreading hash.
pub fn hash(frame: &[u8]) -> u32 {
    let mut h = fold(0xcbf2_9ce4_8422_2325, frame.get(..12).unwrap_or(frame));
    let mut at = 12;
    let mut ethertype = be16(frame, at);
    while matches!(ethertype, Some(0x8100 | 0x88a8)) {
        at += 4;
        ethertype = be16(frame, at);
    }
    let l3 = at + 2;
    let l4 = match ethertype {
        Some(0x0800) => ipv4(frame, l3, &mut h),
        Some(0x86dd) => ipv6(frame, l3, &mut h),
        _ => None,
    };
    if let Some(l4) = l4 {
        h = fold(h, frame.get(l4..l4 + 4).unwrap_or_default());
    }
    // The high bits mix best: FNV's low bits follow the last bytes' low bits.
    ((h >> 32) ^ h) as u32
}

fn be16(f: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_be_bytes([*f.get(at)?, *f.get(at + 1)?]))
}

/// IPv4's addresses and protocol into `h`; where its ports are, when it has them.
fn ipv4(f: &[u8], l3: usize, h: &mut u64) -> Option<usize> {
    let ihl = usize::from(*f.get(l3)? & 0x0f) * 4;
    let proto = *f.get(l3 + 9)?;
    *h = fold(*h, f.get(l3 + 12..l3 + 20)?);
    *h = fold(*h, &[proto]);
    let frag = be16(f, l3 + 6)? & 0x3fff;
    (frag == 0 && has_ports(proto)).then_some(l3 + ihl)
}

/// IPv6's addresses and next header into `h` (no extension headers walked).
fn ipv6(f: &[u8], l3: usize, h: &mut u64) -> Option<usize> {
    let next = *f.get(l3 + 6)?;
    *h = fold(*h, f.get(l3 + 8..l3 + 40)?);
    *h = fold(*h, &[next]);
    has_ports(next).then_some(l3 + 40)
}

fn has_ports(proto: u8) -> bool {
    matches!(proto, 6 | 17 | 132)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn udp(src_port: u16, vlan: bool) -> Vec<u8> {
        let mut f = vec![2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1];
        if vlan {
            f.extend([0x81, 0x00, 0x00, 0x64]);
        }
        f.extend([
            0x08, 0x00, 0x45, 0, 0, 46, 0, 0, 0, 0, 64, 17, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2,
        ]);
        f.extend(src_port.to_be_bytes());
        f.extend([0x04, 0xd2, 0, 26, 0, 0]);
        f.resize(f.len() + 18, 0);
        f
    }

    #[test]
    fn one_conversation_hashes_alike_and_varying_ports_spread_evenly() {
        assert_eq!(hash(&udp(5000, false)), hash(&udp(5000, false)));
        let mut on = [0u32; 2];
        for p in 0..1000u16 {
            on[(hash(&udp(1024 + p, false)) % 2) as usize] += 1;
        }
        assert!(
            on.iter().all(|&n| (400..=600).contains(&n)),
            "expected about 500 frames on each of 2 members; got {on:?}"
        );
        let mut on4 = [0u32; 4];
        for p in 0..1000u16 {
            on4[(hash(&udp(1024 + p, true)) % 4) as usize] += 1;
        }
        assert!(
            on4.iter().all(|&n| (180..=320).contains(&n)),
            "expected about 250 on each of 4 (VLAN-tagged); got {on4:?}"
        );
    }

    #[test]
    fn payload_bytes_and_the_ip_id_do_not_move_a_frame() {
        let a = udp(5000, false);
        let mut b = a.clone();
        b[18] = 0x55; // the IP identification
        let n = b.len();
        b[n - 1] = 0x77; // the payload
        assert_eq!(hash(&a), hash(&b));
        let mut c = a.clone();
        c[20] = 0x20; // more fragments: the ports are not the packet's to hash
        c[35] = 0x99;
        let mut d = c.clone();
        d[35] = 0x11;
        assert_eq!(hash(&c), hash(&d), "a fragment is hashed without ports");
        assert_eq!(hash(&[1, 2, 3]), hash(&[1, 2, 3]), "a runt is hashed on what it has");
    }
}
