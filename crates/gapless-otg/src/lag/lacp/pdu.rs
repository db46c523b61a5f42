//! LACPDUs (IEEE 802.1AX-2014, 6.4.2): a slow-protocols frame to 01:80:c2:00:00:02,
//! EtherType 0x8809, subtype 1, version 1, the actor's and the partner's information, the
//! collector's max delay, a terminator, padded to 110 bytes after the EtherType.

/// The slow protocols group address and EtherType.
pub const DST: [u8; 6] = [0x01, 0x80, 0xc2, 0x00, 0x00, 0x02];
pub const ETHERTYPE: u16 = 0x8809;
const SUBTYPE: u8 = 1;
const VERSION: u8 = 1;
/// The LACPDU after the EtherType: 110 bytes, reserved bytes and padding included.
const BODY: usize = 110;

/// The state bits of an actor's or partner's information (6.4.2.3).
pub mod state {
    pub const ACTIVITY: u8 = 0x01;
    /// Short timeout (3 s); clear: long (90 s).
    pub const TIMEOUT: u8 = 0x02;
    pub const AGGREGATION: u8 = 0x04;
    pub const SYNCHRONIZATION: u8 = 0x08;
    pub const COLLECTING: u8 = 0x10;
    pub const DISTRIBUTING: u8 = 0x20;
    pub const DEFAULTED: u8 = 0x40;
    pub const EXPIRED: u8 = 0x80;
}

/// One side's information: who it is, which aggregation key and port, and its state.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Info {
    pub system_priority: u16,
    pub system: [u8; 6],
    pub key: u16,
    pub port_priority: u16,
    pub port: u16,
    pub state: u8,
}

impl Info {
    /// Whether two informations name the same system, key and port (the state aside).
    pub fn same_port(&self, o: &Info) -> bool {
        (
            self.system_priority,
            self.system,
            self.key,
            self.port_priority,
            self.port,
        ) == (o.system_priority, o.system, o.key, o.port_priority, o.port)
    }

    fn write(&self, tlv: u8, out: &mut Vec<u8>) {
        out.extend([tlv, 20]);
        out.extend(self.system_priority.to_be_bytes());
        out.extend(self.system);
        out.extend(self.key.to_be_bytes());
        out.extend(self.port_priority.to_be_bytes());
        out.extend(self.port.to_be_bytes());
        out.extend([self.state, 0, 0, 0]);
    }

    fn read(b: &[u8]) -> Info {
        let u16_at = |i: usize| u16::from_be_bytes([b[i], b[i + 1]]);
        let mut system = [0u8; 6];
        system.copy_from_slice(&b[4..10]);
        Info {
            system_priority: u16_at(2),
            system,
            key: u16_at(10),
            port_priority: u16_at(12),
            port: u16_at(14),
            state: b[16],
        }
    }
}

/// One LACPDU.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Lacpdu {
    pub actor: Info,
    pub partner: Info,
    /// Tens of microseconds (6.4.2.3).
    pub collector_max_delay: u16,
}

impl Lacpdu {
    /// The whole frame from `src` (the member's own MAC).
    pub fn encode(&self, src: [u8; 6]) -> Vec<u8> {
        let mut f = Vec::with_capacity(14 + BODY);
        f.extend(DST);
        f.extend(src);
        f.extend(ETHERTYPE.to_be_bytes());
        f.extend([SUBTYPE, VERSION]);
        self.actor.write(1, &mut f);
        self.partner.write(2, &mut f);
        f.extend([3, 16]);
        f.extend(self.collector_max_delay.to_be_bytes());
        f.extend([0u8; 12]);
        f.extend([0, 0]);
        f.resize(14 + BODY, 0);
        f
    }

    /// A received frame as an LACPDU, or what is wrong with it.
    pub fn decode(frame: &[u8]) -> Result<Lacpdu, String> {
        if frame.len() < 14 + 2 + 2 * 20 + 16 + 2 {
            return Err(format!("{} bytes is too short for an LACPDU", frame.len()));
        }
        if frame[12..14] != ETHERTYPE.to_be_bytes() || frame[14] != SUBTYPE {
            return Err("not an LACPDU (EtherType 0x8809, subtype 1)".into());
        }
        // A later version is read as version 1 (6.4.2.3: no version check on receive).
        let b = &frame[16..];
        if b[0] != 1 || b[1] != 20 || b[20] != 2 || b[21] != 20 || b[40] != 3 || b[41] != 16 {
            return Err("the actor, partner and collector TLVs are not where 802.1AX puts them".into());
        }
        Ok(Lacpdu {
            actor: Info::read(&b[0..20]),
            partner: Info::read(&b[20..40]),
            collector_max_delay: u16::from_be_bytes([b[42], b[43]]),
        })
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A crafted LACPDU, byte by byte as 802.1AX 6.4.2.2 lays it out (not through
    /// `encode`): actor system 0e:ad:5e:71:c9:4a priority 1, key 1, port 1, state 0x3d (active,
    /// aggregatable, in sync, collecting, distributing); partner priority 0xffff, port 2, 0x3f.
    fn crafted() -> Vec<u8> {
        let mut f = vec![
            0x01, 0x80, 0xc2, 0, 0, 0x02, 0xaa, 0x1b, 0x2c, 0x3d, 0x4e, 0x5f, 0x88, 0x09, 1, 1,
        ];
        f.extend([
            1, 20, 0, 1, 0x0e, 0xad, 0x5e, 0x71, 0xc9, 0x4a, 0, 1, 0, 1, 0, 1, 0x3d, 0, 0, 0,
        ]);
        f.extend([
            2, 20, 0xff, 0xff, 0x02, 0x67, 0x6c, 0, 0, 1, 0, 1, 0, 0xff, 0, 2, 0x3f, 0, 0, 0,
        ]);
        f.extend([3, 16, 0, 5]);
        f.extend([0u8; 12]);
        f.extend([0, 0]);
        f.resize(14 + 110, 0);
        f
    }

    #[test]
    fn reads_an_lacpdu_and_writes_it_back_the_same() {
        let frame = crafted();
        let p = Lacpdu::decode(&frame).unwrap();
        assert_eq!(p.actor.system, [0x0e, 0xad, 0x5e, 0x71, 0xc9, 0x4a]);
        assert_eq!((p.actor.key, p.actor.port, p.actor.system_priority), (1, 1, 1));
        assert_eq!(
            p.actor.state, 0x3d,
            "active, aggregatable, in sync, collecting, distributing"
        );
        assert_eq!((p.partner.system_priority, p.partner.port), (0xffff, 2));
        assert_eq!(p.partner.state, 0x3f);
        let mut src = [0u8; 6];
        src.copy_from_slice(&frame[6..12]);
        assert_eq!(p.encode(src), frame, "the frame written back is the one read");
        assert_eq!(p.collector_max_delay, 5);
    }

    /// Two LACPDUs Open vSwitch 3.1.0 (Debian) sent on a veth of this machine, from a bond
    /// with `lacp=active other_config:lacp-time=fast` and no partner yet (tcpdump, one second
    /// apart): first expired (0xbf), then defaulted (0x77).
    pub(crate) const OVS_EXPIRED: &str = "0180c200000216cb7b113895880901010114fffe2aea62fc224f0001ffff0001bf00000002140000000000000000000000000000020000000310000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000";
    pub(crate) const OVS_DEFAULTED: &str = "0180c200000216cb7b113895880901010114fffe2aea62fc224f0001ffff00017700000002140000000000000000000000000000000000000310000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000";

    pub(crate) fn hex(s: &str) -> Vec<u8> {
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
            .collect()
    }

    #[test]
    fn reads_open_vswitchs_lacpdus() {
        let p = Lacpdu::decode(&hex(OVS_EXPIRED)).unwrap();
        assert_eq!(p.actor.system, [0x2a, 0xea, 0x62, 0xfc, 0x22, 0x4f]);
        assert_eq!(
            (
                p.actor.system_priority,
                p.actor.key,
                p.actor.port_priority,
                p.actor.port
            ),
            (0xfffe, 1, 0xffff, 1)
        );
        assert_eq!(p.actor.state, 0xbf);
        assert_eq!((p.partner.system, p.partner.state), ([0; 6], state::TIMEOUT));
        let q = Lacpdu::decode(&hex(OVS_DEFAULTED)).unwrap();
        let want = state::ACTIVITY
            | state::TIMEOUT
            | state::AGGREGATION
            | state::COLLECTING
            | state::DISTRIBUTING
            | state::DEFAULTED;
        assert_eq!(q.actor.state, want);
        let frame = hex(OVS_DEFAULTED);
        let mut src = [0u8; 6];
        src.copy_from_slice(&frame[6..12]);
        assert_eq!(q.encode(src), frame, "written back byte for byte");
    }

    #[test]
    fn refuses_what_is_not_an_lacpdu() {
        let mut f = crafted();
        assert!(Lacpdu::decode(&f[..40]).unwrap_err().contains("too short"));
        f[14] = 2; // a marker PDU
        assert!(Lacpdu::decode(&f).unwrap_err().contains("not an LACPDU"));
        let mut g = crafted();
        g[16 + 20] = 9;
        assert!(Lacpdu::decode(&g).unwrap_err().contains("TLVs"));
    }
}
