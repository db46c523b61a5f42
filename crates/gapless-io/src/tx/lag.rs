//! A LAG as one TX port ([`LagTx`]): the loop builds each frame in the LAG's own buffers,
//! and `send` puts it on a member that distributes, chosen by the frame's spreading hash
//! (`gapless_core::packet::spread`), as a switch does. Which members distribute is
//! [`LagLive`], shared with whatever runs the LAG's protocol (the OTG server's LACP driver):
//! it is read once per batch, so a member that stops distributing takes no frame after
//! the batch under way. Each member's frames and bytes are counted there too.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use gapless_core::packet::spread;

use super::TxBackend;
use crate::error::IoError;

/// Which members distribute now, and what each sent.
#[derive(Debug)]
pub struct LagLive {
    /// Bit `k`: member `k` distributes.
    mask: AtomicU64,
    frames: Vec<AtomicU64>,
    bytes: Vec<AtomicU64>,
}

impl LagLive {
    /// `n` members (at most 64), none distributing.
    pub fn new(n: usize) -> LagLive {
        assert!(n <= 64, "a LAG of {n} members: at most 64");
        LagLive {
            mask: AtomicU64::new(0),
            frames: (0..n).map(|_| AtomicU64::new(0)).collect(),
            bytes: (0..n).map(|_| AtomicU64::new(0)).collect(),
        }
    }

    /// `n` members, every one distributing (a LAG no protocol runs).
    pub fn all(n: usize) -> LagLive {
        let l = LagLive::new(n);
        l.mask.store(u64::MAX >> (64 - n.max(1)), Ordering::Relaxed);
        l
    }

    pub fn members(&self) -> usize {
        self.frames.len()
    }

    /// Member `k` distributes (or stops).
    pub fn set(&self, k: usize, on: bool) {
        if on {
            self.mask.fetch_or(1 << k, Ordering::Release);
        } else {
            self.mask.fetch_and(!(1 << k), Ordering::Release);
        }
    }

    pub fn distributing(&self, k: usize) -> bool {
        self.mask.load(Ordering::Acquire) & (1 << k) != 0
    }

    /// The members distributing now, in order.
    pub fn up(&self) -> Vec<usize> {
        let mask = self.mask.load(Ordering::Acquire);
        (0..self.members()).filter(|k| mask & (1 << k) != 0).collect()
    }

    /// The member of `up` (see [`LagLive::up`]; not empty) that `frame` leaves on, by its
    /// spreading hash.
    pub fn pick(up: &[usize], frame: &[u8]) -> usize {
        up[spread::hash(frame) as usize % up.len()]
    }

    /// Frames and bytes member `k` sent.
    pub fn sent(&self, k: usize) -> (u64, u64) {
        (
            self.frames[k].load(Ordering::Relaxed),
            self.bytes[k].load(Ordering::Relaxed),
        )
    }
}

/// A LAG's members under one TX port.
pub struct LagTx {
    members: Vec<Box<dyn TxBackend>>,
    live: Arc<LagLive>,
    bufs: Vec<u8>,
    stride: usize,
    batch: usize,
    /// Frames that found no member distributing, or whose member could not send them.
    dropped: u64,
    last: Option<String>,
    /// Scratch: each frame's member, and one member's lengths and times.
    on: Vec<usize>,
    lens: Vec<usize>,
    at: Vec<u64>,
}

impl LagTx {
    /// `members[k]` is member `k` of `live`; every member opened with `max_frame` and at least
    /// `batch` buffers.
    ///
    /// # Panics
    /// If there is no member or `live` counts another number of them (a planning bug).
    pub fn new(members: Vec<Box<dyn TxBackend>>, live: Arc<LagLive>, max_frame: usize, batch: usize) -> LagTx {
        assert!(
            !members.is_empty() && members.len() == live.members(),
            "a LAG of {} members with {} live",
            members.len(),
            live.members()
        );
        let batch = members
            .iter()
            .map(|m| m.max_batch())
            .min()
            .unwrap_or(1)
            .min(batch.max(1));
        let stride = max_frame.next_multiple_of(64);
        LagTx {
            members,
            live,
            bufs: vec![0; stride * batch],
            stride,
            batch,
            dropped: 0,
            last: None,
            on: Vec::with_capacity(batch),
            lens: Vec::with_capacity(batch),
            at: Vec::with_capacity(batch),
        }
    }

    /// Sends the frames `on` gave member `m`, copied into its buffers.
    fn send_on(&mut self, m: usize, lens: &[usize], at_ns: &[u64]) -> usize {
        self.lens.clear();
        self.at.clear();
        for (i, &len) in lens.iter().enumerate().filter(|(i, _)| self.on[*i] == m) {
            let j = self.lens.len();
            let src = &self.bufs[i * self.stride..i * self.stride + len];
            self.members[m].buf(j)[..len].copy_from_slice(src);
            self.lens.push(len);
            self.at.push(at_ns.get(i).copied().unwrap_or(0));
        }
        if self.lens.is_empty() {
            return 0;
        }
        // A member that cannot send (its link just went down, before the LAG's driver took it
        // out) loses its frames, not the run: the LAG goes on over the others.
        let sent = match self.members[m].send(&self.lens, &self.at) {
            Ok(n) => n,
            Err(e) => {
                self.dropped += self.lens.len() as u64;
                self.last = Some(format!("member {m}: {e}"));
                0
            }
        };
        let bytes: usize = self.lens[..sent].iter().sum();
        self.live.frames[m].fetch_add(sent as u64, Ordering::Relaxed);
        self.live.bytes[m].fetch_add(bytes as u64, Ordering::Relaxed);
        sent
    }
}

impl TxBackend for LagTx {
    fn name(&self) -> &'static str {
        self.members[0].name()
    }
    fn describe(&self) -> String {
        format!(
            "a LAG of {} members, each frame on one by its hash: {}",
            self.members.len(),
            self.members[0].describe()
        )
    }
    fn max_batch(&self) -> usize {
        self.batch
    }
    fn buf(&mut self, i: usize) -> &mut [u8] {
        &mut self.bufs[i * self.stride..(i + 1) * self.stride]
    }
    fn buf_run(&mut self, first: usize, n: usize) -> Option<(&mut [u8], usize)> {
        let s = self.stride;
        Some((&mut self.bufs[first * s..(first + n) * s], s))
    }
    fn send(&mut self, lens: &[usize], at_ns: &[u64]) -> Result<usize, IoError> {
        let up = self.live.up();
        if up.is_empty() {
            self.dropped += lens.len() as u64;
            self.last = Some("no member of the LAG is distributing".into());
            return Ok(0);
        }
        self.on.clear();
        for (i, &len) in lens.iter().enumerate() {
            self.on
                .push(LagLive::pick(&up, &self.bufs[i * self.stride..i * self.stride + len]));
        }
        let mut sent = 0;
        for &m in &up {
            sent += self.send_on(m, lens, at_ns);
        }
        Ok(sent)
    }
    fn finish(&mut self) -> Result<(), IoError> {
        super::finish_all(&mut self.members)
    }
    fn errors(&self) -> u64 {
        self.dropped + self.members.iter().map(|m| m.errors()).sum::<u64>()
    }
    fn last_error(&self) -> Option<String> {
        self.members
            .iter()
            .find_map(|m| m.last_error())
            .or_else(|| self.last.clone())
    }
    fn is_live(&self) -> bool {
        self.members[0].is_live()
    }
}

#[cfg(test)]
mod tests;
