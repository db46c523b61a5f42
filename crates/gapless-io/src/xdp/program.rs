//! The AF_XDP receive program (xdp/gapless_xdp.c, built by scripts/build-xdp.sh and embedded
//! here), loaded and attached with aya 0.14. It stamps each frame with the kernel's TAI clock
//! in XDP metadata and redirects it to the AF_XDP socket registered for its RX queue.
//!
//! The attachment is a BPF link where the kernel has them (Linux 5.9+), so it goes away with
//! the process even when the process is killed; aya falls back to netlink on older kernels.

use std::os::fd::AsRawFd;

use aya::maps::XskMap;
use aya::programs::{ProgramError, Xdp, XdpError};
use aya::Ebpf;

use crate::error::IoError;

/// The compiled program (BPF ELF with BTF).
pub static OBJECT: &[u8] = include_bytes!("../../xdp/gapless_xdp.o");
const PROGRAM: &str = "gapless_rx";
const MAP: &str = "gapless_xsks";
/// The metadata the program writes before each frame: TAI ns, then this magic.
pub const META_LEN: usize = 16;
pub const META_MAGIC: u32 = 0x5354_4c47;

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

/// The program, attached to one interface. Dropping it detaches it.
pub struct XdpProgram {
    ebpf: Ebpf,
    /// The mode that ran: Native or Generic.
    pub mode: XdpAttach,
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
        _ => None,
    }
}

impl XdpProgram {
    /// Loads the program and attaches it to `iface` (in the caller's network namespace).
    pub fn attach(iface: &str, ifindex: u32, want: XdpAttach) -> Result<XdpProgram, IoError> {
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
        let prog: &mut Xdp = ebpf
            .program_mut(PROGRAM)
            .ok_or_else(|| IoError::Xdp {
                what: "the embedded XDP object".into(),
                detail: format!("it has no program {PROGRAM:?}"),
                fix: "rebuild it with scripts/build-xdp.sh".into(),
            })?
            .try_into()
            .map_err(|e: ProgramError| IoError::Xdp {
                what: "the embedded XDP object".into(),
                detail: chain(&e),
                fix: "rebuild it with scripts/build-xdp.sh".into(),
            })?;
        prog.load().map_err(|e| match errno(&e) {
            Some(libc::EPERM) | Some(libc::EACCES) => IoError::NotRoot("loading the AF_XDP receive program"),
            _ => IoError::Xdp {
                what: "the kernel refused the AF_XDP receive program".into(),
                detail: chain(&e),
                fix: "it needs bpf_ktime_get_tai_ns (Linux 6.1+); meter with an AF_PACKET socket on older kernels"
                    .into(),
            },
        })?;
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
                Ok(_) => return Ok(XdpProgram { ebpf, mode: m }),
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

/// "native" or "generic".
pub fn attach_name(m: XdpAttach) -> &'static str {
    match m {
        XdpAttach::Auto => "auto",
        XdpAttach::Native => "native",
        XdpAttach::Generic => "generic",
    }
}
