//! The traffic meter, sans IO: frames and their RX timestamps in, per-stream metrics out.
//! The live RX ring, pcap/pcapng files and CSV timestamp tables all feed the same [`Meter`].
//!
//! Holds: frame classification, sequence tracking, latency histograms, per-stream meters and
//! their report. May import `packet` (the signature, filler frames), `timing` (a stream's
//! schedule, regenerated as the reference of its gaps) and `host`.

pub mod buckets;
pub mod classify;
pub mod episodes;
pub mod lazy;
pub mod plan;
pub mod reference;
pub mod report;
pub mod seq;
pub mod signed;
pub mod stream;
pub mod tags;
pub mod windows;

use std::collections::HashMap;

use crate::packet::signature::Signature;

pub use classify::{classify, classify_cut, Class, FlowKey, Foreign, ForeignCounts};
pub use report::{Calibration, CalibrationRef, CaptureStats, MeterReport, StreamRx};
pub use stream::StreamMeter;

/// What the sender promised for one signed stream.
#[derive(Debug, Clone, PartialEq)]
pub struct StreamTarget {
    pub name: String,
    pub target_pps: Option<f64>,
    /// Send loops the stream was split over (its sequence numbers interleave).
    pub lanes: u32,
    /// What its gaps are measured against.
    pub gaps: reference::GapReference,
    /// Bits of its frames to count them by ([`tags`]); none for most streams.
    pub tags: Vec<tags::TagField>,
    /// A stream sent without a signature, or with one no parser finds (headers set by
    /// hand): what its frames look like, one match per variant ([`plan`]); empty for any
    /// other stream.
    pub plan: Vec<plan::PlanMatch>,
}

/// One stream's running counts while the meter runs. Loss here is the gaps in the sequence
/// numbers so far; the tail is known only when the sender's count is joined at the end.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct LiveRx {
    pub name: String,
    pub id: Option<u16>,
    pub received: u64,
    pub bytes: u64,
    pub lost: u64,
    pub reordered: u64,
    pub duplicated: u64,
    /// Loss episodes so far, and the span of the longest (`meter::episodes`).
    pub loss_episodes: u64,
    pub longest_outage_ns: u64,
    pub latency_p50_ns: Option<i64>,
    pub latency_p99_ns: Option<i64>,
    pub latency_p99_9_ns: Option<i64>,
    /// A meter on several ports: frames received on each, in port order (else empty).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub ports: Vec<u64>,
    /// A stream with metric tags: its frames by their value.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tags: Option<tags::TagsRx>,
}

/// How to meter.
#[derive(Debug, Clone)]
pub struct MeterConfig {
    /// Latency histogram resolution in ns (10 by default).
    pub latency_unit_ns: u64,
    /// Signed streams by id: names and targets (from the profile or a TX result).
    pub targets: HashMap<u16, StreamTarget>,
    /// A target rate for every stream not in `targets` (`--target-pps`).
    pub default_target_pps: Option<f64>,
    /// Whether the signature's TX time and the RX time are on the same clock.
    pub latency: bool,
    /// Subtracted from every latency (from a calibration).
    pub latency_offset_ns: i64,
    /// Meter unsigned TCP/UDP frames as flows by 5-tuple (else they count as foreign).
    pub unsigned_flows: bool,
    /// At most this many unsigned flows; more count as foreign.
    pub max_flows: usize,
    /// Warm-up: signed frames whose TX time is less than this many ns after the warm-up's
    /// start are counted per stream (`warmup_frames`) and not metered. 0: none.
    pub warmup_ns: u64,
}

impl Default for MeterConfig {
    fn default() -> Self {
        MeterConfig {
            latency_unit_ns: 10,
            targets: HashMap::new(),
            default_target_pps: None,
            latency: true,
            latency_offset_ns: 0,
            unsigned_flows: true,
            max_flows: 256,
            warmup_ns: 0,
        }
    }
}

/// The meter: classifies each frame and feeds its stream's [`StreamMeter`].
pub struct Meter {
    cfg: MeterConfig,
    /// Stream id -> index + 1 in `signed` (0: not seen yet).
    index: Vec<u32>,
    signed: Vec<StreamMeter>,
    flows: HashMap<FlowKey, usize>,
    unsigned: Vec<StreamMeter>,
    foreign: ForeignCounts,
    /// Filler frames (rate_control = "filler"): neither loss nor foreign traffic.
    fillers: u64,
    frames: u64,
    t0: Option<u64>,
    t_last: u64,
    cut: report::CutFrames,
    /// The TX time from which the warm-up counts: set by the run
    /// ([`Meter::set_warmup_start`]), else the first signed frame's.
    warmup_from: Option<u64>,
    /// Warm-up frames per stream id.
    warmup: HashMap<u16, u64>,
    /// A meter on several ports counts each stream per port ([`Meter::at_port`]).
    multi_port: bool,
    port: u8,
    /// Whether any stream has metric tags (the frame is read again for them).
    tagged: bool,
    /// The unsigned streams, known by their headers.
    plan: plan::Plan,
}

impl Meter {
    pub fn new(cfg: MeterConfig) -> Meter {
        let cfg_tagged = cfg.targets.values().any(|t| !t.tags.is_empty());
        let mut ids: Vec<u16> = cfg.targets.keys().copied().collect();
        ids.sort_unstable();
        let plan = plan::Plan::new(
            ids.iter()
                .flat_map(|id| cfg.targets[id].plan.iter().map(|m| (m.clone(), *id)))
                .collect(),
        );
        Meter {
            plan,
            cfg,
            index: vec![0; 1 << 16],
            signed: Vec::new(),
            flows: HashMap::new(),
            unsigned: Vec::new(),
            foreign: ForeignCounts::default(),
            fillers: 0,
            frames: 0,
            t0: None,
            t_last: 0,
            cut: report::CutFrames::default(),
            warmup_from: None,
            warmup: HashMap::new(),
            multi_port: false,
            port: 0,
            tagged: cfg_tagged,
        }
    }

    /// Reads `n` ports: each stream's frames are also counted per port (`rx_ports`).
    pub fn set_ports(&mut self, n: usize) {
        self.multi_port = n > 1;
    }

    /// The port the next frames come in on (for a meter on several ports).
    #[inline]
    pub fn at_port(&mut self, port: u8) {
        self.port = port;
    }

    /// Whether the meter has a warm-up and does not know yet when it starts.
    pub fn warmup_pending(&self) -> bool {
        self.cfg.warmup_ns > 0 && self.warmup_from.is_none()
    }

    /// The warm-up starts at this TX time (the run's start on the signature's clock): frames
    /// sent before `tx_ns + warmup_ns` are warm-up. Without it, the first signed frame's TX
    /// time is taken (an offline capture of a run whose first frame arrived).
    pub fn set_warmup_start(&mut self, tx_ns: u64) {
        self.warmup_from = Some(tx_ns);
    }

    /// Whether a signed frame sent at `tx_ns` falls in the warm-up; counts it if so.
    #[inline]
    fn in_warmup(&mut self, stream: u16, tx_ns: u64) -> bool {
        if self.cfg.warmup_ns == 0 {
            return false;
        }
        let from = *self.warmup_from.get_or_insert(tx_ns);
        if tx_ns >= from.saturating_add(self.cfg.warmup_ns) {
            return false;
        }
        *self.warmup.entry(stream).or_insert(0) += 1;
        true
    }

    pub fn config(&self) -> &MeterConfig {
        &self.cfg
    }

    /// Frames taken so far.
    pub fn frames(&self) -> u64 {
        self.frames
    }

    /// Takes one frame with its RX time in ns and its length on the wire (without FCS).
    #[inline]
    pub fn on_frame(&mut self, ts_ns: u64, frame: &[u8], wire_len: u32) {
        // The common frame first, its signature kept in registers: through `Class` it went
        // to the stack in parts and was read back whole, a store-forwarding stall per frame.
        if let Some(sig) = classify::signed_udp4(frame) {
            self.note_cut(frame, wire_len);
            return self.signed_frame(ts_ns, frame, wire_len, sig);
        }
        if crate::packet::filler::is_filler(frame) {
            self.tick(ts_ns);
            self.fillers += 1;
            return;
        }
        // `classify` without its fast path, which found nothing above.
        let mut class = classify::classify_parsed(frame);
        if self.note_cut(frame, wire_len) && class == Class::Foreign(Foreign::Malformed) {
            // Headers that announce more than was captured are read as far as they go.
            class = classify_cut(frame);
        }
        if !matches!(class, Class::Signed(_)) {
            if let Some((id, at_end)) = self.plan.stream_of(frame) {
                let sig = at_end.then(|| Signature::from_payload_end(frame)).flatten();
                return match sig.filter(|s| s.stream == id) {
                    Some(sig) => self.signed_frame(ts_ns, frame, wire_len, sig),
                    None => self.planned(ts_ns, frame, wire_len, id),
                };
            }
        }
        match class {
            Class::Signed(sig) => self.signed_frame(ts_ns, frame, wire_len, sig),
            Class::Flow(key) => self.on_flow(ts_ns, wire_len, Some(key)),
            Class::Foreign(f) => {
                self.tick(ts_ns);
                self.foreign.add(f);
            }
        }
    }

    /// Counts a frame captured short of the wire (a snap length); whether it was.
    #[inline(always)]
    fn note_cut(&mut self, frame: &[u8], wire_len: u32) -> bool {
        let cut = (frame.len() as u64) < u64::from(wire_len);
        if cut {
            self.cut.note(frame.len() as u64, u64::from(wire_len));
        }
        cut
    }

    #[inline]
    fn tick(&mut self, ts_ns: u64) -> u64 {
        self.frames += 1;
        self.t_last = self.t_last.max(ts_ns);
        *self.t0.get_or_insert(ts_ns)
    }

    /// The sender changed stream `id`'s rate while it ran: its gaps have no reference from
    /// the profile any more, so the precision figures give way to `why` (those measured so
    /// far are dropped too, since the report could not say which rate they were against).
    pub fn rate_changed(&mut self, id: u16, why: &str) {
        if let Some(t) = self.cfg.targets.get_mut(&id) {
            t.target_pps = None;
            t.gaps = reference::GapReference::Unknown(why.to_string());
        }
        let slot = self.index.get(id as usize).copied().unwrap_or(0);
        if slot > 0 {
            self.signed[slot as usize - 1].drop_reference(why);
        }
    }

    /// A signed frame: metered, then counted by its tags when its stream has some.
    #[inline]
    fn signed_frame(&mut self, ts_ns: u64, frame: &[u8], wire_len: u32, sig: Signature) {
        let tagged = self.tagged;
        let Some(m) = self.signed(ts_ns, wire_len, sig) else {
            return;
        };
        if tagged {
            m.on_tags(ts_ns, frame, wire_len);
        }
    }

    /// Takes a signed arrival whose signature was read elsewhere (a CSV of timestamps).
    #[inline]
    pub fn on_signed(&mut self, ts_ns: u64, wire_len: u32, sig: Signature) {
        self.signed(ts_ns, wire_len, sig);
    }

    /// Meters a signed arrival; its stream's meter unless it fell in the warm-up.
    #[inline]
    fn signed(&mut self, ts_ns: u64, wire_len: u32, sig: Signature) -> Option<&mut StreamMeter> {
        if self.in_warmup(sig.stream, sig.tx_ns) {
            self.frames += 1;
            return None;
        }
        let t0 = self.tick(ts_ns);
        let multi_port = self.multi_port;
        let port = self.port;
        let m = self.stream_meter(sig.stream, t0);
        m.on_frame(ts_ns, wire_len, Some((sig.seq, sig.tx_ns)));
        if multi_port {
            m.on_port(port, ts_ns, wire_len);
        }
        Some(m)
    }

    /// Stream `id`'s meter, made at its first frame.
    #[inline]
    fn stream_meter(&mut self, id: u16, t0: u64) -> &mut StreamMeter {
        let slot = self.index[id as usize];
        if slot == 0 {
            let (name, target) = match self.cfg.targets.get(&id) {
                Some(t) => (t.name.clone(), t.target_pps.or(self.cfg.default_target_pps)),
                None => (format!("stream {id}"), self.cfg.default_target_pps),
            };
            self.signed
                .push(StreamMeter::new(name, Some(id), None, target, &self.cfg, t0));
            self.index[id as usize] = self.signed.len() as u32;
            return self.signed.last_mut().expect("just pushed");
        }
        &mut self.signed[slot as usize - 1]
    }

    /// A frame of an unsigned stream the plan knows: counted without sequence or latency
    /// (it has neither), and by its tags when the stream has some. No warm-up: the frame
    /// does not say when it was sent.
    fn planned(&mut self, ts_ns: u64, frame: &[u8], wire_len: u32, id: u16) {
        let t0 = self.tick(ts_ns);
        let (multi_port, port, tagged) = (self.multi_port, self.port, self.tagged);
        let m = self.stream_meter(id, t0);
        m.on_frame(ts_ns, wire_len, None);
        if multi_port {
            m.on_port(port, ts_ns, wire_len);
        }
        if tagged {
            m.on_tags(ts_ns, frame, wire_len);
        }
    }

    /// Takes an unsigned arrival: a TCP/UDP flow by its 5-tuple, or (`None`) one anonymous
    /// series of timestamps (a CSV without stream columns).
    pub fn on_flow(&mut self, ts_ns: u64, wire_len: u32, key: Option<FlowKey>) {
        let t0 = self.tick(ts_ns);
        if !self.cfg.unsigned_flows && key.is_some() {
            self.foreign.total += 1;
            self.foreign.unsigned += 1;
            return;
        }
        let k = key.unwrap_or(FlowKey {
            src: std::net::Ipv4Addr::UNSPECIFIED.into(),
            dst: std::net::Ipv4Addr::UNSPECIFIED.into(),
            proto: 0,
            sport: 0,
            dport: 0,
        });
        let i = match self.flows.get(&k) {
            Some(&i) => i,
            None if self.unsigned.len() < self.cfg.max_flows => {
                let name = if key.is_some() {
                    format!("flow {}", self.unsigned.len())
                } else {
                    "timestamps".to_string()
                };
                self.unsigned.push(StreamMeter::new(
                    name,
                    None,
                    key.map(|k| k.to_string()),
                    self.cfg.default_target_pps,
                    &self.cfg,
                    t0,
                ));
                self.flows.insert(k, self.unsigned.len() - 1);
                self.unsigned.len() - 1
            }
            None => {
                self.foreign.total += 1;
                self.foreign.unsigned += 1;
                return;
            }
        };
        self.unsigned[i].on_frame(ts_ns, wire_len, None);
        if self.multi_port {
            self.unsigned[i].on_port(self.port, ts_ns, wire_len);
        }
    }

    /// Every stream's running counts (signed by id, then flows): see [`StreamMeter::live`].
    pub fn live(&self) -> Vec<LiveRx> {
        let mut v: Vec<LiveRx> = self.signed.iter().map(StreamMeter::live).collect();
        v.sort_by_key(|s| s.id);
        v.extend(self.unsigned.iter().map(StreamMeter::live));
        v
    }

    /// The report so far: signed streams by id, then unsigned flows in order of appearance.
    /// Source and timestamp fields are left for the caller.
    pub fn report(&self) -> MeterReport {
        let mut streams: Vec<StreamRx> = self.signed.iter().map(StreamMeter::report).collect();
        streams.sort_by_key(|s| s.id);
        for s in &mut streams {
            s.warmup_frames = s.id.and_then(|id| self.warmup.get(&id)).copied().unwrap_or(0);
        }
        streams.extend(self.unsigned.iter().map(StreamMeter::report));
        MeterReport {
            latency_enabled: self.cfg.latency,
            duration_ns: self.t0.map_or(0, |t| self.t_last - t),
            capture: CaptureStats {
                frames: self.frames,
                kernel_drops: None,
                freeze_count: None,
                cut: (self.cut.frames > 0).then(|| self.cut.clone()),
                ..Default::default()
            },
            foreign: self.foreign.clone(),
            fillers: self.fillers,
            warmup_frames: self.warmup.values().sum(),
            streams,
            ..Default::default()
        }
    }
}

#[cfg(test)]
mod tests;
