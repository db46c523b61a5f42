use super::*;
use crate::kernel::nic::ip;

/// The classic BPF instructions `to_devices` uses, run on `frame`: what the kernel keeps.
fn run_filter(f: &[libc::sock_filter], frame: &[u8]) -> u32 {
    let (mut pc, mut a) = (0usize, 0u32);
    let at = |k: u32, n: usize| {
        frame
            .get(k as usize..k as usize + n)
            .map(|b| b.iter().fold(0u32, |x, &y| x << 8 | u32::from(y)))
    };
    loop {
        let i = f[pc];
        pc += 1;
        match i.code {
            0x30 | 0x28 | 0x20 => {
                let n = [(0x30, 1), (0x28, 2), (0x20, 4)]
                    .iter()
                    .find(|c| c.0 == i.code)
                    .unwrap()
                    .1;
                match at(i.k, n) {
                    Some(v) => a = v,
                    None => return 0, // a load past the end drops the frame, as the kernel does
                }
            }
            0x15 | 0x45 => {
                let hit = if i.code == 0x15 { a == i.k } else { a & i.k != 0 };
                pc += usize::from(if hit { i.jt } else { i.jf });
            }
            0x06 => return i.k,
            c => panic!("unexpected instruction {c:#x}"),
        }
    }
}

fn frame(dst: [u8; 6], ethertype: u16) -> Vec<u8> {
    let mut f = dst.to_vec();
    f.extend_from_slice(&[2, 0, 0, 0, 0, 0x99]);
    f.extend_from_slice(&ethertype.to_be_bytes());
    f.resize(60, 0);
    f
}

const D1: [u8; 6] = [0x02, 0x11, 0x22, 0x33, 0x44, 0x55];
const D2: [u8; 6] = [0x02, 0x11, 0x22, 0x33, 0x44, 0x66];

#[test]
fn a_members_filter_takes_the_devices_and_group_frames_but_not_lacp_or_lldp() {
    let f = to_devices(&[D1, D2]);
    let taken = |dst, et| run_filter(&f, &frame(dst, et)) > 0;
    assert!(
        taken(D1, 0x0800) && taken(D2, 0x0806),
        "expected the devices' own frames taken"
    );
    assert!(taken([0xff; 6], 0x0806), "expected a broadcast ARP taken");
    assert!(taken([0x33, 0x33, 0, 0, 0, 1], 0x86dd), "expected IPv6 multicast taken");
    assert!(
        taken([0x01, 0x80, 0xc2, 0, 0, 0x14], 0x0022),
        "expected IS-IS's group taken"
    );
    assert!(
        !taken([0x01, 0x80, 0xc2, 0, 0, 2], 0x8809),
        "expected LACPDUs left to the LAG's driver"
    );
    assert!(!taken([0x01, 0x80, 0xc2, 0, 0, 0x0e], 0x88cc), "expected LLDP left out");
    for other in [
        [0x02, 0x11, 0x22, 0x33, 0x44, 0x77], // the last byte differs
        [0x02, 0x12, 0x22, 0x33, 0x44, 0x55], // the second
        [0x04, 0x11, 0x22, 0x33, 0x44, 0x55], // the first
    ] {
        assert!(!taken(other, 0x0800), "expected a frame to {other:02x?} dropped");
    }
}

#[test]
fn past_sixty_devices_every_unicast_frame_is_taken() {
    let macs: Vec<[u8; 6]> = (0..61u8).map(|k| [2, 0, 0, 0, 1, k]).collect();
    let f = to_devices(&macs);
    assert!(run_filter(&f, &frame([2, 9, 9, 9, 9, 9], 0x0800)) > 0);
    assert_eq!(run_filter(&f, &frame([0x01, 0x80, 0xc2, 0, 0, 2], 0x8809)), 0);
    // Sixty fit, each jump within reach.
    let macs: Vec<[u8; 6]> = (0..60u8).map(|k| [2, 0, 0, 0, 1, k]).collect();
    let f = to_devices(&macs);
    assert!(macs.iter().all(|m| run_filter(&f, &frame(*m, 0x0800)) > 0));
    assert_eq!(run_filter(&f, &frame([2, 0, 0, 0, 1, 60], 0x0800)), 0);
}

/// A scratch namespace with two member veths (`m0`, `m1`, their far ends `f0`, `f1`),
/// removed when dropped.
struct Scratch(String);

impl Scratch {
    fn new() -> Scratch {
        assert!(
            crate::kernel::nic::is_root(),
            "expected to run as root (CI does): the test makes namespaces"
        );
        let ns = format!("gl-lagif-test-{}", std::process::id());
        let _ = ip(&["netns", "del", &ns]);
        ip(&["netns", "add", &ns]).unwrap();
        ip_batch(
            Some(&ns),
            "link add m0 type veth peer name f0\nlink add m1 type veth peer name f1\n\
             link set m0 up\nlink set f0 up\nlink set m1 up\nlink set f1 up\n",
        )
        .unwrap();
        Scratch(ns)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = ip(&["netns", "del", &self.0]);
    }
}

/// A socket on `iface` in `ns` that sends and reads every frame.
fn raw(ns: &str, iface: &str) -> OwnedFd {
    in_netns(Some(ns), || open(iface, None)).unwrap()
}

/// The frames `fd` gets (their tags put back) that `keep` takes, until there are `n` of them
/// or 10 s have passed: a host that stops the VM for a moment only delays them.
fn frames(fd: &OwnedFd, n: usize, keep: impl Fn(&[u8]) -> bool) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    let mut buf = vec![0u8; 4000];
    let t0 = std::time::Instant::now();
    while out.len() < n && t0.elapsed() < Duration::from_secs(10) {
        match recv(fd.as_raw_fd(), &mut buf) {
            Some(0) => {}
            Some(len) if keep(&buf[..len]) => out.push(buf[..len].to_vec()),
            Some(_) => {}
            None => std::thread::sleep(Duration::from_millis(1)),
        }
    }
    out
}

/// What `fd` has queued now that `keep` takes.
fn queued(fd: &OwnedFd, keep: impl Fn(&[u8]) -> bool) -> usize {
    let mut buf = vec![0u8; 4000];
    let mut n = 0;
    while let Some(len) = recv(fd.as_raw_fd(), &mut buf) {
        n += usize::from(len > 0 && keep(&buf[..len]));
    }
    n
}

fn udp_from(src: [u8; 6], sport: u16) -> Vec<u8> {
    let mut f = vec![0xff; 6];
    f.extend_from_slice(&src);
    f.extend_from_slice(&[
        0x08, 0x00, 0x45, 0, 0, 28, 0, 0, 0, 0, 64, 17, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2,
    ]);
    f.extend_from_slice(&sport.to_be_bytes());
    f.extend_from_slice(&[0, 9, 0, 8, 0, 0]);
    f.resize(60, 0);
    f
}

#[test]
fn frames_go_between_the_devices_end_and_the_members_that_distribute() {
    let s = Scratch::new();
    let live = Arc::new(LagLive::all(2));
    let spec = LagIfaceSpec {
        netns: format!("{}{}-lagtest", crate::devices::hosts::NETNS_PREFIX, std::process::id()),
        outer: "glo".into(),
        inner: "gli".into(),
        members: vec![("m0".into(), Some(s.0.clone())), ("m1".into(), Some(s.0.clone()))],
        macs: vec![D1],
        mtu: 1500,
    };
    let lag = LagIface::create(spec, live.clone()).unwrap();
    let (inner, ns) = lag.inner();
    let dev = raw(ns, inner);
    let far = [raw(&s.0, "f0"), raw(&s.0, "f1")];
    let from = |mac: [u8; 6]| move |f: &[u8]| f[6..12] == mac;
    // Out: another MAC's frame stays in; then the device's frames spread over both members by
    // their hash (the forwarder reads in order: once they are out, the first was passed on).
    send(&dev, &udp_from(D2, 1));
    for sport in 0..64u16 {
        send(&dev, &udp_from(D1, sport));
    }
    for (k, f) in far.iter().enumerate() {
        let want: Vec<Vec<u8>> = (0..64)
            .map(|p| udp_from(D1, p))
            .filter(|f| LagLive::pick(&[0, 1], f) == k)
            .collect();
        let got = frames(f, want.len(), from(D1));
        assert_eq!(
            got, want,
            "expected member {k} to carry the frames its hash picks, in order"
        );
        assert!(
            got.len() >= 16,
            "expected each member to carry a quarter or more; member {k} carried {}",
            got.len()
        );
        assert_eq!(
            queued(f, |x: &[u8]| x[6..12] == D1 || x[6..12] == D2),
            0,
            "expected no other frame on member {k}"
        );
    }
    // In: to the device (tagged or not) and to a group; not LACP's, nor another MAC's.
    let peer = [2, 0, 0, 0, 0, 0x99];
    let mut tagged = frame(D1, 0x8100);
    tagged[14..18].copy_from_slice(&[0x20, 0x64, 0x08, 0x00]); // priority 1, VLAN 100, IPv4
    for f in [
        frame(D1, 0x0800),
        frame([0xff; 6], 0x0806),
        frame([0x01, 0x80, 0xc2, 0, 0, 2], 0x8809),
        frame(D2, 0x0800),
        tagged.clone(),
    ] {
        send(&far[0], &f);
    }
    let got = frames(&dev, 3, from(peer));
    assert_eq!(
        got.len(),
        3,
        "expected the device's two frames and the broadcast in; got {got:02x?}"
    );
    assert_eq!(got[2][..18], tagged[..18], "expected the VLAN tag put back as it came");
    assert_eq!(
        queued(&dev, from(peer)),
        0,
        "expected LACP's and another MAC's frames kept out"
    );
    // A member that stops distributing neither sends nor takes in.
    live.set(1, false);
    send(&far[1], &frame(D1, 0x0800));
    std::thread::sleep(Duration::from_millis(50));
    let mut sentinel = frame(D1, 0x0800);
    sentinel[11] = 0x98;
    send(&far[0], &sentinel);
    assert_eq!(
        frames(&dev, 1, from([2, 0, 0, 0, 0, 0x98])).len(),
        1,
        "expected member 0 still to take in"
    );
    assert_eq!(
        queued(&dev, from(peer)),
        0,
        "expected nothing in from member 1 once it stopped"
    );
    for sport in 0..16u16 {
        send(&dev, &udp_from(D1, sport));
    }
    assert_eq!(
        frames(&far[0], 16, from(D1)).len(),
        16,
        "expected member 0 to carry all"
    );
    assert_eq!(
        queued(&far[1], from(D1)),
        0,
        "expected nothing on member 1 once it stopped"
    );
    let ns = ns.to_string();
    drop(lag);
    assert!(
        !std::path::Path::new("/run/netns").join(&ns).exists(),
        "expected the LAG's namespace gone with it"
    );
}
