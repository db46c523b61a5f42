//! Which IS-IS frame on the wire is an LSP (sans IO): `protocol.route` times a range's
//! withdrawal or advertise by the first LSP the device sends after the command.

/// Whether an Ethernet frame is an IS-IS LSP (L1 or L2): an 802.3 frame (length, not type,
/// after the addresses and any VLAN tags) with LLC FE FE 03, then IS-IS (0x83) PDU type 18 or 20.
pub fn is_lsp(f: &[u8]) -> bool {
    let mut off = 12;
    while matches!(f.get(off..off + 2), Some([0x81, 0x00] | [0x88, 0xa8])) {
        off += 4;
    }
    // Length, LLC (3), then IS-IS: 0x83, header length, version, id length, PDU type.
    let Some(h) = f.get(off..off + 10) else { return false };
    let len = u16::from_be_bytes([h[0], h[1]]);
    len < 0x0600 && h[2..5] == [0xfe, 0xfe, 0x03] && h[5] == 0x83 && matches!(h[9] & 0x1f, 18 | 20)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_isis_lsp_is_told_from_a_hello_and_from_ethernet_ii() {
        let frame = |pdu: u8, vlan: bool| {
            let mut f = vec![0x01, 0x80, 0xc2, 0, 0, 0x15, 2, 0, 0, 0, 0, 1];
            if vlan {
                f.extend([0x81, 0x00, 0, 100]);
            }
            f.extend(40u16.to_be_bytes());
            f.extend([0xfe, 0xfe, 0x03, 0x83, 27, 1, 0, pdu]);
            f.extend([0u8; 30]);
            f
        };
        assert!(is_lsp(&frame(20, false)) && is_lsp(&frame(18, true)), "L2 and L1 LSPs");
        assert!(!is_lsp(&frame(17, false)), "a p2p hello");
        let mut ip = frame(20, false);
        ip[12..14].copy_from_slice(&0x0800u16.to_be_bytes());
        assert!(!is_lsp(&ip), "an Ethernet II frame");
    }
}
