//! One meter over several receiving ports: the sources are drained in turn, each frame
//! tagged with its port's index ([`RxFrame::port`]), so a flow that moves from one port to
//! another (a failover) is one sequence to the meter.
//!
//! Frames are handed over in the order of their stamps. Each ring is in time order, but a
//! ring hands over a block of frames when it is full or 8 ms old, so a block of one port may
//! be read before an older block of another. With software stamps (CLOCK_REALTIME, as the
//! XDP program's too) the frames are therefore held back [`HOLD_NS`] after their stamp and
//! merged, oldest first, across the ports; without that a failback (both ports carrying the
//! flow for a few ms) read as hundreds of reordered frames whose stamps went back. Hardware
//! stamps are on the NIC's clock, which no hold-back can be judged against: they are handed
//! over port after port, as the rings give them.
//!
//! A port whose interface goes down (a link flap made on purpose) or away does not end the
//! meter: its error is counted, and it is tried again after 1 ms (an AF_PACKET socket
//! receives again once its interface is back up). May import `rx`, `socket`, `kernel` and
//! `error`.

use std::collections::VecDeque;

use crate::error::IoError;
use crate::kernel::nic::IfaceInfo;
use crate::rx::{RxFrame, RxSource, RxStats};

/// How long a frame is held after its stamp before it is handed over in time order: the
/// ring's 8 ms block timeout, and room for a late timer on a busy host.
pub const HOLD_NS: u64 = 25_000_000;

/// Several RX sources read as one.
pub struct RxPorts {
    ports: Vec<Box<dyn RxSource>>,
    /// Each port's errors (its interface went down, or away): the count, the first, and
    /// when to try it again. The others go on; a port that comes back is read again.
    faults: Vec<Fault>,
    /// The port drained first in the next round, so that none waits behind a busy one.
    next: usize,
    /// Frames held to be handed over in time order (None: as the rings give them).
    merge: Option<Merge>,
}

/// A frame held back, copied out of its ring.
struct Held {
    ts_ns: u64,
    wire_len: u32,
    hw: bool,
    data: Vec<u8>,
}

/// Each port's held frames, in its ring's order, and buffers to reuse.
struct Merge {
    queues: Vec<VecDeque<Held>>,
    pool: Vec<Vec<u8>>,
}

impl Merge {
    fn hold(&mut self, port: usize, fr: &RxFrame<'_>) {
        let mut data = self.pool.pop().unwrap_or_default();
        data.clear();
        data.extend_from_slice(fr.data);
        self.queues[port].push_back(Held {
            ts_ns: fr.ts_ns,
            wire_len: fr.wire_len,
            hw: fr.hw,
            data,
        });
    }

    fn is_empty(&self) -> bool {
        self.queues.iter().all(VecDeque::is_empty)
    }

    /// Hands over, oldest first, every held frame stamped before `cutoff` (all for None).
    fn release(&mut self, cutoff: Option<u64>, f: &mut dyn FnMut(RxFrame<'_>)) -> u64 {
        let mut n = 0;
        loop {
            let oldest = self
                .queues
                .iter()
                .enumerate()
                .filter_map(|(i, q)| q.front().map(|h| (h.ts_ns, i)))
                .min();
            let Some((ts, i)) = oldest.filter(|(ts, _)| cutoff.is_none_or(|c| *ts < c)) else {
                return n;
            };
            let Some(h) = self.queues[i].pop_front() else { return n };
            f(RxFrame {
                ts_ns: ts,
                data: &h.data,
                wire_len: h.wire_len,
                hw: h.hw,
                port: i as u8,
            });
            self.pool.push(h.data);
            n += 1;
        }
    }
}

impl RxPorts {
    /// The most ports one meter reads: a frame carries its port's index in a byte.
    pub const MAX: usize = 255;

    /// `ports`: 1 to [`RxPorts::MAX`] sources (the caller checks; more are not read).
    /// `realtime`: their stamps are CLOCK_REALTIME (software or XDP), so frames are merged
    /// in time order (see the module's doc).
    pub fn new(mut ports: Vec<Box<dyn RxSource>>, realtime: bool) -> RxPorts {
        ports.truncate(Self::MAX);
        assert!(!ports.is_empty(), "a meter reads at least one port");
        let faults = (0..ports.len()).map(|_| Fault::default()).collect();
        let merge = realtime.then(|| Merge {
            queues: (0..ports.len()).map(|_| VecDeque::new()).collect(),
            pool: Vec::new(),
        });
        RxPorts {
            ports,
            faults,
            next: 0,
            merge,
        }
    }

    /// One pass over every port without waiting: frames to `f`, or held to be merged.
    fn drain(&mut self, f: &mut dyn FnMut(RxFrame<'_>)) -> Result<u64, IoError> {
        let k = self.ports.len();
        let mut n = 0;
        for i in 0..k {
            let p = (self.next + i) % k;
            if self.faults[p].resting() {
                continue;
            }
            let merge = &mut self.merge;
            let got = self.ports[p].poll(0, &mut |mut fr| match merge.as_mut() {
                Some(m) => m.hold(p, &fr),
                None => {
                    fr.port = p as u8;
                    f(fr)
                }
            });
            match got {
                Ok(m) => n += m,
                Err(e) => self.faults[p].note(e),
            }
        }
        self.next = (self.next + 1) % k;
        Ok(n)
    }

    /// Waits up to `timeout_ms` for any port's descriptor to turn readable (a short nap
    /// when a port rests after a fault, so that it is tried again in time).
    fn wait(&self, timeout_ms: i32) {
        let mut fds: Vec<libc::pollfd> = self
            .ports
            .iter()
            .zip(&self.faults)
            .filter(|(_, f)| !f.resting())
            .filter_map(|(p, _)| p.raw_fd())
            .map(|fd| libc::pollfd {
                fd,
                events: libc::POLLIN,
                revents: 0,
            })
            .collect();
        if fds.len() < self.ports.len() {
            // A source without a descriptor, or resting, is polled again after a short nap.
            std::thread::sleep(std::time::Duration::from_millis(timeout_ms.clamp(0, 1) as u64));
            return;
        }
        // SAFETY: fds is a valid array of pollfd for the call's length.
        unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, timeout_ms) };
    }
}

/// How long a port that failed rests before it is polled again: long enough that a port
/// whose error stays does not spin the meter, short enough that the frames its ring still
/// hands over after the fault (its last block) are read well inside [`HOLD_NS`].
const RETRY: std::time::Duration = std::time::Duration::from_millis(1);

#[derive(Default)]
struct Fault {
    count: u64,
    first: Option<String>,
    until: Option<std::time::Instant>,
}

impl Fault {
    fn resting(&self) -> bool {
        self.until.is_some_and(|t| std::time::Instant::now() < t)
    }
    fn note(&mut self, e: IoError) {
        self.count += 1;
        self.first.get_or_insert_with(|| e.to_string());
        self.until = Some(std::time::Instant::now() + RETRY);
    }
}

impl RxSource for RxPorts {
    fn poll(&mut self, timeout_ms: i32, f: &mut dyn FnMut(RxFrame<'_>)) -> Result<u64, IoError> {
        let mut n = self.drain(f)?;
        if n == 0 && timeout_ms > 0 {
            // Held frames come due within a few ms: wait no longer than that for new ones.
            let held = self.merge.as_ref().is_some_and(|m| !m.is_empty());
            self.wait(if held { timeout_ms.min(5) } else { timeout_ms });
            n = self.drain(f)?;
        }
        match self.merge.as_mut() {
            None => Ok(n),
            Some(m) => {
                let now = crate::kernel::socket::clock_ns(libc::CLOCK_REALTIME) as u64;
                Ok(m.release(Some(now.saturating_sub(HOLD_NS)), f))
            }
        }
    }

    fn finish(&mut self, f: &mut dyn FnMut(RxFrame<'_>)) -> Result<u64, IoError> {
        // The last look takes every port, resting or not.
        for x in &mut self.faults {
            x.until = None;
        }
        self.drain(f)?;
        Ok(self.merge.as_mut().map_or(0, |m| m.release(None, f)))
    }

    fn stats(&mut self) -> RxStats {
        self.ports.iter_mut().fold(RxStats::default(), |mut a, p| {
            let s = p.stats();
            a.packets += s.packets;
            a.drops += s.drops;
            a.freeze_count += s.freeze_count;
            a.user_stamped += s.user_stamped;
            a
        })
    }

    fn timestamp_source(&self) -> String {
        self.ports[0].timestamp_source()
    }

    fn stamp(&self) -> &'static str {
        self.ports[0].stamp()
    }

    fn describe(&self) -> String {
        let each: Vec<String> = self
            .ports
            .iter()
            .enumerate()
            .map(|(i, p)| format!("[{i}] {}", p.describe()))
            .collect();
        format!("{} ports drained in turn: {}", self.ports.len(), each.join("; "))
    }

    /// The first port's interface (the report lists them all).
    fn info(&self) -> &IfaceInfo {
        self.ports[0].info()
    }

    fn warnings(&self) -> Vec<String> {
        let mut w: Vec<String> = self.ports.iter().flat_map(|p| p.warnings()).collect();
        for (i, f) in self.faults.iter().enumerate() {
            if let Some(e) = &f.first {
                w.push(format!(
                    "RX port [{i}] ({}) failed {} time(s), first: {e}. The other ports were metered throughout, and this one again whenever it received",
                    self.ports[i].info().name,
                    f.count,
                ));
            }
        }
        w
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A source that hands over its scripted frames (stamp, first byte) once, then fails
    /// once when `fail` is set.
    struct Script {
        frames: Vec<(u64, u8)>,
        fail: bool,
        info: IfaceInfo,
    }

    impl RxSource for Script {
        fn poll(&mut self, _t: i32, f: &mut dyn FnMut(RxFrame<'_>)) -> Result<u64, IoError> {
            if std::mem::take(&mut self.fail) {
                return Err(IoError::InterfaceDown("x".into()));
            }
            let n = self.frames.len() as u64;
            for (ts, b) in self.frames.drain(..) {
                f(RxFrame {
                    ts_ns: ts,
                    data: &[b; 60],
                    wire_len: 60,
                    hw: false,
                    port: 0,
                });
            }
            Ok(n)
        }
        fn stats(&mut self) -> RxStats {
            RxStats::default()
        }
        fn timestamp_source(&self) -> String {
            String::new()
        }
        fn describe(&self) -> String {
            String::new()
        }
        fn info(&self) -> &IfaceInfo {
            &self.info
        }
    }

    fn script(frames: Vec<(u64, u8)>, fail: bool) -> Box<dyn RxSource> {
        Box::new(Script {
            frames,
            fail,
            info: IfaceInfo {
                name: "x".into(),
                index: 1,
                up: true,
                running: true,
                mtu: 1500,
                speed_bps: None,
                driver: None,
            },
        })
    }

    #[test]
    fn frames_come_out_in_stamp_order_tagged_with_their_port_and_a_failed_port_does_not_stop_the_rest() {
        let now = crate::kernel::socket::clock_ns(libc::CLOCK_REALTIME) as u64;
        let old = now - 5_000_000;
        // Port 0 fails first, so its block is read after port 1's newer one; the last frame
        // is too recent to come out before the end.
        let a = script(vec![(old, 10), (old + 2, 12)], false);
        let b = script(vec![(old + 1, 11), (old + 3, 13), (now + 1_000_000_000, 14)], true);
        let mut rx = RxPorts::new(vec![b, a], true);
        let mut seen = Vec::new();
        let mut take = |f: RxFrame<'_>| seen.push((f.ts_ns - old, f.data[0], f.port));
        for nap in [2, 30] {
            rx.poll(0, &mut take).expect("a failed port does not fail the meter");
            std::thread::sleep(std::time::Duration::from_millis(nap));
        }
        rx.poll(0, &mut take).expect("poll");
        rx.finish(&mut take).expect("finish");
        let expected = vec![(0, 10, 1), (1, 11, 0), (2, 12, 1), (3, 13, 0), (1_005_000_000, 14, 0)];
        assert_eq!(
            seen, expected,
            "expected stamp order across ports, the recent frame at the end"
        );
        assert_eq!(rx.faults[0].count, 1, "expected port 0's fault counted");
        assert!(rx.warnings()[0].contains("failed 1 time"), "got {:?}", rx.warnings());
    }
}
