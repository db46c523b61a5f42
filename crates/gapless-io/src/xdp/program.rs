//! The AF_XDP receive programs (xdp/gapless_xdp.c, built by scripts/build-xdp.sh and embedded
//! here), loaded and attached with aya 0.14. Each redirects a queue's frames to the AF_XDP
//! socket registered for it; they differ in where the kernel's RX stamp goes ([`XdpStamp`]).
//! The first the kernel accepts is kept (a probe by loading: DESIGN-NOTES 90), and each one
//! it refused is named with the verifier's own words.
//!
//! The attachment is a BPF link where the kernel has them (Linux 5.9+), so it goes away with
//! the process even when the process is killed; aya falls back to netlink on older kernels.

use std::os::fd::AsRawFd;

use aya::maps::XskMap;
use aya::programs::{ProgramError, Xdp, XdpError};
use aya::Ebpf;

use crate::error::IoError;

/// The compiled programs (BPF ELF with BTF).
pub static OBJECT: &[u8] = include_bytes!("../../xdp/gapless_xdp.o");
const MAP: &str = "gapless_xsks";
/// The metadata the metadata program writes before each frame: TAI ns, then this magic.
pub const META_LEN: usize = 16;
pub const META_MAGIC: u32 = 0x5354_4c47;
/// The prefix the prefix program puts in front of each frame: TAI ns, this magic, then the
/// stamp's low 32 bits inverted.
pub const PREFIX_LEN: usize = 16;
pub const PREFIX_MAGIC: u32 = 0x5054_4c47;

/// Where the program runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum XdpAttach {
    /// Native where the driver has it, else generic.
    Auto,
    /// In the driver (XDP_FLAGS_DRV_MODE): before any skb is made.
    Native,
    /// In the stack (XDP_FLAGS_SKB_MODE): any driver, after the skb is made.
    Generic,
}

/// Where a received frame's stamp comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum XdpStamp {
    /// The first of Metadata, Prefix and Socket whose program the kernel accepts.
    #[default]
    Auto,
    /// The kernel's TAI clock at the XDP hook, in XDP metadata before the frame
    /// (`bpf_xdp_adjust_meta`).
    Metadata,
    /// The same stamp in 16 bytes put in front of the frame (`bpf_xdp_adjust_head`, in the
    /// headroom XDP always keeps), cut off by the meter.
    Prefix,
    /// No kernel stamp: the meter stamps each frame as it reads it from the RX ring, so
    /// the stamp carries the meter's wake-up and batching delay.
    Socket,
}

impl XdpStamp {
    /// The order the probe tries.
    pub const PROBE: [XdpStamp; 3] = [XdpStamp::Metadata, XdpStamp::Prefix, XdpStamp::Socket];

    /// The program in the object that carries this stamp.
    pub fn program(self) -> &'static str {
        match self {
            XdpStamp::Auto | XdpStamp::Metadata => "gapless_rx",
            XdpStamp::Prefix => "gapless_rx_prefix",
            XdpStamp::Socket => "gapless_rx_plain",
        }
    }

    /// The name users give it (`--xdp-stamp`).
    pub fn name(self) -> &'static str {
        match self {
            XdpStamp::Auto => "auto",
            XdpStamp::Metadata => "metadata",
            XdpStamp::Prefix => "prefix",
            XdpStamp::Socket => "socket",
        }
    }

    /// What the stamp is, for the result's timestamp source.
    pub fn describe(self) -> &'static str {
        match self {
            XdpStamp::Auto | XdpStamp::Metadata => "bpf_ktime_get_tai_ns in XDP metadata",
            XdpStamp::Prefix => "bpf_ktime_get_tai_ns in 16 bytes before the frame that the meter cuts off",
            XdpStamp::Socket => "none in the kernel: the meter's CLOCK_REALTIME as it reads the AF_XDP ring",
        }
    }
}

/// The program, attached to one interface. Dropping it detaches it.
pub struct XdpProgram {
    ebpf: Ebpf,
    /// The mode that ran: Native or Generic.
    pub mode: XdpAttach,
    /// The stamp its program carries (never Auto).
    pub stamp: XdpStamp,
    /// The programs the kernel refused before this one, each with the verifier's reason.
    pub refused: Refused,
}

/// An error with its causes, "a: b: c" (aya's messages leave the errno to the source).
fn chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut cur = e.source();
    while let Some(c) = cur {
        let t = c.to_string();
        if !s.contains(&t) {
            s = format!("{s}: {t}");
        }
        cur = c.source();
    }
    s
}

fn errno(e: &ProgramError) -> Option<i32> {
    match e {
        ProgramError::SyscallError(s) => s.io_error.raw_os_error(),
        ProgramError::XdpError(XdpError::NetlinkError(n)) => n.raw_os_error(),
        ProgramError::LoadError { io_error, .. } => io_error.raw_os_error(),
        _ => None,
    }
}

/// What the verifier refused, in its own words: the line naming a helper or function it
/// will not take, else its last line that is not a statistic.
pub fn verifier_reason(log: &str) -> String {
    let lines = || log.lines().map(str::trim).filter(|l| !l.is_empty());
    let named =
        lines().find(|l| l.contains("cannot use helper") || l.contains("unknown func") || l.contains("invalid func"));
    let stat =
        |l: &&str| l.starts_with("processed ") || l.starts_with("verification time") || l.starts_with("stack depth");
    let last = || lines().rfind(|l| !stat(l));
    named.or_else(last).unwrap_or("the verifier gave no reason").to_string()
}

/// The reason a load failed: the verifier's words, else the error itself.
fn load_reason(e: &ProgramError) -> String {
    match e {
        ProgramError::LoadError { io_error, verifier_log } => {
            format!("{io_error}; verifier: {}", verifier_reason(&verifier_log.to_string()))
        }
        e => chain(e),
    }
}

/// The probe's order for a wanted stamp: all three for Auto, else the one asked for.
fn probe_order(want: XdpStamp) -> &'static [XdpStamp] {
    match want {
        XdpStamp::Auto => &XdpStamp::PROBE,
        XdpStamp::Metadata => &XdpStamp::PROBE[..1],
        XdpStamp::Prefix => &XdpStamp::PROBE[1..2],
        XdpStamp::Socket => &XdpStamp::PROBE[2..],
    }
}

/// Programs the kernel refused, each with the verifier's reason.
pub type Refused = Vec<(XdpStamp, String)>;

/// Tries each stamp of `order` with `load` until one loads, and returns it with those the
/// kernel refused before it. When every one is refused, the refusals; a failure that is not
/// a refusal (such as a missing permission) ends the probe at once.
pub fn probe<E>(
    order: &[XdpStamp],
    mut load: impl FnMut(XdpStamp) -> Result<(), LoadFailure<E>>,
) -> Result<(XdpStamp, Refused), LoadFailure<E>> {
    let mut refused = Vec::new();
    for &s in order {
        match load(s) {
            Ok(()) => return Ok((s, refused)),
            Err(LoadFailure::Refused(why)) => refused.push((s, why)),
            Err(e) => return Err(e),
        }
    }
    Err(LoadFailure::AllRefused(refused))
}

/// Why a program was not loaded.
#[derive(Debug)]
pub enum LoadFailure<E> {
    /// The kernel refused this program (the verifier's reason); another may load.
    Refused(String),
    /// The kernel refused every program the probe tried.
    AllRefused(Refused),
    /// Anything else (the object, a missing permission): no other program would load.
    Other(E),
}

/// "the metadata stamp's program (gapless_rx): …; the prefix stamp's program …".
pub fn refusals_text(refused: &[(XdpStamp, String)]) -> String {
    refused
        .iter()
        .map(|(s, why)| format!("the {} stamp's program ({}): {why}", s.name(), s.program()))
        .collect::<Vec<_>>()
        .join("; ")
}

impl XdpProgram {
    /// Loads the program that carries `stamp` (for Auto the first of them the kernel takes)
    /// and attaches it to `iface` (in the caller's network namespace).
    pub fn attach(iface: &str, ifindex: u32, want: XdpAttach, stamp: XdpStamp) -> Result<XdpProgram, IoError> {
        let mut ebpf = Ebpf::load(OBJECT).map_err(|e| {
            let perm = matches!(&e, aya::EbpfError::MapError(aya::maps::MapError::CreateError { io_error, .. })
                if matches!(io_error.raw_os_error(), Some(libc::EPERM) | Some(libc::EACCES)));
            if perm {
                IoError::NotRoot("loading the AF_XDP receive program")
            } else {
                IoError::Xdp {
                    what: "loading the AF_XDP receive program".into(),
                    detail: chain(&e),
                    fix: "run as root on a kernel with BPF and XDP (Linux 5.9+), or meter with an AF_PACKET socket"
                        .into(),
                }
            }
        })?;
        let (stamp, refused) = load_stamp(&mut ebpf, stamp)?;
        let prog: &mut Xdp = program(&mut ebpf, stamp.program())?;
        let order: &[XdpAttach] = match want {
            XdpAttach::Auto => &[XdpAttach::Native, XdpAttach::Generic],
            XdpAttach::Native => &[XdpAttach::Native],
            XdpAttach::Generic => &[XdpAttach::Generic],
        };
        let mut last = None;
        for &m in order {
            let flags = match m {
                XdpAttach::Generic => aya::programs::XdpMode::Skb,
                _ => aya::programs::XdpMode::Driver,
            };
            match prog.attach_to_if_index(ifindex, flags) {
                Ok(_) => {
                    return Ok(XdpProgram {
                        ebpf,
                        mode: m,
                        stamp,
                        refused,
                    })
                }
                Err(e) => {
                    let code = errno(&e);
                    if matches!(code, Some(libc::EBUSY) | Some(libc::EEXIST)) {
                        return Err(IoError::XdpProgramAttached {
                            iface: iface.to_string(),
                        });
                    }
                    if matches!(code, Some(libc::EPERM) | Some(libc::EACCES)) {
                        return Err(IoError::NotRoot("attaching an XDP program"));
                    }
                    last = Some((m, e));
                }
            }
        }
        let (m, e) = last.expect("at least one mode tried");
        Err(match (m, errno(&e)) {
            (XdpAttach::Native, Some(libc::EOPNOTSUPP)) => IoError::XdpNoNative {
                iface: iface.to_string(),
                detail: chain(&e),
            },
            _ => IoError::Xdp {
                what: format!("attaching XDP to {iface} ({})", attach_name(m)),
                detail: chain(&e),
                fix: "check `ip -d link show` for the interface; or meter with an AF_PACKET socket".into(),
            },
        })
    }

    /// Sends the frames of RX queue `queue` to the AF_XDP socket `fd`.
    pub fn register(&mut self, queue: u32, fd: &impl AsRawFd) -> Result<(), IoError> {
        let map = self.ebpf.map_mut(MAP).ok_or_else(|| IoError::Xdp {
            what: "the embedded XDP object".into(),
            detail: format!("it has no map {MAP:?}"),
            fix: "rebuild it with scripts/build-xdp.sh".into(),
        })?;
        let mut xsks = XskMap::try_from(map).map_err(|e| IoError::Xdp {
            what: "the XSKMAP of the XDP program".into(),
            detail: chain(&e),
            fix: "rebuild it with scripts/build-xdp.sh".into(),
        })?;
        xsks.set(queue, fd.as_raw_fd(), 0).map_err(|e| IoError::Xdp {
            what: format!("registering the AF_XDP socket for queue {queue}"),
            detail: chain(&e),
            fix: format!("queue {queue} must be below the map's {} entries", xsks.len()),
        })
    }
}

/// The program `name` of the object, as an XDP program.
fn program<'a>(ebpf: &'a mut Ebpf, name: &str) -> Result<&'a mut Xdp, IoError> {
    ebpf.program_mut(name)
        .ok_or_else(|| IoError::Xdp {
            what: "the embedded XDP object".into(),
            detail: format!("it has no program {name:?}"),
            fix: "rebuild it with scripts/build-xdp.sh".into(),
        })?
        .try_into()
        .map_err(|e: ProgramError| IoError::Xdp {
            what: "the embedded XDP object".into(),
            detail: chain(&e),
            fix: "rebuild it with scripts/build-xdp.sh".into(),
        })
}

/// Loads the program of the stamp wanted (for Auto, the first the kernel takes): the stamp
/// loaded and the ones refused before it, or an error naming each refusal.
fn load_stamp(ebpf: &mut Ebpf, want: XdpStamp) -> Result<(XdpStamp, Refused), IoError> {
    probe(probe_order(want), |s| load_one(ebpf, s.program())).map_err(|e| match e {
        LoadFailure::Other(e) => e,
        LoadFailure::AllRefused(refused) => IoError::Xdp {
            what: "the kernel refused the AF_XDP receive program".into(),
            detail: refusals_text(&refused),
            fix: match refused.as_slice() {
                [(XdpStamp::Metadata | XdpStamp::Prefix, _)] => {
                    "leave --xdp-stamp at auto, so gapless takes the next stamp this kernel accepts; or meter with an AF_PACKET socket".into()
                }
                _ => "this kernel takes no XDP program that redirects to AF_XDP: meter with an AF_PACKET socket (--rx-backend afpacket)".into(),
            },
        },
        LoadFailure::Refused(why) => IoError::Xdp {
            what: "the kernel refused the AF_XDP receive program".into(),
            detail: why,
            fix: "meter with an AF_PACKET socket".into(),
        },
    })
}

/// Loads program `name` into the kernel (BPF_PROG_LOAD).
fn load_one(ebpf: &mut Ebpf, name: &str) -> Result<(), LoadFailure<IoError>> {
    let prog = program(ebpf, name).map_err(LoadFailure::Other)?;
    prog.load().map_err(|e| {
        // EACCES is also the verifier's answer to a bad access: only without its log is it
        // a missing permission.
        let silent =
            matches!(&e, ProgramError::LoadError { verifier_log, .. } if verifier_log.to_string().trim().is_empty());
        match errno(&e) {
            Some(libc::EPERM) => LoadFailure::Other(IoError::NotRoot("loading the AF_XDP receive program")),
            Some(libc::EACCES) if silent => LoadFailure::Other(IoError::NotRoot("loading the AF_XDP receive program")),
            _ => LoadFailure::Refused(load_reason(&e)),
        }
    })
}

/// "native" or "generic".
pub fn attach_name(m: XdpAttach) -> &'static str {
    match m {
        XdpAttach::Auto => "auto",
        XdpAttach::Native => "native",
        XdpAttach::Generic => "generic",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A verifier log ending as issue 66 quotes build v1300's: the refused helper's line,
    /// then the verifier's statistics.
    const V1300: &str = "19: (85) call bpf_xdp_adjust_meta#54\nprogram of this type cannot use helper bpf_xdp_adjust_meta#54\nprocessed 20 insns (limit 1000000) max_states_per_insn 0 total_states 1 peak_states 1 mark_read 1\n";

    #[test]
    fn the_reason_is_the_helper_the_verifier_refused() {
        assert_eq!(
            verifier_reason(V1300),
            "program of this type cannot use helper bpf_xdp_adjust_meta#54"
        );
        // Else its last line that is not a statistic.
        assert_eq!(
            verifier_reason(
                "0: R1=ctx()\nR2 invalid mem access 'scalar'\nprocessed 3 insns\nverification time 5 usec\n"
            ),
            "R2 invalid mem access 'scalar'"
        );
        assert_eq!(verifier_reason(""), "the verifier gave no reason");
    }

    #[test]
    fn the_probe_keeps_the_first_program_the_kernel_takes_and_names_the_others() {
        // A kernel that refuses the metadata helper, as build v1300 did.
        let kernel = |refuse: &'static [XdpStamp]| {
            move |s: XdpStamp| -> Result<(), LoadFailure<&'static str>> {
                if refuse.contains(&s) {
                    Err(LoadFailure::Refused(format!("{} refused", s.program())))
                } else {
                    Ok(())
                }
            }
        };
        let (s, refused) = probe(probe_order(XdpStamp::Auto), kernel(&[XdpStamp::Metadata])).unwrap();
        assert_eq!(s, XdpStamp::Prefix);
        assert_eq!(refused, vec![(XdpStamp::Metadata, "gapless_rx refused".to_string())]);
        assert!(refusals_text(&refused).contains("the metadata stamp's program (gapless_rx): gapless_rx refused"));
        let (s, refused) = probe(
            probe_order(XdpStamp::Auto),
            kernel(&[XdpStamp::Metadata, XdpStamp::Prefix]),
        )
        .unwrap();
        assert_eq!((s, refused.len()), (XdpStamp::Socket, 2));
        // A kernel that takes them all keeps the metadata stamp and names no refusal.
        assert_eq!(
            probe(probe_order(XdpStamp::Auto), kernel(&[])).unwrap(),
            (XdpStamp::Metadata, vec![])
        );
        // A stamp asked for is the only one tried.
        match probe(probe_order(XdpStamp::Metadata), kernel(&[XdpStamp::Metadata])) {
            Err(LoadFailure::AllRefused(r)) => assert_eq!(r.len(), 1),
            other => panic!("expected the one refusal, got {other:?}"),
        }
        // Anything but a refusal ends the probe: no other program would load.
        let mut tried = Vec::new();
        let r = probe(probe_order(XdpStamp::Auto), |s| {
            tried.push(s);
            Err(LoadFailure::Other("not root"))
        });
        assert!(matches!(r, Err(LoadFailure::Other("not root"))));
        assert_eq!(tried, [XdpStamp::Metadata]);
    }

    #[test]
    fn the_object_holds_each_stamp_s_program() {
        let ebpf_text = String::from_utf8_lossy(OBJECT);
        for s in XdpStamp::PROBE {
            assert!(
                ebpf_text.contains(s.program()),
                "{} missing from the object",
                s.program()
            );
        }
    }
}
